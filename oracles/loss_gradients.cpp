#include "loss_gradients.h"

#include <algorithm>
#include <array>
#include <cmath>

namespace detfuzz::oracles {
namespace {

// A derivative as a sum of product terms: its fp64 value, per tier the interval its open
// decisions span, the sum of |term| (what rounding in any order scales with) and the count.
struct Derivative {
  double value = 0;
  std::array<double, 2> low{}, high{};
  double magnitude = 0;
  double terms = 0;

  void add(double term) { open(term, term, term); }
  // A term any subgradient in [lo, hi] may take; fp64's choice is `chosen`.
  void open(double chosen, double lo, double hi) {
    add_terms(chosen, {lo, lo}, {hi, hi}, std::max({std::fabs(chosen), std::fabs(lo), std::fabs(hi)}), 1);
  }
  // `count` product terms whose sum is `chosen` (or per tier anything in [lo, hi]) and whose
  // |term|s sum to `term_magnitude`.
  void add_terms(double chosen, std::array<double, 2> lo, std::array<double, 2> hi, double term_magnitude,
                 double count) {
    value += chosen;
    for (int tier = 0; tier < 2; ++tier) {
      low[tier] += lo[tier];
      high[tier] += hi[tier];
    }
    magnitude += term_magnitude;
    terms += count;
  }
};

GradientElement finish(const Derivative& d, DType storage, bool range_ok) {
  const DType formats[2] = {accumulate_type(storage), storage};
  const double fp64 = float_format(DType::fp64).unit_roundoff;
  GradientElement e;
  e.value = d.value;
  for (int tier = 0; tier < 2; ++tier) {
    const FloatFormat& f = float_format(formats[tier]);
    GradientTier& into = tier == 0 ? e.strict : e.storage;
    into.low = d.low[tier];
    into.high = d.high[tier];
    into.bound = kGradientRoundings * ((f.unit_roundoff + fp64) * d.magnitude + d.terms * f.min_normal * f.unit_roundoff);
  }
  e.range_ok = range_ok;
  return e;
}

GradientElement unconstrained_element() {
  GradientElement e;
  e.unconstrained = true;
  return e;
}

double sign(double v) { return v > 0 ? 1.0 : v < 0 ? -1.0 : 0.0; }

}  // namespace

std::vector<GradientElement> regression_loss_gradient(const RegressionLossProblem& p, DType storage) {
  const std::size_t n = p.input.size();
  const bool mean = p.reduction == RegressionLossProblem::Reduction::mean;
  const double scale = mean && n > 0 ? 1.0 / static_cast<double>(n) : 1.0;
  const DType formats[2] = {accumulate_type(storage), storage};
  const double largest = float_format(formats[0]).max_finite;
  std::vector<GradientElement> out;
  out.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    const double x = p.input[i], y = p.target[i];
    if (!std::isfinite(x) || !std::isfinite(y)) {
      out.push_back(unconstrained_element());
      continue;
    }
    const double d = x - y;
    Derivative g;
    if (p.loss == RegressionLossProblem::Loss::l1 || p.beta == 0) {
      // |d|: sign(d), and at d = 0 (decided exactly: x - y rounds to 0 only when x == y) any
      // subgradient in [-1, 1].
      if (d != 0)
        g.add(sign(d) * scale);
      else
        g.open(0.0, -scale, scale);
    } else {
      const double quadratic = d / p.beta * scale, linear = sign(d) * scale;
      const bool smooth = std::fabs(d) < p.beta;
      std::array<double, 2> lo{}, hi{};
      const double chosen = smooth ? quadratic : linear;
      for (int tier = 0; tier < 2; ++tier) {
        // The kernel's x - y and beta carry one rounding each in the tier's format.
        const double u = float_format(formats[tier]).unit_roundoff;
        const bool may_flip = std::fabs(std::fabs(d) - p.beta) <= 2 * u * (std::fabs(d) + p.beta);
        lo[tier] = may_flip ? std::min(quadratic, linear) : chosen;
        hi[tier] = may_flip ? std::max(quadratic, linear) : chosen;
      }
      g.add_terms(chosen, lo, hi, std::max(std::fabs(quadratic), std::fabs(linear)), 1);
    }
    const bool range_ok = std::fabs(d) <= largest && (p.beta == 0 || std::fabs(d / p.beta) <= largest);
    out.push_back(finish(g, storage, range_ok));
  }
  return out;
}

namespace {

// Which of two operands of max / min the gradient goes to: one of them, or (a tie) either
// share.
enum class Route { first, second, tie };

Route max_route(double a, double b) { return a > b ? Route::first : a < b ? Route::second : Route::tie; }
Route min_route(double a, double b) { return a < b ? Route::first : a > b ? Route::second : Route::tie; }

// Adds the product terms of `group` (one chain through a max or min) into `into` when the
// operand `side` (0: boxes1's, 1: boxes2's) receives it; a tie gives it any share in [0, 1]
// (fp64 and autograd: half).
void routed(Derivative& into, Route route, int side, std::initializer_list<double> group) {
  if (route != Route::tie && static_cast<int>(route) != side) return;
  double total = 0, magnitude = 0;
  for (double term : group) {
    total += term;
    magnitude += std::fabs(term);
  }
  const bool tie = route == Route::tie;
  const double lo = tie ? std::min(0.0, total) : total, hi = tie ? std::max(0.0, total) : total;
  // Rounding scales with each term, not with their (possibly cancelling) sum.
  into.add_terms(tie ? total / 2 : total, {lo, lo}, {hi, hi}, magnitude, static_cast<double>(group.size()));
}

}  // namespace

std::vector<GradientElement> giou_loss_gradient(const GiouLossProblem& p, DType storage) {
  const std::size_t n = p.boxes1.size();
  const double scale =
      p.reduction == RegressionLossProblem::Reduction::mean && n > 0 ? 1.0 / static_cast<double>(n) : 1.0;
  const DType strict = accumulate_type(storage);
  const double largest = float_format(strict).max_finite, smallest = float_format(strict).min_normal;
  std::vector<GradientElement> out(2 * 4 * n);
  for (std::size_t i = 0; i < n; ++i) {
    const Box& a = p.boxes1[i];
    const Box& b = p.boxes2[i];
    GradientElement* grad[2] = {&out[4 * i], &out[4 * (n + i)]};
    const double coordinates[8] = {a.x1, a.y1, a.x2, a.y2, b.x1, b.y1, b.x2, b.y2};
    if (!std::all_of(std::begin(coordinates), std::end(coordinates), [](double v) { return std::isfinite(v); })) {
      for (auto* side : grad)
        for (int k = 0; k < 4; ++k) side[k] = unconstrained_element();
      continue;
    }
    const double w[2] = {a.x2 - a.x1, b.x2 - b.x1}, h[2] = {a.y2 - a.y1, b.y2 - b.y1};
    const double xk1 = std::max(a.x1, b.x1), yk1 = std::max(a.y1, b.y1);
    const double xk2 = std::min(a.x2, b.x2), yk2 = std::min(a.y2, b.y2);
    const bool overlap = yk2 > yk1 && xk2 > xk1;
    const double iw = overlap ? xk2 - xk1 : 0, ih = overlap ? yk2 - yk1 : 0, inter = iw * ih;
    const double union_area = w[0] * h[0] + w[1] * h[1] - inter, ue = union_area + p.eps;
    const double cw = std::max(a.x2, b.x2) - std::min(a.x1, b.x1), ch = std::max(a.y2, b.y2) - std::min(a.y1, b.y1);
    const double enclosing = cw * ch, ce = enclosing + p.eps;
    if (ue == 0 || ce == 0) {  // 0/0: no true value (eps 0 on empty boxes, or an inverted pair)
      for (auto* side : grad)
        for (int k = 0; k < 4; ++k) side[k] = unconstrained_element();
      continue;
    }
    // loss = 1 - I / Ue + (C - U) / Ce: its partials as the graph's own terms (autograd
    // differentiates each division apart, so d/dC is 1/Ce - (C - U)/Ce^2, two terms that
    // cancel, not their simplified Ue / Ce^2: rounding scales with the terms).
    const double by_area[2] = {scale * inter / (ue * ue), -scale / ce};                            // d/dA1 = d/dA2
    const double by_inter[3] = {-scale / ue, -scale * inter / (ue * ue), scale / ce};               // d/dI (U's share included)
    const double by_enclosing[2] = {scale / ce, -scale * (enclosing - union_area) / (ce * ce)};     // d/dC
    const bool range_ok = std::max({ue * ue, ce * ce, std::fabs(enclosing), std::fabs(union_area)}) <= largest &&
                          std::min(ue * ue, ce * ce) >= smallest;
    const Route k1x = max_route(a.x1, b.x1), k1y = max_route(a.y1, b.y1);
    const Route k2x = min_route(a.x2, b.x2), k2y = min_route(a.y2, b.y2);
    const Route c1x = min_route(a.x1, b.x1), c1y = min_route(a.y1, b.y1);
    const Route c2x = max_route(a.x2, b.x2), c2y = max_route(a.y2, b.y2);
    for (int side = 0; side < 2; ++side) {
      Derivative x1, y1, x2, y2;
      for (double t : by_area) {
        x1.add(-h[side] * t);
        x2.add(h[side] * t);
        y1.add(-w[side] * t);
        y2.add(w[side] * t);
      }
      if (overlap) {
        routed(x1, k1x, side, {-ih * by_inter[0], -ih * by_inter[1], -ih * by_inter[2]});
        routed(x2, k2x, side, {ih * by_inter[0], ih * by_inter[1], ih * by_inter[2]});
        routed(y1, k1y, side, {-iw * by_inter[0], -iw * by_inter[1], -iw * by_inter[2]});
        routed(y2, k2y, side, {iw * by_inter[0], iw * by_inter[1], iw * by_inter[2]});
      }
      routed(x1, c1x, side, {-ch * by_enclosing[0], -ch * by_enclosing[1]});
      routed(x2, c2x, side, {ch * by_enclosing[0], ch * by_enclosing[1]});
      routed(y1, c1y, side, {-cw * by_enclosing[0], -cw * by_enclosing[1]});
      routed(y2, c2y, side, {cw * by_enclosing[0], cw * by_enclosing[1]});
      const Derivative* d[4] = {&x1, &y1, &x2, &y2};
      for (int k = 0; k < 4; ++k) grad[side][k] = finish(*d[k], storage, range_ok);
    }
  }
  return out;
}

}  // namespace detfuzz::oracles
