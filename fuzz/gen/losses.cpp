#include "fuzz/gen/losses.h"

#include <cmath>

#include "fuzz/gen/common.h"

namespace detfuzz::gen {
namespace {

// A value: dyadic steps, arbitrary thousandths, or large (exp overflows fp16 past 11,
// fp32 past 88 without the max subtraction).
rc::Gen<double> loss_value(DType dtype, double scale) {
  return rc::gen::map(
      rc::gen::weightedOneOf<double>({{4, rc::gen::map(in_range(-256, 257), [](int k) { return k / 32.0; })},
                                      {3, rc::gen::map(in_range(-8000, 8001), [](int k) { return k / 1000.0; })},
                                      {1, rc::gen::element(12.0, -12.0, 90.0, -90.0, 1000.0, -1000.0)}}),
      [dtype, scale](double v) { return round_to(dtype, v * scale); });
}

}  // namespace

rc::Gen<RegressionLossProblem> regression_loss_problem(const BoxGenOptions& options) {
  const DType dtype = options.dtype;
  auto setup = rc::gen::tuple(rc::gen::element(RegressionLossProblem::Loss::smooth_l1, RegressionLossProblem::Loss::l1),
                              rc::gen::element(1.0, 1.0 / 9, 0.0, 0.5, std::ldexp(1.0, -10)),
                              rc::gen::element(RegressionLossProblem::Reduction::none, RegressionLossProblem::Reduction::sum,
                                               RegressionLossProblem::Reduction::mean),
                              count(std::max(0, options.max_boxes) * 4));
  return rc::gen::mapcat(setup, [dtype](const std::tuple<RegressionLossProblem::Loss, double,
                                                         RegressionLossProblem::Reduction, int>& s) {
    const auto& [loss, beta, reduction, n] = s;
    // Targets as generated, inputs either independent or the target +- beta (the branch
    // point) +- a few ulps. The generators that do not depend on the target are built once
    // per case: built per element, constructing and destroying them was about a third of a
    // regression_loss worker's time. (The same generators: the same values per seed.)
    const rc::Gen<double> value = loss_value(dtype, 1.0);
    const auto sign_and_ulps = rc::gen::pair(rc::gen::element(1.0, -1.0), in_range(-3, 4));
    auto pair = rc::gen::mapcat(value, [dtype, beta = beta, value, sign_and_ulps](double target) {
      auto near_beta = rc::gen::map(sign_and_ulps, [dtype, beta, target](const std::pair<double, int>& t) {
        const double at = round_to(dtype, target + t.first * beta);
        return std::make_pair(std::isfinite(at) ? step_ulps(dtype, at, t.second) : at, target);
      });
      auto independent = rc::gen::map(value, [target](double input) { return std::make_pair(input, target); });
      return rc::gen::weightedOneOf<std::pair<double, double>>({{3, independent}, {1, near_beta}});
    });
    return rc::gen::map(rc::gen::container<std::vector<std::pair<double, double>>>(static_cast<std::size_t>(n), pair),
                        [loss = loss, beta = beta, reduction = reduction](const std::vector<std::pair<double, double>>& pairs) {
                          RegressionLossProblem p;
                          p.loss = loss;
                          p.beta = beta;
                          p.reduction = reduction;
                          for (const auto& [input, target] : pairs) {
                            p.input.push_back(input);
                            p.target.push_back(target);
                          }
                          return p;
                        });
  });
}

rc::Gen<FastRcnnLossProblem> fast_rcnn_loss_problem(const BoxGenOptions& options) {
  const DType dtype = options.dtype;
  auto setup = rc::gen::tuple(rc::gen::element<std::int64_t>(2, 3, 5, 21, 81, 91), count(std::max(0, options.max_boxes)),
                              rc::gen::element(0.0, 0.25, 0.5, 1.0));
  return rc::gen::mapcat(setup, [dtype](const std::tuple<std::int64_t, int, double>& s) {
    const auto& [classes, n, positive_share] = s;
    auto proposal = rc::gen::tuple(
        rc::gen::container<std::vector<double>>(static_cast<std::size_t>(classes), loss_value(dtype, 1.0)),
        in_range(0, 1000), in_range<std::int64_t>(1, classes),
        rc::gen::container<std::vector<double>>(static_cast<std::size_t>(classes) * 4, loss_value(dtype, 0.25)),
        rc::gen::container<std::vector<double>>(4, loss_value(dtype, 0.25)));
    using Proposal = std::tuple<std::vector<double>, int, std::int64_t, std::vector<double>, std::vector<double>>;
    return rc::gen::map(rc::gen::container<std::vector<Proposal>>(static_cast<std::size_t>(n), proposal),
                        [classes = classes, share = positive_share](const std::vector<Proposal>& proposals) {
                          FastRcnnLossProblem p;
                          p.classes = classes;
                          for (const auto& [logits, draw, label, regression, targets] : proposals) {
                            p.class_logits.insert(p.class_logits.end(), logits.begin(), logits.end());
                            p.labels.push_back(draw < share * 1000 ? label : 0);
                            p.box_regression.insert(p.box_regression.end(), regression.begin(), regression.end());
                            p.regression_targets.insert(p.regression_targets.end(), targets.begin(), targets.end());
                          }
                          return p;
                        });
  });
}

}  // namespace detfuzz::gen
