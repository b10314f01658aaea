// The propagation rules of the running error bound, checked against values worked out by
// hand: each rule is what makes a tolerance honest, so each is pinned exactly.
#include <gtest/gtest.h>

#include <cmath>

#include "oracles/running_error.h"

namespace detfuzz::oracles {
namespace {

const std::size_t kHalf = format_index(DType::fp16);
const std::size_t kSingle = format_index(DType::fp32);
const std::size_t kDouble = format_index(DType::fp64);
const double u16 = std::ldexp(1.0, -11);
const double u32 = std::ldexp(1.0, -24);

TEST(RunningError, InputsAreExactWhereRepresentableElseHalfAnUlp) {
  ErrorTracker t;
  Tracked third = t.input(1.0 / 3);
  EXPECT_EQ(third.error[kDouble], 0.0);
  EXPECT_EQ(third.error[kSingle], half_ulp(DType::fp32, 1.0 / 3));
  EXPECT_EQ(third.error[kHalf], half_ulp(DType::fp16, 1.0 / 3));
  EXPECT_EQ(t.input(0.75).error[kHalf], 0.0);
}

TEST(RunningError, ExactResultsAddNothing) {
  ErrorTracker t;
  Tracked sum = t.add(t.input(1.5), t.input(2.25));
  for (double e : sum.error) EXPECT_EQ(e, 0.0);
  Tracked product = t.mul(t.input(3.0), t.input(0.5));
  for (double e : product.error) EXPECT_EQ(e, 0.0);
}

TEST(RunningError, InexactRoundingAddsUnitRoundoffTimesResult) {
  ErrorTracker t;
  // 2049 needs 12 bits: exact in fp32, rounded in fp16.
  Tracked sum = t.add(t.input(2048.0), t.input(1.0));
  EXPECT_EQ(sum.error[kSingle], 0.0);
  EXPECT_EQ(sum.error[kHalf], u16 * 2049);
  // 1/3 is inexact even in double.
  Tracked third = t.div(t.input(1.0), t.input(3.0));
  EXPECT_EQ(third.error[kDouble], std::ldexp(1.0, -53) * (1.0 / 3));
  EXPECT_EQ(third.error[kSingle], u32 * (1.0 / 3));
}

TEST(RunningError, SumsPropagateBothErrors) {
  ErrorTracker t;
  Tracked a = t.add(t.input(2048.0), t.input(1.0));    // fp16 error u16 * 2049
  Tracked b = t.add(t.input(4096.0), t.input(1.0));    // fp16 error u16 * 4097
  Tracked sum = t.add(a, b);                          // 6146: inexact in fp16 too
  EXPECT_EQ(sum.error[kHalf], u16 * 2049 + u16 * 4097 + u16 * 6146);
  Tracked difference = t.sub(b, a);                   // 2048: representable, but operands are not exact
  EXPECT_EQ(difference.error[kHalf], u16 * 2049 + u16 * 4097 + u16 * 2048);
  EXPECT_EQ(difference.error[kSingle], 0.0);
}

TEST(RunningError, ProductsWeighEachErrorByTheOtherFactor) {
  ErrorTracker t;
  Tracked a = t.add(t.input(2048.0), t.input(1.0));  // 2049, fp16 error u16 * 2049
  Tracked b = t.input(3.0);
  Tracked ab = t.mul(a, b);
  EXPECT_EQ(ab.error[kHalf], 3 * (u16 * 2049) + u16 * 6147);
  Tracked ba = t.mul(b, a);
  EXPECT_EQ(ba.error[kHalf], ab.error[kHalf]);
  Tracked aa = t.mul(a, a);
  EXPECT_EQ(aa.error[kHalf], 2 * 2049 * (u16 * 2049) + u16 * 2049.0 * 2049);
}

TEST(RunningError, QuotientsPropagateNumeratorAndDenominatorErrors) {
  ErrorTracker t;
  Tracked a = t.add(t.input(2048.0), t.input(1.0));  // 2049 +- u16 2049 in fp16
  Tracked b = t.add(t.input(4096.0), t.input(1.0));  // 4097 +- u16 4097
  Tracked q = t.div(a, b);
  const double quotient = 2049.0 / 4097;
  EXPECT_DOUBLE_EQ(q.error[kHalf], (u16 * 2049 + quotient * u16 * 4097) / 4097 + u16 * quotient);
}

TEST(RunningError, SelectionsKeepTheChosenErrorUnlessTheOperandsMaySwap) {
  ErrorTracker t;
  Tracked inexact = t.add(t.input(2048.0), t.input(1.0));  // 2049: not an fp16 number
  Tracked far = t.input(5000.0);
  EXPECT_EQ(t.max(inexact, far).value, 5000.0);
  EXPECT_EQ(t.max(inexact, far).error[kHalf], 0.0);  // 5000 wins in every rounding
  EXPECT_EQ(t.min(inexact, far).value, 2049.0);
  EXPECT_EQ(t.min(inexact, far).error[kHalf], u16 * 2049);
  Tracked near = t.input(2050.0);  // within 2049's error: a kernel may pick either
  EXPECT_EQ(t.max(inexact, near).value, 2050.0);
  EXPECT_EQ(t.max(inexact, near).error[kHalf], u16 * 2049);
  EXPECT_EQ(t.min(far, far).error[kHalf], 0.0);
}

TEST(RunningError, ExpAndLogAreExactOnlyAtTheirFixedPoints) {
  ErrorTracker t;
  EXPECT_EQ(t.exp(t.input(0.0)).error[kHalf], 0.0);
  EXPECT_EQ(t.log(t.input(1.0)).error[kHalf], 0.0);
  const Tracked e = t.exp(t.input(1.0));
  EXPECT_DOUBLE_EQ(e.error[kHalf], 2 * kTranscendentalUlps * u16 * std::exp(1.0));
  // An input error e_a becomes exp(a) * e_a, and e_a / a through log.
  const Tracked inexact = t.add(t.input(2048.0), t.input(1.0));
  EXPECT_DOUBLE_EQ(t.log(inexact).error[kHalf], u16 * 2049 / 2049 + 2 * kTranscendentalUlps * u16 * std::log(2049.0));
}

TEST(RunningError, RangeFlagsFollowTheIntermediates) {
  ErrorTracker t;
  t.mul(t.input(300.0), t.input(300.0));  // 90000 > fp16 max
  EXPECT_FALSE(t.in_range(DType::fp16));
  EXPECT_TRUE(t.in_range(DType::fp32));
  ErrorTracker tiny;
  tiny.mul(tiny.input(1e-3), tiny.input(1e-3));  // 1e-6 < fp16 min normal
  EXPECT_FALSE(tiny.in_range(DType::fp16));
  EXPECT_TRUE(tiny.in_range(DType::bf16));
}

}  // namespace
}  // namespace detfuzz::oracles
