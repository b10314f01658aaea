#include "fuzz/gen/matcher.h"

#include <cmath>

#include "fuzz/gen/common.h"
#include "fuzz/gen/hostile.h"

namespace detfuzz::gen {
namespace {

// Quality values: sixteenths, thousandths, a few ulps around either threshold (as rounded
// through some dtype first), or 0; weights 3 / 2 / 2 / 2 / 1, the kind shrinking toward
// sixteenths.
rc::Gen<std::vector<double>> quality_values(DType dtype, double high, double low, std::size_t n) {
  return rows(
      n,
      [dtype, high, low](const Row<5>& r) {
        static constexpr DType kThroughDtypes[] = {DType::fp64, DType::fp32, DType::bf16, DType::fp16};
        const auto [kind, sixteenths, thousandths, through, ulps] = r;
        if (kind < 3) return sixteenths / 16.0;
        if (kind < 5) return round_to(dtype, thousandths / 1000.0);
        if (kind < 9) {
          const double threshold = kind < 7 ? high : low;
          return step_ulps(dtype, round_to(dtype, round_to(kThroughDtypes[through], threshold)), ulps);
        }
        return 0.0;
      },
      Column{0, 10}, Column{0, 17}, Column{0, 1001}, Column{0, 4}, Column{-2, 3});
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
    return rc::gen::map(quality_values(dtype, thresholds.first, thresholds.second, values),
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
