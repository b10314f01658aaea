#include "losses.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace detfuzz::oracles {
namespace {

constexpr std::size_t kFormats = kFloatDTypes.size();

// A tracked value with, per format, how far below / above it the other smooth-L1 branch
// may land (0 when the branch is decided in that format).
struct Branching {
  Tracked value;
  std::array<double, kFormats> below{}, above{};
};

Branching smooth_l1_term(ErrorTracker& t, double x, double y, double beta, bool l1) {
  const Tracked z = t.abs(t.sub(t.input(x), t.input(y)));
  if (l1 || beta == 0) return {z, {}, {}};
  const Tracked b = t.input(beta);
  const Tracked half = t.input(0.5);
  const Tracked quadratic = t.div(t.mul(t.mul(half, z), z), b);
  const Tracked linear = t.sub(z, t.mul(half, b));
  Branching result{z.value < beta ? quadratic : linear, {}, {}};
  const double other = z.value < beta ? linear.value : quadratic.value;
  for (std::size_t f = 0; f < kFormats; ++f)
    if (std::fabs(z.value - beta) <= z.error[f] + b.error[f]) {  // the comparison may flip
      result.below[f] = std::max(0.0, result.value.value - other);
      result.above[f] = std::max(0.0, other - result.value.value);
    }
  return result;
}

LossValue loss_value(const ErrorTracker& t, const Branching& b, bool undefined = false) {
  LossValue out;
  out.value = t.result(b.value, undefined);
  for (std::size_t f = 0; f < kFormats; ++f) {
    out.low[f] = b.value.value - b.below[f];
    out.high[f] = b.value.value + b.above[f];
  }
  return out;
}

// Sums terms (each with its branch slack), optionally divided by `divisor`.
LossValue reduce(ErrorTracker& t, const std::vector<Branching>& terms, std::size_t divisor) {
  Branching total{t.input(0.0), {}, {}};
  std::vector<Tracked> values;
  for (const Branching& term : terms) {
    values.push_back(term.value);
    for (std::size_t f = 0; f < kFormats; ++f) {
      total.below[f] += term.below[f];
      total.above[f] += term.above[f];
    }
  }
  total.value = t.reduction_sum(values);
  if (divisor == 0) {
    Branching undefined{t.input(std::numeric_limits<double>::quiet_NaN()), {}, {}};
    return loss_value(t, undefined, true);
  }
  if (divisor != 1) {
    const double n = static_cast<double>(divisor);
    total.value = t.div(total.value, t.input(n));
    for (std::size_t f = 0; f < kFormats; ++f) {
      total.below[f] /= n;
      total.above[f] /= n;
    }
  }
  return loss_value(t, total);
}

}  // namespace

std::vector<LossValue> regression_loss(const RegressionLossProblem& p) {
  const bool l1 = p.loss == RegressionLossProblem::Loss::l1;
  std::vector<LossValue> out;
  if (p.reduction == RegressionLossProblem::Reduction::none) {
    for (std::size_t i = 0; i < p.input.size(); ++i) {
      ErrorTracker t;
      out.push_back(loss_value(t, smooth_l1_term(t, p.input[i], p.target[i], p.beta, l1)));
    }
    return out;
  }
  ErrorTracker t;
  std::vector<Branching> terms;
  for (std::size_t i = 0; i < p.input.size(); ++i) terms.push_back(smooth_l1_term(t, p.input[i], p.target[i], p.beta, l1));
  out.push_back(reduce(t, terms, p.reduction == RegressionLossProblem::Reduction::mean ? p.input.size() : 1));
  return out;
}

std::vector<LossValue> fast_rcnn_loss(const FastRcnnLossProblem& p) {
  const std::size_t n = p.labels.size(), classes = static_cast<std::size_t>(p.classes);
  // Cross-entropy: -log_softmax(x)[label] = log(sum exp(x - max)) - (x[label] - max).
  ErrorTracker ce;
  std::vector<Branching> nll;
  for (std::size_t i = 0; i < n; ++i) {
    const double* row = &p.class_logits[i * classes];
    const Tracked max = ce.input(*std::max_element(row, row + classes));
    Tracked sum = ce.input(0.0);
    for (std::size_t c = 0; c < classes; ++c) sum = ce.add(sum, ce.exp(ce.sub(ce.input(row[c]), max)));
    const auto label = static_cast<std::size_t>(p.labels[i]);
    nll.push_back({ce.sub(ce.log(sum), ce.sub(ce.input(row[label]), max)), {}, {}});
  }
  // Box regression of the positives for their own class, smooth L1 (beta 1/9), summed, over
  // all sampled proposals.
  ErrorTracker box;
  std::vector<Branching> terms;
  for (std::size_t i = 0; i < n; ++i) {
    if (p.labels[i] <= 0) continue;
    const auto label = static_cast<std::size_t>(p.labels[i]);
    for (std::size_t k = 0; k < 4; ++k)
      terms.push_back(smooth_l1_term(box, p.box_regression[i * 4 * classes + 4 * label + k],
                                     p.regression_targets[i * 4 + k], 1.0 / 9, false));
  }
  return {reduce(ce, nll, n), reduce(box, terms, n)};
}

}  // namespace detfuzz::oracles
