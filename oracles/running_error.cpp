#include "running_error.h"

#include <algorithm>
#include <cmath>

namespace detfuzz::oracles {
namespace {

constexpr std::size_t kFp64 = 3;
constexpr std::size_t kFormats = kFloatDTypes.size();

// The magnitudes every format holds as normal numbers: [largest min normal, smallest max
// finite] (fp16's). Nearly every intermediate lies there, and note_range needs one test.
constexpr double kNormalInAllFrom = [] {
  double largest = 0;
  for (const FloatFormat& format : kFloatFormats) largest = std::max(largest, format.min_normal);
  return largest;
}();
constexpr double kNormalInAllTo = [] {
  double smallest = kFloatFormats[0].max_finite;
  for (const FloatFormat& format : kFloatFormats) smallest = std::min(smallest, format.max_finite);
  return smallest;
}();

}  // namespace

double sum_rounding_error(double a, double b) {
  const double s = a + b, bb = s - a;
  return (a - (s - bb)) + (b - bb);
}

double product_rounding_error(double a, double b) { return std::fma(a, b, -(a * b)); }

std::size_t format_index(DType dtype) {
  for (std::size_t i = 0; i < kFloatDTypes.size(); ++i)
    if (kFloatDTypes[i] == dtype) return i;
  return kFp64;
}

double OracleValue::bound(DType compute) const { return error_bound[format_index(compute)]; }
bool OracleValue::range_ok(DType compute) const { return in_range[format_index(compute)]; }

OracleValue ErrorTracker::result(const Tracked& value, bool undefined) const {
  OracleValue out;
  out.value = value.value;
  out.undefined = undefined || std::isnan(value.value);
  out.error_bound = value.error;
  out.in_range = in_range_;
  return out;
}

void ErrorTracker::note_range(double value) {
  const double magnitude = std::fabs(value);
  if ((magnitude >= kNormalInAllFrom && magnitude <= kNormalInAllTo) || magnitude == 0) return;  // NaN falls through
  for (std::size_t f = 0; f < kFormats; ++f) {
    const FloatFormat& format = kFloatFormats[f];
    if (!std::isfinite(value) || magnitude > format.max_finite ||
        (magnitude != 0 && magnitude < format.min_normal))
      in_range_[f] = false;
  }
}

Tracked ErrorTracker::rounded(double value, double residual,
                              const std::array<double, kFloatDTypes.size()>& propagated) {
  note_range(value);
  Tracked result;
  result.value = value;
  // Narrower formats can only be exact where double was: a rounded double says nothing
  // about representability of the true value.
  bool exact_in_double = residual == 0 && propagated[kFp64] == 0;
  std::array<bool, kFormats> holds{};
  if (exact_in_double) holds = representable_in_float_dtypes(value);
#pragma GCC unroll 4
  for (std::size_t f = 0; f < kFormats; ++f) {
    bool exact = exact_in_double && propagated[f] == 0 && holds[f];
    result.error[f] = exact ? 0.0 : propagated[f] + kFloatFormats[f].unit_roundoff * std::fabs(value);
    // Below the normal range a rounding loses up to half the subnormal spacing, whatever
    // the value: that is how a product of small numbers flushes to 0.
    if (!exact && std::fabs(value) < kFloatFormats[f].min_normal)
      result.error[f] += std::ldexp(1.0, kFloatFormats[f].min_normal_exponent - kFloatFormats[f].precision_bits);
  }
  return result;
}

Tracked ErrorTracker::input(double value) {
  note_range(value);
  Tracked result;
  result.value = value;
  const std::array<bool, kFormats> holds = representable_in_float_dtypes(value);
  for (std::size_t f = 0; f < kFormats; ++f)
    result.error[f] = holds[f] ? 0.0 : half_ulp(kFloatDTypes[f], value);
  return result;
}

Tracked ErrorTracker::derived(double value, const std::array<bool, kFormats>& exact) {
  Tracked result = input(value);
  for (std::size_t f = 0; f < kFormats; ++f)
    if (!exact[f]) result.error[f] = std::max(result.error[f], kFloatFormats[f].unit_roundoff * std::fabs(value));
  return result;
}

Tracked ErrorTracker::add(const Tracked& a, const Tracked& b) {
  double s = a.value + b.value;
  std::array<double, kFloatDTypes.size()> propagated{};
  for (std::size_t f = 0; f < propagated.size(); ++f) propagated[f] = a.error[f] + b.error[f];
  return rounded(s, sum_rounding_error(a.value, b.value), propagated);
}

Tracked ErrorTracker::sub(const Tracked& a, const Tracked& b) {
  Tracked negated = b;
  negated.value = -b.value;
  return add(a, negated);
}

Tracked ErrorTracker::mul(const Tracked& a, const Tracked& b) {
  double p = a.value * b.value;
  std::array<double, kFloatDTypes.size()> propagated{};
  for (std::size_t f = 0; f < propagated.size(); ++f)
    propagated[f] = std::fabs(b.value) * a.error[f] + std::fabs(a.value) * b.error[f];
  return rounded(p, std::fma(a.value, b.value, -p), propagated);
}

Tracked ErrorTracker::div(const Tracked& a, const Tracked& b) {
  double q = a.value / b.value;
  std::array<double, kFloatDTypes.size()> propagated{};
  for (std::size_t f = 0; f < propagated.size(); ++f)
    propagated[f] = (a.error[f] + std::fabs(q) * b.error[f]) / std::fabs(b.value);
  // fma(q, b, -a) is the exact remainder of a correctly rounded quotient.
  return rounded(q, std::fma(q, b.value, -a.value), propagated);
}

Tracked ErrorTracker::transcendental(double value, bool exact,
                                     const std::array<double, kFloatDTypes.size()>& propagated) {
  note_range(value);
  Tracked result;
  result.value = value;
  for (std::size_t f = 0; f < kFormats; ++f)
    result.error[f] = exact && propagated[f] == 0
                          ? 0.0
                          : propagated[f] + 2 * kTranscendentalUlps * kFloatFormats[f].unit_roundoff * std::fabs(value);
  return result;
}

Tracked ErrorTracker::reduction_sum(const std::vector<Tracked>& terms) {
  Tracked total = input(0.0);
  double magnitude = 0;
  std::array<double, kFormats> propagated{};
  for (const Tracked& term : terms) {
    total = add(total, term);
    magnitude += std::fabs(term.value);
    for (std::size_t f = 0; f < kFormats; ++f) propagated[f] += term.error[f];
  }
  if (terms.size() > 2)
    for (std::size_t f = 0; f < kFormats; ++f)
      total.error[f] = std::max(total.error[f], propagated[f] + static_cast<double>(terms.size() - 1) *
                                                                    kFloatFormats[f].unit_roundoff * magnitude);
  return total;
}

Tracked ErrorTracker::exp(const Tracked& a) {
  const double e = std::exp(a.value);
  std::array<double, kFloatDTypes.size()> propagated{};
  for (std::size_t f = 0; f < kFormats; ++f) propagated[f] = e * a.error[f];
  return transcendental(e, a.value == 0, propagated);
}

Tracked ErrorTracker::log(const Tracked& a) {
  const double l = std::log(a.value);
  std::array<double, kFloatDTypes.size()> propagated{};
  for (std::size_t f = 0; f < kFormats; ++f) propagated[f] = a.error[f] / std::fabs(a.value);
  return transcendental(l, a.value == 1, propagated);
}

namespace {

// A selection keeps the chosen operand's error when the operands are farther apart than
// their errors together (the kernel selects the same one); otherwise the larger error.
Tracked select(const Tracked& chosen, const Tracked& other) {
  Tracked result = chosen;
  const double gap = std::fabs(chosen.value - other.value);
  for (std::size_t f = 0; f < result.error.size(); ++f)
    if (!(gap > chosen.error[f] + other.error[f])) result.error[f] = std::max(chosen.error[f], other.error[f]);
  return result;
}

}  // namespace

Tracked ErrorTracker::max(const Tracked& a, const Tracked& b) { return a.value >= b.value ? select(a, b) : select(b, a); }

Tracked ErrorTracker::min(const Tracked& a, const Tracked& b) { return a.value <= b.value ? select(a, b) : select(b, a); }

}  // namespace detfuzz::oracles
