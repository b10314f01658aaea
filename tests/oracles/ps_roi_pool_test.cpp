// The PSRoIPool oracle against values computed by hand: torchvision's bins and channel
// layout, its test reference's clipping to the map (not the forward kernel's height - 1),
// and the decisions only low precision can flip.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "oracles/ps_roi_pool.h"
#include "oracles/running_error.h"

namespace detfuzz::oracles {
namespace {

// Channel c holds 16 c + 4 h + w: every value says where it lies.
FeatureMap arange_4x4x4() {
  std::vector<double> values(64);
  std::iota(values.begin(), values.end(), 0.0);
  return {1, 4, 4, 4, std::move(values)};
}

std::vector<double> values_of(const std::vector<PsRoiPoolElement>& elements) {
  std::vector<double> values;
  for (const auto& e : elements) values.push_back(e.value);
  return values;
}

TEST(PsRoiPoolOracle, EachBinAveragesItsOwnChannelUpToTheMapsLastRowAndColumn) {
  // RoI over the whole 4 x 4 map, 2 x 2 grid: bin (ph, pw) reads channel 2 ph + pw over rows
  // 2 ph .. 2 ph + 1 and columns 2 pw .. 2 pw + 1. torchvision's forward returns 2.5, 20, 40.5,
  // 58 here (its bins stop before row and column 3); its test reference and the oracle do not.
  RoiPoolProblem p{arange_4x4x4(), {{0, 0, 0, 4, 4}}, 1.0, 2, 2};
  const auto elements = ps_roi_pool(p, DType::fp32);
  EXPECT_EQ(values_of(elements), (std::vector<double>{2.5, 20.5, 42.5, 60.5}));
  for (std::size_t i = 0; i < elements.size(); ++i) EXPECT_EQ(elements[i].channel, static_cast<std::int64_t>(i));
}

TEST(PsRoiPoolOracle, OutputChannelsStepThroughWholeGroupsOfTheGrid) {
  // 8 channels, 2 x 1 grid: output channel c, bin ph reads input channel 2 c + ph.
  std::vector<double> values(8 * 2 * 2);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<double>(i / 4);  // channel index
  RoiPoolProblem p{{1, 8, 2, 2, values}, {{0, 0, 0, 2, 2}}, 1.0, 2, 1};
  const auto elements = ps_roi_pool(p, DType::fp64);
  ASSERT_EQ(elements.size(), 8u);
  for (std::size_t i = 0; i < elements.size(); ++i) {
    EXPECT_EQ(elements[i].channel, static_cast<std::int64_t>(i));
    EXPECT_EQ(elements[i].value, static_cast<double>(i));
  }
}

TEST(PsRoiPoolOracle, AChannelCountTheGridDoesNotDivideHasNoAnswer) {
  RoiPoolProblem p{{1, 3, 2, 2, std::vector<double>(12, 1.0)}, {{0, 0, 0, 2, 2}}, 1.0, 2, 1};
  EXPECT_TRUE(ps_roi_pool(p, DType::fp32).empty());
  EXPECT_FALSE(ps_roi_pool_bin(p, 0).has_value());
}

TEST(PsRoiPoolOracle, BinsOutsideTheMapAreZero) {
  RoiPoolProblem p{{1, 1, 2, 2, {5, 6, 7, 8}}, {{0, 10, 0, 12, 1}}, 1.0, 1, 1};
  const auto e = ps_roi_pool(p, DType::fp32).at(0);
  EXPECT_EQ(e.value, 0.0);
  EXPECT_EQ(e.strict.low, 0.0);
  EXPECT_EQ(e.strict.high, 0.0);
}

TEST(PsRoiPoolOracle, ARoiUnderOnePixelIsForcedToOne) {
  // round(1.2) = round(1.4) = 1: size max(0, 1) = 1, the bin is column 1 only.
  RoiPoolProblem p{{1, 1, 1, 4, {1, 2, 3, 4}}, {{0, 1.2, 0, 1.4, 0}}, 1.0, 1, 1};
  EXPECT_EQ(ps_roi_pool(p, DType::fp32).at(0).value, 2.0);
}

TEST(PsRoiPoolOracle, DyadicMeansAreExactInEveryTier) {
  RoiPoolProblem p{arange_4x4x4(), {{0, 0, 0, 4, 4}}, 1.0, 2, 2};
  for (const auto& e : ps_roi_pool(p, DType::fp16)) {
    EXPECT_EQ(e.strict.bound, 0.0);
    EXPECT_EQ(e.storage.bound, 0.0);
  }
}

TEST(PsRoiPoolOracle, MeansThatRoundCarryABoundInTheirTier) {
  // (1 + 1 + 1) / 3 is exact, (1 + 2 + 2) / 3 is not: fp16 rounds it more than fp32.
  RoiPoolProblem p{{1, 1, 1, 3, {1, 2, 2}}, {{0, 0, 0, 3, 0}}, 1.0, 1, 1};
  const auto e = ps_roi_pool(p, DType::fp16).at(0);
  EXPECT_DOUBLE_EQ(e.value, 5.0 / 3.0);
  EXPECT_GT(e.strict.bound, 0.0);
  EXPECT_GT(e.storage.bound, e.strict.bound);
}

TEST(PsRoiPoolOracle, HalfwayCoordinatesThatRoundingCanMoveGiveEveryMeanTheyReach) {
  // 25 * 0.1: exact 2.5 in fp64 (rounds to 3), but 0.1 rounds in fp16 and the product may
  // fall on either side of 2.5: the start is 2 or 3, the mean of columns 2..6 or 3..6; the
  // storage tier reaches at least what the accumulate tier does.
  RoiPoolProblem p{{1, 1, 1, 8, {0, 1, 2, 30, 4, 5, 6, 7}}, {{0, 25, 0, 70, 0}}, 0.1, 1, 1};
  const auto e = ps_roi_pool(p, DType::fp16).at(0);
  EXPECT_LT(e.storage.low, e.storage.high);
  EXPECT_LE(e.storage.low, e.strict.low);
  EXPECT_GE(e.storage.high, e.strict.high);
}

TEST(PsRoiPoolOracle, ARunningSumWithinItsRoundingOfTheLargestFiniteIsOutOfRange) {
  // FLT_MAX - 1 is below FLT_MAX, but a kernel's fp32 sum may round it to infinity.
  RoiPoolProblem p{{1, 1, 1, 2, {3.4028234663852886e38, -1.0}}, {{0, 0, 0, 2, 0}}, 1.0, 1, 1};
  EXPECT_FALSE(ps_roi_pool(p, DType::fp32).at(0).range_ok);
  p.input.values = {1e38, -1.0};
  EXPECT_TRUE(ps_roi_pool(p, DType::fp32).at(0).range_ok);
}

TEST(PsRoiPoolOracle, ItsBoundIsNeverBelowTheGeneralTrackersForTheSameSum) {
  // The oracle writes the running error analysis out for speed; the general ErrorTracker
  // (running_error.h) is the reference. A step is exact only where its operand is: counting
  // only the steps whose exact sum a format does not hold was a false alarm selftest found.
  const std::vector<float> values{-5.71567987e+37f, 5.98152547e+37f, -7.70952187e+37f,
                                  2.79137854e+37f,  -2.65845574e+37f, -6.11444827e+37f,
                                  1.0f,             3.0e-8f,          1.5f};
  for (std::size_t n = 1; n <= values.size(); ++n)
    for (DType storage : {DType::fp32, DType::fp64}) {
      RoiPoolProblem p{{1, 1, 1, static_cast<std::int64_t>(n), std::vector<double>(values.begin(), values.begin() + n)},
                       {{0, 0, 0, static_cast<double>(n), 0}}, 1.0, 1, 1};
      ErrorTracker t;
      Tracked sum = t.input(0.0);
      for (std::size_t i = 0; i < n; ++i) sum = t.add(sum, t.input(values[i]));
      const Tracked mean = t.div(sum, t.input(static_cast<double>(n)));
      const double tracked = 2 * (mean.error[format_index(storage)] + mean.error[format_index(DType::fp64)]);
      const auto e = ps_roi_pool(p, storage).at(0);
      EXPECT_EQ(e.value, mean.value) << n;
      EXPECT_GE(e.strict.bound, tracked * (1 - 1e-12)) << n << " " << dtype_name(storage);
    }
}

TEST(PsRoiPoolOracle, TheBinOfAnElementIsWhatItAverages) {
  RoiPoolProblem p{arange_4x4x4(), {{0, 0, 0, 4, 4}}, 1.0, 2, 2};
  const auto bin = ps_roi_pool_bin(p, 3);
  ASSERT_TRUE(bin.has_value());
  EXPECT_EQ(bin->channel, 3);
  EXPECT_EQ(bin->row_begin, 2);
  EXPECT_EQ(bin->row_end, 4);
  EXPECT_EQ(bin->column_begin, 2);
  EXPECT_EQ(bin->column_end, 4);
}

}  // namespace
}  // namespace detfuzz::oracles
