// The case-timeout rule (fuzz/case_timeout.h): the ceiling until a cell has measured enough,
// then a multiple of the slowest measured case of the size class, scaled by the cost model,
// between the floor and the ceiling.
#include "fuzz/case_timeout.h"

#include <gtest/gtest.h>

#include <limits>

namespace detfuzz::fuzz {
namespace {

CaseTimeoutRule rule() {
  CaseTimeoutRule r;
  r.ceiling_s = 10;
  r.floor_s = 0.05;
  r.headroom = 8;
  r.calibration_cases = 4;
  return r;
}

TEST(CaseTimeout, TheCeilingUntilACellHasMeasuredEnoughCases) {
  CellTimeout clock(rule(), 1);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(clock.limit_s(), 10) << "after " << i << " cases";
    clock.observe(10, 0.001);
  }
  EXPECT_FALSE(clock.calibrated());
  clock.observe(10, 0.001);
  EXPECT_TRUE(clock.calibrated());
  EXPECT_LT(clock.limit_s(), 10);
}

TEST(CaseTimeout, FastCellsGetTheFloorSlowOnesAMultipleOfTheirSlowestCase) {
  CellTimeout fast(rule(), 1);
  for (int i = 0; i < 4; ++i) fast.observe(10, 20e-6);
  EXPECT_DOUBLE_EQ(fast.limit_s(), 0.05) << "microsecond cases: the floor";
  CellTimeout slow(rule(), 1);
  for (double seconds : {0.02, 0.1, 0.03, 0.04}) slow.observe(10, seconds);
  EXPECT_DOUBLE_EQ(slow.limit_s(), 0.8) << "8 x the slowest case, not the mean";
  EXPECT_DOUBLE_EQ(slow.limit_s(10), 0.8);
  CellTimeout near_ceiling(rule(), 1);
  for (int i = 0; i < 4; ++i) near_ceiling.observe(10, 2.0);
  EXPECT_DOUBLE_EQ(near_ceiling.limit_s(), 10) << "never past the ceiling";
}

TEST(CaseTimeout, LargerCasesThanMeasuredAreExtrapolatedWithTheCostModel) {
  CaseTimeoutRule r = rule();
  r.floor_s = 0;
  r.ceiling_s = 1e9;
  CellTimeout pairs(r, 2), linear(r, 1);
  // Sizes 7..14 are one class (2^3 - 1 .. 2^4 - 2); its smallest size is 7.
  for (int i = 0; i < 4; ++i) {
    pairs.observe(10, 1e-3);
    linear.observe(10, 1e-3);
  }
  EXPECT_DOUBLE_EQ(pairs.limit_s(12), 8e-3) << "a measured class: its slowest case";
  // 1,000 boxes: (1001 / 8)^2 times the class's time for NMS, 1001 / 8 times for a linear op.
  EXPECT_NEAR(pairs.limit_s(1000), 8 * 1e-3 * (1001.0 / 8) * (1001.0 / 8), 1e-9);
  EXPECT_NEAR(linear.limit_s(1000), 8 * 1e-3 * 1001.0 / 8, 1e-12);
  // Smaller than anything measured: bounded by the smallest measured class.
  EXPECT_DOUBLE_EQ(pairs.limit_s(0), 8e-3);
  // Once the larger class is measured, its own time replaces the extrapolation.
  pairs.observe(1000, 0.5);
  EXPECT_DOUBLE_EQ(pairs.limit_s(1000), 4.0);
  EXPECT_DOUBLE_EQ(pairs.limit_s(12), 8e-3) << "a slow large case does not slow the small ones";
  EXPECT_DOUBLE_EQ(pairs.limit_s(), 4.0) << "unknown size: the slowest case measured";
}

TEST(CaseTimeout, NonsenseTimesAreNotMeasurements) {
  CellTimeout clock(rule(), 1);
  for (double bad : {-1.0, std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()})
    clock.observe(10, bad);
  EXPECT_EQ(clock.measured(), 0u);
  EXPECT_EQ(clock.limit_s(), 10);
}

TEST(CaseTimeout, CostModelIsSizePlusOneToTheExponent) {
  EXPECT_DOUBLE_EQ(case_cost(0, 2), 1);
  EXPECT_DOUBLE_EQ(case_cost(29999, 2), 9e8);
  EXPECT_DOUBLE_EQ(case_cost(99, 1), 100);
}

}  // namespace
}  // namespace detfuzz::fuzz

namespace detfuzz::fuzz {
namespace {

TEST(CaseTimeout, AConfirmedHangShortensTheLimitBeforeCalibration) {
  CellTimeout clock(rule(), 1);
  clock.hang_confirmed = true;
  EXPECT_DOUBLE_EQ(clock.limit_s(), 0.05) << "a cell that never answered: the floor";
  clock.observe(10, 0.02);
  EXPECT_FALSE(clock.calibrated());
  EXPECT_DOUBLE_EQ(clock.limit_s(), 0.16) << "one measured case is enough once hangs are confirmed";
  CellTimeout unconfirmed(rule(), 1);
  unconfirmed.observe(10, 0.02);
  EXPECT_EQ(unconfirmed.limit_s(), 10) << "without a confirmed hang, the ceiling until calibrated";
}

}  // namespace
}  // namespace detfuzz::fuzz
