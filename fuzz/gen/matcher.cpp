#include "fuzz/gen/matcher.h"

#include <cmath>

#include "fuzz/gen/common.h"
#include "fuzz/gen/hostile.h"

namespace detfuzz::gen {
namespace {

rc::Gen<double> quality_value(DType dtype, double high, double low) {
  auto around = [dtype](double threshold) {
    return rc::gen::map(rc::gen::pair(rc::gen::element(DType::fp64, DType::fp32, DType::bf16, DType::fp16), in_range(-2, 3)),
                        [dtype, threshold](const std::pair<DType, int>& t) {
                          const double at = round_to(dtype, round_to(t.first, threshold));
                          return step_ulps(dtype, at, t.second);
                        });
  };
  return rc::gen::weightedOneOf<double>({
      {3, rc::gen::map(in_range(0, 17), [](int k) { return k / 16.0; })},
      {2, rc::gen::map(in_range(0, 1001), [dtype](int k) { return round_to(dtype, k / 1000.0); })},
      {2, around(high)},
      {2, around(low)},
      {1, rc::gen::just(0.0)},
  });
}

}  // namespace

rc::Gen<MatcherProblem> matcher_problem(const BoxGenOptions& options) {
  const DType dtype = options.dtype;
  auto setup = rc::gen::tuple(in_range<std::int64_t>(1, 9), count(std::max(1, options.max_boxes)),
                              rc::gen::element(std::make_pair(0.7, 0.3), std::make_pair(0.5, 0.4), std::make_pair(0.5, 0.5)),
                              rc::gen::element(true, false));
  return rc::gen::mapcat(setup, [dtype](const std::tuple<std::int64_t, int, std::pair<double, double>, bool>& s) {
    const auto& [gts, predictions, thresholds, allow] = s;
    const auto values = static_cast<std::size_t>(gts * std::max(predictions, 1));
    return rc::gen::map(rc::gen::container<std::vector<double>>(values, quality_value(dtype, thresholds.first, thresholds.second)),
                        [gts = gts, n = std::max(predictions, 1), thresholds = thresholds, allow = allow](std::vector<double> q) {
                          MatcherProblem p;
                          p.ground_truths = gts;
                          p.predictions = n;
                          p.quality = std::move(q);
                          p.high = thresholds.first;
                          p.low = thresholds.second;
                          p.allow_low_quality_matches = allow;
                          return p;
                        });
  });
}

rc::Gen<MatcherProblem> hostile(rc::Gen<MatcherProblem> valid, DType dtype) {
  return rc::gen::map(rc::gen::pair(valid, rc::gen::pair(in_range<std::size_t>(0, 1 << 16),
                                                         rc::gen::element(NAN, INFINITY, -INFINITY))),
                      [](std::pair<MatcherProblem, std::pair<std::size_t, double>> p) {
                        if (!p.first.quality.empty()) p.first.quality[p.second.first % p.first.quality.size()] = p.second.second;
                        return p.first;
                      });
}

}  // namespace detfuzz::gen
