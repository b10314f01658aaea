#include "fuzz/gen/losses.h"

#include <cmath>

#include "fuzz/gen/common.h"

namespace detfuzz::gen {
namespace {

// A value: dyadic steps, arbitrary thousandths, or large (exp overflows fp16 past 11,
// fp32 past 88 without the max subtraction). Drawn from four columns of a row: the kind
// (weights 4 / 3 / 1), then the value of each kind; the kind shrinks toward dyadic steps,
// the values toward 0.
const Column kValueKind{0, 8}, kDyadic{-256, 257, 0}, kThousandths{-8000, 8001, 0}, kLarge{0, 6};

double loss_value(DType dtype, double scale, int kind, int dyadic, int thousandths, int large) {
  static constexpr double kLargeValues[] = {12.0, -12.0, 90.0, -90.0, 1000.0, -1000.0};
  const double v = kind < 4 ? dyadic / 32.0 : kind < 7 ? thousandths / 1000.0 : kLargeValues[large];
  return round_to(dtype, v * scale);
}

// `n` loss values at `scale`.
rc::Gen<std::vector<double>> loss_values(DType dtype, double scale, std::size_t n) {
  return rows(
      n, [dtype, scale](const Row<4>& r) { return loss_value(dtype, scale, r[0], r[1], r[2], r[3]); }, kValueKind,
      kDyadic, kThousandths, kLarge);
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
    // Targets as generated; inputs independent (3 in 4) or the target +- beta (the branch
    // point) +- a few ulps. Columns: the target's value, the pairing (shrinks toward
    // independent), the input's value, the sign of beta and the ulps.
    auto pair = [dtype, beta = beta](const Row<11>& r) {
      const double target = loss_value(dtype, 1.0, r[0], r[1], r[2], r[3]);
      if (r[4] < 3) return std::make_pair(loss_value(dtype, 1.0, r[5], r[6], r[7], r[8]), target);
      const double at = round_to(dtype, target + (r[9] == 0 ? 1.0 : -1.0) * beta);
      return std::make_pair(std::isfinite(at) ? step_ulps(dtype, at, r[10]) : at, target);
    };
    auto pairs = rows(static_cast<std::size_t>(n), pair, kValueKind, kDyadic, kThousandths, kLarge, Column{0, 4},
                      kValueKind, kDyadic, kThousandths, kLarge, Column{0, 2}, Column{-3, 4, 0});
    return rc::gen::map(pairs,
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
    // Per proposal: `classes` logits, a draw that makes it positive with probability
    // `positive_share`, a foreground label, 4 deltas per class and 4 targets; each kind of
    // value drawn for all proposals at once, proposal by proposal (a smaller count keeps a
    // prefix of them).
    const auto proposals = static_cast<std::size_t>(n), per_class = static_cast<std::size_t>(classes);
    auto labels = rows(
        proposals, [](const Row<2>& r) { return std::make_pair(r[0], static_cast<std::int64_t>(r[1])); },
        Column{0, 1000}, Column{1, static_cast<int>(classes)});
    return rc::gen::map(rc::gen::tuple(loss_values(dtype, 1.0, proposals * per_class), labels,
                                       loss_values(dtype, 0.25, proposals * per_class * 4),
                                       loss_values(dtype, 0.25, proposals * 4)),
                        [classes = classes, share = positive_share](
                            const std::tuple<std::vector<double>, std::vector<std::pair<int, std::int64_t>>,
                                             std::vector<double>, std::vector<double>>& drawn) {
                          const auto& [logits, draws, regression, targets] = drawn;
                          FastRcnnLossProblem p;
                          p.classes = classes;
                          p.class_logits = logits;
                          for (const auto& [draw, label] : draws) p.labels.push_back(draw < share * 1000 ? label : 0);
                          p.box_regression = regression;
                          p.regression_targets = targets;
                          return p;
                        });
  });
}

}  // namespace detfuzz::gen
