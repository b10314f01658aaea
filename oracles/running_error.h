// Running error analysis (Wilkinson) for the oracles: every intermediate of a formula is
// computed in double and carries, for each float format, a first-order bound on how far a
// kernel that rounds every step to that format can be from the true value. A step whose
// exact result is representable in the format (and whose operands were exact) contributes
// nothing, which is what makes dyadic inputs give exact expectations (an IoU of exactly
// 0.5 stays exactly 0.5, so `>=` versus `>` at the threshold is decidable).
//
// Precision policy, as in CUTLASS's host references: the element type is what the kernel
// stores, the compute type is what it rounds to; the bound for each candidate compute type
// is kept side by side and the comparator picks the one it judges against.
#pragma once

#include <array>
#include <cstddef>
#include <vector>

#include "model/dtype.h"

namespace detfuzz::oracles {

// glibc's exp/log are within 1 ulp, CUDA's expf/logf within 2, Half versions round a float
// result once more: 2 ulps covers all of them.
inline constexpr double kTranscendentalUlps = 2.0;

// The exact rounding error of fl(a + b) (Knuth's TwoSum) and of fl(a * b) (by FMA): zero
// when the double operation was exact.
double sum_rounding_error(double a, double b);
double product_rounding_error(double a, double b);

// Index into per-format arrays, in kFloatDTypes order.
std::size_t format_index(DType dtype);

struct Tracked {
  double value = 0;
  // Absolute first-order error bound per format (already multiplied by its unit roundoff).
  std::array<double, kFloatDTypes.size()> error{};
};

// What an oracle hands a comparator for one output element: its value, whether it has
// one at all, its error bound and whether its intermediates stayed in range, per format.
struct OracleValue {
  double value = 0;
  bool undefined = false;  // no true value exists (0/0, log 0): any output is accepted
  std::array<double, kFloatDTypes.size()> error_bound{};
  std::array<bool, kFloatDTypes.size()> in_range{};

  double bound(DType compute) const;
  bool range_ok(DType compute) const;
};

class ErrorTracker {
 public:
  // An input the kernel receives: exact in every format that can represent it.
  Tracked input(double value);
  // A value the kernel computes itself, equal to ours in the formats marked exact and off by
  // an error accounted elsewhere in the others: there it counts one rounding, so that
  // later steps never claim exactness for numbers the kernel does not hold.
  Tracked derived(double value, const std::array<bool, kFloatDTypes.size()>& exact);

  Tracked add(const Tracked& a, const Tracked& b);
  Tracked sub(const Tracked& a, const Tracked& b);
  Tracked mul(const Tracked& a, const Tracked& b);
  Tracked div(const Tracked& a, const Tracked& b);
  // exp and log as libraries compute them: not correctly rounded, so each counts
  // kTranscendentalUlps of its result on top of the propagated error; exact only for
  // exp(0) = 1 and log(1) = 0.
  // The sum of `terms` as a reduction computes it: in an order of its own (vectorized
  // lanes, cascades), so a partial sum exact in one order may round in another. Bound:
  // the terms' errors plus (n - 1) u sum |t_i|, which holds for every order.
  Tracked reduction_sum(const std::vector<Tracked>& terms);
  Tracked abs(const Tracked& a) {
    Tracked result = a;
    result.value = a.value < 0 ? -a.value : a.value;
    return result;
  }
  Tracked exp(const Tracked& a);
  Tracked log(const Tracked& a);
  // Selections round nothing: |max(a', b') - max(a, b)| <= max(|a' - a|, |b' - b|), and
  // only the chosen operand's error when the two are too far apart to swap.
  Tracked max(const Tracked& a, const Tracked& b);
  Tracked min(const Tracked& a, const Tracked& b);

  // False when some nonzero intermediate lies outside [min normal, max finite] of the
  // format: there the relative-error model does not hold (overflow, underflow).
  bool in_range(DType dtype) const { return in_range_[format_index(dtype)]; }
  // `value` as an oracle output, with this tracker's range flags; NaN is undefined.
  OracleValue result(const Tracked& value, bool undefined = false) const;
  const std::array<bool, kFloatDTypes.size()>& in_range() const { return in_range_; }
  // Takes in the range flags of steps another tracker took, as if this one had taken them
  // (a flag only ever falls, so the order does not matter): values computed once and
  // shared by many elements, each with its own tracker.
  void join_ranges(const std::array<bool, kFloatDTypes.size()>& in_range) {
    for (std::size_t f = 0; f < in_range_.size(); ++f) in_range_[f] = in_range_[f] && in_range[f];
  }

 private:
  // `residual` is the exact error of the double operation (0 when it was exact).
  Tracked transcendental(double value, bool exact, const std::array<double, kFloatDTypes.size()>& propagated);
  Tracked rounded(double value, double residual,
                  const std::array<double, kFloatDTypes.size()>& propagated);
  void note_range(double value);

  std::array<bool, kFloatDTypes.size()> in_range_{true, true, true, true};
};

}  // namespace detfuzz::oracles
