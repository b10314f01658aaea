// The one dtype helper of detfuzz: names, number formats, IEEE round-to-nearest-even
// into each format, ulps. Pure C++ so that oracles, generators, comparators and reports
// agree on the arithmetic without any of them pulling in LibTorch.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace detfuzz {

enum class DType : std::uint8_t { fp16, bf16, fp32, fp64, int64, int32, uint8, boolean, unknown };

// The dtypes a case can be generated in (the fuzzing matrix); the others only appear as
// the dtype of an output (NMS keep indices are int64).
inline constexpr std::array<DType, 4> kFloatDTypes = {DType::fp16, DType::bf16, DType::fp32,
                                                      DType::fp64};

struct FloatFormat {
  int precision_bits;     // significand bits including the implicit one
  int min_normal_exponent;  // exponent of the smallest normal number
  double max_finite;
  double min_normal;
  double unit_roundoff;   // 2^-precision_bits: the relative error bound of one rounding
};

// The formats of kFloatDTypes, in its order: precision bits, min normal exponent,
// (2 - 2^(1 - precision)) * 2^max exponent, 2^min normal exponent, 2^-precision.
// Constants, so hot loops read them without a call.
inline constexpr std::array<FloatFormat, kFloatDTypes.size()> kFloatFormats = {{
    {11, -14, 65504.0, 0x1p-14, 0x1p-11},
    {8, -126, 0x1.fep127, 0x1p-126, 0x1p-8},
    {24, -126, 0x1.fffffep127, 0x1p-126, 0x1p-24},
    {53, -1022, 0x1.fffffffffffffp1023, 0x1p-1022, 0x1p-53},
}};

std::string_view dtype_name(DType dtype);
// Accepts the names dtype_name prints plus the usual aliases (half, float16, float, ...).
std::optional<DType> parse_dtype(std::string_view name);
bool is_floating(DType dtype);
// Throws detfuzz::Error for a non-floating dtype.
const FloatFormat& float_format(DType dtype);

// PyTorch's at::acc_type convention on CPU and CUDA: low-precision floats are stored in
// fp16/bf16 but arithmetic is expected in fp32. Decides the strict tier of a verdict.
DType accumulate_type(DType dtype);

// IEEE-754 round-to-nearest-even of an exact double into `dtype`, overflowing to +-inf and
// honouring subnormals. Computed directly from the double (never via float) so that bf16
// and fp16 avoid double rounding.
double round_to(DType dtype, double value);
bool representable(DType dtype, double value);
// representable() in each of kFloatDTypes at once: the value's bits read once (the error
// tracker asks this for every intermediate of every oracle).
std::array<bool, kFloatDTypes.size()> representable_in_float_dtypes(double value);
// Distance from |value| to the next representable magnitude away from zero, in `dtype`.
double ulp(DType dtype, double value);
double half_ulp(DType dtype, double value);
// `value` moved by `steps` representable numbers of `dtype` (negative: downwards).
// `value` must already be representable.
double step_ulps(DType dtype, double value, int steps);

}  // namespace detfuzz
