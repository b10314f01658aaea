#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "model/dtype.h"
#include "model/error.h"

namespace detfuzz {
namespace {

const double kInf = std::numeric_limits<double>::infinity();

TEST(DType, NamesRoundTripAndAliasesParse) {
  for (DType dtype : kFloatDTypes) EXPECT_EQ(parse_dtype(dtype_name(dtype)), dtype);
  EXPECT_EQ(parse_dtype("half"), DType::fp16);
  EXPECT_EQ(parse_dtype("bfloat16"), DType::bf16);
  EXPECT_EQ(parse_dtype("float"), DType::fp32);
  EXPECT_EQ(parse_dtype("double"), DType::fp64);
  EXPECT_FALSE(parse_dtype("fp8").has_value());
  EXPECT_FALSE(parse_dtype("").has_value());
}

TEST(DType, FloatFormatOfIntegerDtypeIsAnError) {
  EXPECT_THROW(float_format(DType::int64), Error);
}

TEST(DType, AccumulateTypeFollowsPyTorchConvention) {
  EXPECT_EQ(accumulate_type(DType::fp16), DType::fp32);
  EXPECT_EQ(accumulate_type(DType::bf16), DType::fp32);
  EXPECT_EQ(accumulate_type(DType::fp32), DType::fp32);
  EXPECT_EQ(accumulate_type(DType::fp64), DType::fp64);
}

TEST(DType, FormatConstantsAreIeee) {
  EXPECT_EQ(float_format(DType::fp16).max_finite, 65504.0);
  EXPECT_EQ(float_format(DType::fp16).min_normal, std::ldexp(1.0, -14));
  EXPECT_EQ(float_format(DType::bf16).max_finite, std::ldexp(255.0, 120));
  EXPECT_EQ(float_format(DType::fp32).max_finite, static_cast<double>(std::numeric_limits<float>::max()));
  EXPECT_EQ(float_format(DType::fp64).max_finite, std::numeric_limits<double>::max());
  EXPECT_EQ(float_format(DType::fp32).min_normal, static_cast<double>(std::numeric_limits<float>::min()));
  EXPECT_EQ(float_format(DType::fp64).min_normal, std::numeric_limits<double>::min());
  EXPECT_EQ(float_format(DType::fp32).unit_roundoff, std::numeric_limits<float>::epsilon() / 2);
  EXPECT_EQ(float_format(DType::fp64).unit_roundoff, std::numeric_limits<double>::epsilon() / 2);
  EXPECT_EQ(float_format(DType::bf16).unit_roundoff, std::ldexp(1.0, -8));
  EXPECT_EQ(float_format(DType::fp16).unit_roundoff, std::ldexp(1.0, -11));
}

TEST(DType, Fp16RoundsHalfToEven) {
  // Spacing between 2048 and 4096 is 2: 2049 is a tie between 2048 and 2050.
  EXPECT_EQ(round_to(DType::fp16, 2049.0), 2048.0);
  EXPECT_EQ(round_to(DType::fp16, 2051.0), 2052.0);
  EXPECT_EQ(round_to(DType::fp16, 2049.5), 2050.0);
  EXPECT_EQ(round_to(DType::fp16, -2049.0), -2048.0);
}

TEST(DType, Fp16OverflowsExactlyAtHalfAnUlpAboveMax) {
  EXPECT_EQ(round_to(DType::fp16, 65519.0), 65504.0);
  EXPECT_EQ(round_to(DType::fp16, 65520.0), kInf);  // the tie rounds to even: infinity
  EXPECT_EQ(round_to(DType::fp16, -1e6), -kInf);
}

TEST(DType, Fp16KeepsSubnormals) {
  const double smallest = std::ldexp(1.0, -24);
  EXPECT_EQ(round_to(DType::fp16, smallest), smallest);
  EXPECT_EQ(round_to(DType::fp16, smallest * 0.5), 0.0);          // tie to even (0)
  EXPECT_EQ(round_to(DType::fp16, smallest * 0.75), smallest);
  EXPECT_EQ(round_to(DType::fp16, 3 * smallest), 3 * smallest);
}

TEST(DType, Bf16RoundsDirectlyFromDoubleWithoutDoubleRounding) {
  // 1 + 2^-8 + 2^-30 is just above the bf16 tie at 1 + 2^-8; rounding through float would
  // first drop 2^-30 (float has 24 bits), land on the tie and round to even (1.0).
  const double value = 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -30);
  EXPECT_EQ(round_to(DType::bf16, value), 1.0 + std::ldexp(1.0, -7));
  EXPECT_EQ(round_to(DType::bf16, 1.0 + std::ldexp(1.0, -8)), 1.0);
}

TEST(DType, Fp32RoundingMatchesFloatConversion) {
  for (double value : {0.1, 1.0 / 3, 123456789.123, -7.77e-39, 3.0e38, 1e-45})
    EXPECT_EQ(round_to(DType::fp32, value), static_cast<double>(static_cast<float>(value))) << value;
}

// round_to takes the format's normal range on the double's bits: it must agree with
// rounding the value scaled by its spacing (exact), half to even, everywhere: ties and their
// neighbours at every exponent, the carry into the next binade, the edge of the subnormal
// range and overflow.
TEST(DType, RoundingOnTheBitsAgreesWithScaledRoundingInEveryBinade) {
  auto scaled = [](DType dtype, double value) {
    const FloatFormat& format = float_format(dtype);
    const int exponent = std::max(std::ilogb(value), format.min_normal_exponent) - (format.precision_bits - 1);
    const double rounded = std::nearbyint(std::ldexp(value, -exponent)) * std::ldexp(1.0, exponent);
    return std::fabs(rounded) > format.max_finite ? std::copysign(kInf, value) : rounded;
  };
  std::mt19937_64 rng(11);
  std::size_t compared = 0;
  for (DType dtype : {DType::fp16, DType::bf16, DType::fp32}) {
    const FloatFormat& format = float_format(dtype);
    const int top = std::ilogb(format.max_finite) + 2;
    for (int exponent = format.min_normal_exponent - 3; exponent <= top; ++exponent) {
      const double spacing = std::ldexp(1.0, exponent - (format.precision_bits - 1));
      std::vector<double> values;
      for (int i = 0; i < 200; ++i) {
        // A random representable value of the binade, the tie above it and both neighbours
        // of the tie, and a random double of the binade.
        const double significand = 1.0 + std::ldexp(static_cast<double>(rng() >> (64 - (format.precision_bits - 1))),
                                                     -(format.precision_bits - 1));
        const double at = std::ldexp(significand, exponent), tie = at + spacing / 2;
        values.insert(values.end(), {at, tie, std::nextafter(tie, 0.0), std::nextafter(tie, kInf),
                                     std::ldexp(1.0 + static_cast<double>(rng() >> 12) * 0x1p-52, exponent)});
      }
      values.push_back(std::ldexp(2.0, exponent) - spacing / 2);  // rounds up into the next binade
      for (double value : values)
        for (double signed_value : {value, -value}) {
          ASSERT_EQ(round_to(dtype, signed_value), scaled(dtype, signed_value))
              << dtype_name(dtype) << " " << std::hexfloat << signed_value;
          ++compared;
        }
    }
  }
  EXPECT_GT(compared, 300000u);
}

TEST(DType, UlpAndStepsWalkTheRepresentableNumbers) {
  EXPECT_EQ(ulp(DType::fp16, 1.0), std::ldexp(1.0, -10));
  EXPECT_EQ(ulp(DType::fp32, 1.0), std::ldexp(1.0, -23));
  EXPECT_EQ(step_ulps(DType::fp16, 1.0, 1), 1.0 + std::ldexp(1.0, -10));
  EXPECT_EQ(step_ulps(DType::fp16, 1.0, -1), 1.0 - std::ldexp(1.0, -11));  // spacing halves below 1
  EXPECT_EQ(step_ulps(DType::fp16, 0.0, -1), -std::ldexp(1.0, -24));
  EXPECT_EQ(step_ulps(DType::fp16, 65504.0, 1), kInf);
  EXPECT_EQ(step_ulps(DType::fp32, -1.0, 1), -1.0 + std::ldexp(1.0, -24));
  EXPECT_TRUE(representable(DType::fp16, 2048.0));
  EXPECT_FALSE(representable(DType::fp16, 2049.0));
}

// ulp() reads the exponent from the double's bits and builds the power of two from bits: in
// every binade of the double (its subnormals, its largest values, powers of two and their
// neighbours) it must be what ilogb and ldexp give.
TEST(DType, UlpOnTheBitsAgreesWithIlogbAndLdexpInEveryBinade) {
  std::size_t compared = 0;
  for (DType dtype : kFloatDTypes) {
    const FloatFormat& format = float_format(dtype);
    auto reference = [&](double v) {
      if (dtype == DType::fp64) return std::nextafter(std::fabs(v), kInf) - std::fabs(v);
      const int exponent = v == 0 ? format.min_normal_exponent : std::max(std::ilogb(v), format.min_normal_exponent);
      return std::ldexp(1.0, exponent - (format.precision_bits - 1));
    };
    for (int e = -1074; e <= 1023; ++e) {
      const double power = std::ldexp(1.0, e);
      for (double v : {power, std::nextafter(power, 0.0), std::nextafter(power, kInf), power * 1.75}) {
        if (!std::isfinite(v)) continue;
        for (double signed_v : {v, -v}) {
          ASSERT_EQ(ulp(dtype, signed_v), reference(signed_v)) << dtype_name(dtype) << " " << signed_v;
          ASSERT_EQ(half_ulp(dtype, signed_v), reference(signed_v) / 2) << dtype_name(dtype) << " " << signed_v;
          ++compared;
        }
      }
    }
    EXPECT_EQ(ulp(dtype, 0.0), reference(0.0)) << dtype_name(dtype);
    EXPECT_TRUE(std::isnan(ulp(dtype, kInf))) << dtype_name(dtype);
  }
  EXPECT_GT(compared, 30000u);
}

}  // namespace
}  // namespace detfuzz

namespace detfuzz {
namespace {

// representable() reads bits for speed; it must agree with rounding everywhere, including
// subnormals of each format, powers of two and values just off the grid.
TEST(DType, RepresentableAgreesWithRoundingTrip) {
  std::uint64_t state = 12345;
  auto next = [&state] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return state >> 11;
  };
  for (DType dtype : kFloatDTypes) {
    for (int i = 0; i < 200000; ++i) {
      int exponent = static_cast<int>(next() % 80) - 40;
      double base = std::ldexp(static_cast<double>(next() % 4096), exponent);
      for (double value : {base, -base, round_to(dtype, base), std::nextafter(round_to(dtype, base), 1e300)}) {
        if (!std::isfinite(value)) continue;
        ASSERT_EQ(representable(dtype, value), round_to(dtype, value) == value)
            << dtype_name(dtype) << " " << value;
      }
    }
    for (double value : {std::ldexp(1.0, -24), std::ldexp(3.0, -26), std::ldexp(1.0, -133), 65504.0, 65505.0})
      EXPECT_EQ(representable(dtype, value), round_to(dtype, value) == value) << dtype_name(dtype) << " " << value;
  }
}

// The all-formats-at-once version the error tracker uses says what representable() says,
// format by format, on every kind of value (double subnormals, infinities and NaN too).
TEST(DType, RepresentableInEveryFormatAtOnceAgreesFormatByFormat) {
  std::uint64_t state = 777;
  auto next = [&state] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return state >> 11;
  };
  std::vector<double> values = {0.0, -0.0, 1.0, 65504.0, 65505.0, 0x1p-1074, 0x1p-1022, 0x1.8p-1060,
                                std::numeric_limits<double>::max(), std::numeric_limits<double>::infinity(),
                                -std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()};
  for (int i = 0; i < 100000; ++i) {
    const double base = std::ldexp(static_cast<double>(next() % 65536), static_cast<int>(next() % 400) - 200);
    for (DType dtype : kFloatDTypes) values.push_back(round_to(dtype, base));
    values.push_back(-base);
  }
  for (double value : values) {
    const auto all = representable_in_float_dtypes(value);
    for (std::size_t f = 0; f < kFloatDTypes.size(); ++f)
      ASSERT_EQ(all[f], representable(kFloatDTypes[f], value)) << dtype_name(kFloatDTypes[f]) << " " << value;
  }
}

}  // namespace
}  // namespace detfuzz
