#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "oracles/box_iou.h"
#include "oracles/giou.h"
#include "kernels/mutants/emulated_targets.h"

namespace detfuzz::oracles {
namespace {

TEST(BoxIouOracle, KnownValues) {
  EXPECT_DOUBLE_EQ(iou_terms({0, 0, 2, 2}, {1, 1, 3, 3}).value, 1.0 / 7);
  EXPECT_EQ(iou_terms({0, 0, 2, 2}, {0, 0, 2, 2}).value, 1.0);
  EXPECT_EQ(iou_terms({0, 0, 1, 1}, {2, 2, 3, 3}).value, 0.0);
  EXPECT_EQ(iou_terms({0, 0, 1, 1}, {1, 0, 2, 1}).value, 0.0);  // touching edges
  EXPECT_EQ(iou_terms({0, 0, 4, 4}, {1, 1, 3, 3}).value, 0.25);  // nested
}

TEST(BoxIouOracle, DyadicInputsHaveZeroErrorBound) {
  // inter 2, union 4: every step exact in every format, so IoU 0.5 is exactly 0.5.
  IouTerms terms = iou_terms({0, 0, 3, 1}, {1, 0, 4, 1});
  EXPECT_EQ(terms.value, 0.5);
  for (DType dtype : kFloatDTypes) EXPECT_EQ(terms.bound(dtype), 0.0) << dtype_name(dtype);
}

TEST(BoxIouOracle, InexactStepsGetAPositiveBoundThatShrinksWithPrecision) {
  IouTerms terms = iou_terms({0, 0, 2, 2}, {1, 1, 3, 3});  // 1/7 is inexact everywhere
  EXPECT_GT(terms.bound(DType::fp64), 0.0);
  EXPECT_GT(terms.bound(DType::fp32), terms.bound(DType::fp64));
  EXPECT_GT(terms.bound(DType::fp16), terms.bound(DType::fp32));
  EXPECT_GT(terms.bound(DType::bf16), terms.bound(DType::fp16));
}

TEST(BoxIouOracle, BoxesApartInOneAxisHaveAnExactZeroIou) {
  // hi - lo = 1 - (2^24 + 2) is not representable in fp32, but it is negative in every
  // format, so the clamp makes the intersection exactly 0 and the IoU exactly 0.
  const double far = std::ldexp(1.0, 24) + 2;
  IouTerms terms = iou_terms({0, 0, 1, 1}, {far, 0, far + 2, 1});
  EXPECT_EQ(terms.value, 0.0);
  EXPECT_EQ(terms.bound(DType::fp32), 0.0);
  EXPECT_EQ(terms.bound(DType::fp64), 0.0);
}

TEST(BoxIouOracle, TwoEmptyBoxesHaveNoIou) {
  IouTerms terms = iou_terms({1, 1, 1, 5}, {1, 1, 1, 5});
  EXPECT_TRUE(terms.undefined);
  EXPECT_TRUE(std::isnan(terms.value));
  EXPECT_FALSE(iou_terms({1, 1, 1, 5}, {0, 0, 2, 2}).undefined);  // 0 / area: IoU 0
  EXPECT_EQ(iou_terms({1, 1, 1, 5}, {0, 0, 2, 2}).value, 0.0);
}

TEST(BoxIouOracle, LegacyConventionCountsPixels) {
  // 2x2 pixels each (0..1 inclusive), overlapping in 1 pixel: 1 / (4 + 4 - 1).
  EXPECT_DOUBLE_EQ(iou_terms({0, 0, 1, 1}, {1, 1, 2, 2}, BoxConvention::legacy_plus_one).value, 1.0 / 7);
  EXPECT_EQ(iou_terms({0, 0, 1, 1}, {1, 1, 2, 2}).value, 0.0);
  // A zero-width box is one pixel wide in the legacy convention.
  EXPECT_EQ(iou_terms({3, 3, 3, 3}, {3, 3, 3, 3}, BoxConvention::legacy_plus_one).value, 1.0);
}

TEST(BoxIouOracle, RangeFlagsMarkAreasBeyondEachFormat) {
  IouTerms huge = iou_terms({0, 0, 1e20, 1e20}, {0, 0, 1e20, 1e20});
  EXPECT_FALSE(huge.range_ok(DType::fp32));
  EXPECT_TRUE(huge.range_ok(DType::fp64));
  IouTerms wide = iou_terms({0, 0, 300, 300}, {0, 0, 300, 300});  // area 90000 > 65504
  EXPECT_FALSE(wide.range_ok(DType::fp16));
  EXPECT_TRUE(wide.range_ok(DType::fp32));
}

TEST(BoxIouOracle, MatrixIsRowMajor) {
  std::vector<Box> a{{0, 0, 1, 1}, {0, 0, 2, 2}};
  std::vector<Box> b{{0, 0, 1, 1}, {5, 5, 6, 6}, {0, 0, 2, 2}};
  auto matrix = box_iou(a, b);
  ASSERT_EQ(matrix.size(), 6u);
  EXPECT_EQ(matrix[0].value, 1.0);
  EXPECT_EQ(matrix[2].value, 0.25);
  EXPECT_EQ(matrix[3].value, 0.25);
  EXPECT_EQ(matrix[5].value, 1.0);
}

// The heart of the verdict: the running error bound must hold for a kernel that rounds
// every step to the format, on arbitrary boxes representable in it.
RC_GTEST_PROP(BoxIouOracle, ErrorBoundHoldsForEmulatedKernelArithmetic, ()) {
  const DType dtype = *rc::gen::elementOf(kFloatDTypes);
  const int exponent = *rc::gen::inRange(-6, 14);
  auto coordinate = [&] {
    return round_to(dtype, std::ldexp(*rc::gen::inRange(-(1 << 20), 1 << 20), exponent - 20));
  };
  auto box = [&] {
    double x1 = coordinate(), y1 = coordinate(), x2 = coordinate(), y2 = coordinate();
    return Box{std::min(x1, x2), std::min(y1, y2), std::max(x1, x2), std::max(y1, y2)};
  };
  const Box a = box();
  const Box b = *rc::gen::element(0, 1, 2) == 0 ? a : box();
  const IouTerms terms = iou_terms(a, b);
  RC_PRE(!terms.undefined && terms.range_ok(dtype));
  const double kernel = kernels::emulated_iou(a, b, dtype);
  const double allowed = kIouBoundSafety * (terms.bound(dtype) + terms.bound(DType::fp64));
  RC_ASSERT(std::fabs(kernel - terms.value) <= allowed);
  if (terms.bound(dtype) == 0) RC_ASSERT(kernel == terms.value);
}

// What a matrix of pairs computed before boxes were tracked once and shared: every input,
// area and step in one tracker per pair (torchvision's order, as iou_terms documents).
IouTerms iou_in_one_tracker(const Box& a, const Box& b, BoxConvention convention) {
  ErrorTracker t;
  const bool legacy = convention == BoxConvention::legacy_plus_one;
  const Tracked one = t.input(1.0);
  const Tracked ax1 = t.input(a.x1), ay1 = t.input(a.y1), ax2 = t.input(a.x2), ay2 = t.input(a.y2);
  const Tracked bx1 = t.input(b.x1), by1 = t.input(b.y1), bx2 = t.input(b.x2), by2 = t.input(b.y2);
  auto extent = [&](const Tracked& lo, const Tracked& hi) { return legacy ? t.add(t.sub(hi, lo), one) : t.sub(hi, lo); };
  const Tracked area_a = t.mul(extent(ax1, ax2), extent(ay1, ay2));
  const Tracked area_b = t.mul(extent(bx1, bx2), extent(by1, by2));
  auto overlap = [&](const Tracked& lo_a, const Tracked& hi_a, const Tracked& lo_b, const Tracked& hi_b) {
    Tracked width = t.sub(t.min(hi_a, hi_b), t.max(lo_a, lo_b));
    if (legacy) width = t.add(width, one);
    if (width.value < 0) {
      width.value = 0;
      if (!legacy) width.error = {};
    }
    return width;
  };
  const Tracked inter = t.mul(overlap(ax1, ax2, bx1, bx2), overlap(ay1, ay2, by1, by2));
  const Tracked union_area = t.sub(t.add(area_a, area_b), inter);
  IouTerms terms;
  if (union_area.value == 0) {
    terms.undefined = true;
    terms.value = std::numeric_limits<double>::quiet_NaN();
  } else {
    const Tracked iou = t.div(inter, union_area);
    terms.value = iou.value;
    terms.error_bound = iou.error;
  }
  terms.in_range = t.in_range();
  return terms;
}

OracleValue giou_in_one_tracker(const Box& a, const Box& b) {
  ErrorTracker t;
  auto area = [&](const Box& x) { return t.mul(t.sub(t.input(x.x2), t.input(x.x1)), t.sub(t.input(x.y2), t.input(x.y1))); };
  const Tracked area_a = area(a), area_b = area(b);
  auto clamped = [&](Tracked width) { return width.value < 0 ? t.input(0.0) : width; };
  const Tracked inter = t.mul(clamped(t.sub(t.min(t.input(a.x2), t.input(b.x2)), t.max(t.input(a.x1), t.input(b.x1)))),
                              clamped(t.sub(t.min(t.input(a.y2), t.input(b.y2)), t.max(t.input(a.y1), t.input(b.y1)))));
  const Tracked union_area = t.sub(t.add(area_a, area_b), inter);
  const Tracked enclosing = t.mul(clamped(t.sub(t.max(t.input(a.x2), t.input(b.x2)), t.min(t.input(a.x1), t.input(b.x1)))),
                                  clamped(t.sub(t.max(t.input(a.y2), t.input(b.y2)), t.min(t.input(a.y1), t.input(b.y1)))));
  if (union_area.value == 0 || enclosing.value == 0) return t.result(t.input(NAN), true);
  const Tracked iou = t.div(inter, union_area);
  return t.result(t.sub(iou, t.div(t.sub(enclosing, union_area), enclosing)));
}

// torchvision's generalized_box_iou_loss term, one tracker for the pair.
OracleValue giou_loss_in_one_tracker(const Box& a, const Box& b, double eps) {
  ErrorTracker t;
  auto area = [&](const Box& x) { return t.mul(t.sub(t.input(x.x2), t.input(x.x1)), t.sub(t.input(x.y2), t.input(x.y1))); };
  const Tracked xk1 = t.max(t.input(a.x1), t.input(b.x1)), yk1 = t.max(t.input(a.y1), t.input(b.y1));
  const Tracked xk2 = t.min(t.input(a.x2), t.input(b.x2)), yk2 = t.min(t.input(a.y2), t.input(b.y2));
  const bool overlap = yk2.value > yk1.value && xk2.value > xk1.value;
  const Tracked inter = overlap ? t.mul(t.sub(xk2, xk1), t.sub(yk2, yk1)) : t.input(0.0);
  const Tracked union_area = t.sub(t.add(area(a), area(b)), inter);
  const Tracked iou = t.div(inter, t.add(union_area, t.input(eps)));
  const Tracked enclosing = t.mul(t.sub(t.max(t.input(a.x2), t.input(b.x2)), t.min(t.input(a.x1), t.input(b.x1))),
                                  t.sub(t.max(t.input(a.y2), t.input(b.y2)), t.min(t.input(a.y1), t.input(b.y1))));
  const Tracked miou = t.sub(iou, t.div(t.sub(enclosing, union_area), t.add(enclosing, t.input(eps))));
  return t.result(t.sub(t.input(1.0), miou));
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// Boxes at every scale the range flags care about: tiny (areas below fp16's normal range,
// and below fp32's and bf16's), ordinary, past fp16's largest (65,504) and past fp32's, some
// degenerate; near the origin and far from it (coordinates out of fp16's range, extents
// within it). Paired with the next scale, some flags come from one box's own steps alone.
std::vector<Box> boxes_at_every_scale(unsigned seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(0, 1);
  std::vector<Box> boxes;
  for (double offset : {0.0, 7e4})
  for (double scale : {1e-20, 1e-9, 1e-3, 1.0, 300.0, 3e4, 1e5, 1e39}) {
    for (int i = 0; i < 6; ++i) {
      const double x = offset + unit(rng) * scale, y = unit(rng) * scale;
      const double w = i == 0 ? 0.0 : unit(rng) * scale, h = unit(rng) * scale;
      boxes.push_back({x, y, x + w, y + h});
    }
  }
  return boxes;
}

// Boxes are tracked once and shared by their pairs (TrackedBox); a pair's tracker takes in
// their range flags. That must give every pair exactly what one tracker per pair gave:
// value, bound per format and range flags, bit for bit.
TEST(BoxIouOracle, SharedTrackedBoxesGiveWhatOneTrackerPerPairGives) {
  const std::vector<Box> first = boxes_at_every_scale(1), second = boxes_at_every_scale(2);
  std::size_t flagged = 0;
  for (BoxConvention convention : {BoxConvention::continuous, BoxConvention::legacy_plus_one}) {
    const std::vector<IouTerms> matrix = box_iou(first, second, convention);
    ASSERT_EQ(matrix.size(), first.size() * second.size());
    for (std::size_t i = 0; i < first.size(); ++i)
      for (std::size_t j = 0; j < second.size(); ++j) {
        const IouTerms expected = iou_in_one_tracker(first[i], second[j], convention);
        const IouTerms& shared = matrix[i * second.size() + j];
        ASSERT_TRUE(same_bits(shared.value, expected.value)) << i << "," << j;
        ASSERT_EQ(shared.undefined, expected.undefined) << i << "," << j;
        ASSERT_EQ(shared.error_bound, expected.error_bound) << i << "," << j;
        ASSERT_EQ(shared.in_range, expected.in_range) << i << "," << j;
        ASSERT_EQ(iou_terms(first[i], second[j], convention).in_range, expected.in_range) << i << "," << j;
        flagged += !expected.in_range[format_index(DType::fp16)];
      }
  }
  const std::vector<OracleValue> giou = generalized_box_iou({first, second});
  ASSERT_EQ(giou.size(), first.size() * second.size());
  for (std::size_t i = 0; i < first.size(); ++i)
    for (std::size_t j = 0; j < second.size(); ++j) {
      const OracleValue expected = giou_in_one_tracker(first[i], second[j]);
      const OracleValue& shared = giou[i * second.size() + j];
      ASSERT_TRUE(same_bits(shared.value, expected.value) || (std::isnan(shared.value) && std::isnan(expected.value)));
      ASSERT_EQ(shared.undefined, expected.undefined) << i << "," << j;
      ASSERT_EQ(shared.error_bound, expected.error_bound) << i << "," << j;
      ASSERT_EQ(shared.in_range, expected.in_range) << i << "," << j;
    }
  // Each box paired with one of the next scale (a tiny box with an ordinary one: a flag only
  // the tiny area raises, the pair's own steps being in range).
  std::vector<Box> next_scale = second;
  std::rotate(next_scale.begin(), next_scale.begin() + 6, next_scale.end());
  GiouLossProblem paired{first, next_scale, 1e-7, RegressionLossProblem::Reduction::none};
  const std::vector<OracleValue> losses = giou_loss(paired);
  ASSERT_EQ(losses.size(), first.size());
  for (std::size_t i = 0; i < first.size(); ++i) {
    const OracleValue expected = giou_loss_in_one_tracker(first[i], next_scale[i], paired.eps);
    ASSERT_TRUE(same_bits(losses[i].value, expected.value) || (std::isnan(losses[i].value) && std::isnan(expected.value)));
    ASSERT_EQ(losses[i].error_bound, expected.error_bound) << i;
    ASSERT_EQ(losses[i].in_range, expected.in_range) << i;
  }
  EXPECT_GT(flagged, 100u);  // the range flags were exercised, not only the values
}

}  // namespace
}  // namespace detfuzz::oracles
