#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "fuzz/ops/invariance.h"

namespace detfuzz::fuzz {
namespace {

TEST(Invariance, FixedPermutationIsAPermutationAndDeterministic) {
  for (std::size_t n : {0u, 1u, 2u, 7u, 100u}) {
    auto p = fixed_permutation(n);
    auto sorted = p;
    std::sort(sorted.begin(), sorted.end());
    std::vector<std::int64_t> identity(n);
    std::iota(identity.begin(), identity.end(), 0);
    EXPECT_EQ(sorted, identity);
    EXPECT_EQ(p, fixed_permutation(n));
  }
  EXPECT_NE(fixed_permutation(100), [] {
    std::vector<std::int64_t> identity(100);
    std::iota(identity.begin(), identity.end(), 0);
    return identity;
  }());
}

TEST(Invariance, ScaleExponentKeepsIntermediatesInRange) {
  std::vector<Box> ordinary{{0, 0, 10, 10}, {5, 5, 20, 20}};
  EXPECT_EQ(safe_scale_exponent(ordinary, DType::fp16), 1);
  // Widths near fp16's maximum cannot be doubled; areas there are fine in fp32.
  std::vector<Box> wide{{0, 0, 40000, 1}};
  EXPECT_EQ(safe_scale_exponent(wide, DType::fp16), -1);
  // Beyond fp32's range for areas: no exponent is safe.
  std::vector<Box> huge{{0, 0, 1e30, 1e30}};
  EXPECT_EQ(safe_scale_exponent(huge, DType::fp32), 0);
  EXPECT_EQ(safe_scale_exponent({}, DType::fp32), 0);
  auto scaled = scale_boxes(ordinary, 1);
  EXPECT_EQ(scaled[1].x2, 40.0);
}

TEST(Invariance, IdenticalComparesBitsAndTreatsNanAsEqual) {
  HostTensor a{{2}, "fp32", "cpu", {NAN, 1.0}};
  HostTensor b = a;
  EXPECT_TRUE(identical(a, b));
  b.values[1] = std::nextafter(1.0, 2.0);
  EXPECT_FALSE(identical(a, b));
  b = a;
  b.dtype = "fp64";
  EXPECT_FALSE(identical(a, b));
}

}  // namespace
}  // namespace detfuzz::fuzz
