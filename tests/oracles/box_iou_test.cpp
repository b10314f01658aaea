#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cmath>

#include "oracles/box_iou.h"
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

}  // namespace
}  // namespace detfuzz::oracles
