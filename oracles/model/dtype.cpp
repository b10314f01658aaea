#include "model/dtype.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "model/error.h"

namespace detfuzz {
namespace {

struct DTypeInfo {
  DType dtype;
  std::string_view name;
  std::array<std::string_view, 3> aliases;
};

constexpr std::array<DTypeInfo, 8> kDTypeTable = {{
    {DType::fp16, "fp16", {"half", "float16", "f16"}},
    {DType::bf16, "bf16", {"bfloat16", "bfloat", ""}},
    {DType::fp32, "fp32", {"float", "float32", "f32"}},
    {DType::fp64, "fp64", {"double", "float64", "f64"}},
    {DType::int64, "int64", {"long", "i64", ""}},
    {DType::int32, "int32", {"int", "i32", ""}},
    {DType::uint8, "uint8", {"byte", "u8", ""}},
    {DType::boolean, "bool", {"boolean", "", ""}},
}};

// A double's bits and back, and the biased exponent field of those bits (0: zero or
// subnormal, 0x7ff: inf or NaN).
std::uint64_t bits_of(double value) {
  std::uint64_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

double double_of(std::uint64_t bits) {
  double value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

int biased_exponent(std::uint64_t bits) { return static_cast<int>((bits >> 52) & 0x7ff); }

// The exponent of a double, as std::ilogb gives it, from the bits where the double is
// normal; and 2^exponent, as std::ldexp(1.0, exponent) gives it, from the bits where that
// is a normal double. The error tracker asks for a spacing on every inexact input: through
// libm these two calls were a sixth of a box IoU case's oracle.
int binary_exponent(double value) {
  const int biased = biased_exponent(bits_of(value));
  if (biased == 0 || biased == 0x7ff) return std::ilogb(value);  // zero, subnormal, inf, NaN
  return biased - 1023;
}

double power_of_two(int exponent) {
  if (exponent < -1022 || exponent > 1023) return std::ldexp(1.0, exponent);
  return double_of(static_cast<std::uint64_t>(exponent + 1023) << 52);
}

// Exponent of the spacing of representable numbers around |value| (value finite).
int spacing_exponent(const FloatFormat& format, double value) {
  int exponent = value == 0.0 ? format.min_normal_exponent : binary_exponent(value);
  if (exponent < format.min_normal_exponent) exponent = format.min_normal_exponent;
  return exponent - (format.precision_bits - 1);
}

double next_away_from_zero(const FloatFormat& format, double magnitude) {
  return magnitude + power_of_two(spacing_exponent(format, magnitude));
}

double next_toward_zero(const FloatFormat& format, double magnitude) {
  int exponent = binary_exponent(magnitude);
  double spacing = power_of_two(spacing_exponent(format, magnitude));
  // Just below a power of two the spacing halves (except in the subnormal range).
  if (magnitude == power_of_two(exponent) && exponent > format.min_normal_exponent) spacing /= 2;
  return magnitude - spacing;
}

}  // namespace

std::string_view dtype_name(DType dtype) {
  for (const auto& info : kDTypeTable)
    if (info.dtype == dtype) return info.name;
  return "unknown";
}

std::optional<DType> parse_dtype(std::string_view name) {
  for (const auto& info : kDTypeTable) {
    if (name == info.name) return info.dtype;
    for (auto alias : info.aliases)
      if (!alias.empty() && name == alias) return info.dtype;
  }
  return std::nullopt;
}

bool is_floating(DType dtype) {
  return dtype == DType::fp16 || dtype == DType::bf16 || dtype == DType::fp32 ||
         dtype == DType::fp64;
}

const FloatFormat& float_format(DType dtype) {
  switch (dtype) {
    case DType::fp16: return kFloatFormats[0];
    case DType::bf16: return kFloatFormats[1];
    case DType::fp32: return kFloatFormats[2];
    case DType::fp64: return kFloatFormats[3];
    default:
      throw Error(ErrorKind::internal,
                  "float_format: expected a floating dtype, got " + std::string(dtype_name(dtype)));
  }
}

DType accumulate_type(DType dtype) {
  return (dtype == DType::fp16 || dtype == DType::bf16) ? DType::fp32 : dtype;
}

double round_to(DType dtype, double value) {
  if (dtype == DType::fp64 || !std::isfinite(value) || value == 0.0) return value;
  const FloatFormat& format = float_format(dtype);
  if (std::fabs(value) >= format.min_normal) {
    // The format's normal range: round the double's significand to the format's precision on
    // its bits, half to even (a carry out of the significand moves the exponent up, as
    // rounding does). The scaled rounding below gives the same; this is the hot path of
    // every emulated kernel and generator (rounding boxes with ldexp and nearbyint was 23% of
    // generating a box_area case).
    std::uint64_t bits = bits_of(value);
    const int dropped = 53 - format.precision_bits;
    const std::uint64_t unit = std::uint64_t{1} << dropped;
    bits += unit / 2 - 1 + ((bits >> dropped) & 1);
    bits &= ~(unit - 1);
    const double rounded = double_of(bits);
    if (std::fabs(rounded) > format.max_finite) return std::copysign(std::numeric_limits<double>::infinity(), value);
    return rounded;
  }
  double quantum = power_of_two(spacing_exponent(format, value));
  // value / quantum is exact (power-of-two scaling); nearbyint rounds half to even in the
  // default rounding mode, which is what IEEE conversion does.
  double rounded = std::nearbyint(value / quantum) * quantum;
  if (std::fabs(rounded) > format.max_finite)
    return std::copysign(std::numeric_limits<double>::infinity(), value);
  return rounded;
}

namespace {

// The exponent of the last set bit of a finite nonzero double that is not subnormal, and
// the exponent of its leading bit; such a value is representable in a format iff its last
// bit is no finer than the format's spacing at its magnitude.
struct Bits {
  int last_bit, magnitude;
};

std::optional<Bits> normal_bits(double value) {
  const std::uint64_t bits = bits_of(value);
  const int biased = biased_exponent(bits);
  if (biased == 0) return std::nullopt;
  const std::uint64_t significand = (bits & ((std::uint64_t{1} << 52) - 1)) | (std::uint64_t{1} << 52);
  return Bits{biased - 1075 + __builtin_ctzll(significand), biased - 1023};
}

bool fits(const FloatFormat& format, const Bits& bits, double magnitude) {
  return magnitude <= format.max_finite &&
         bits.last_bit >= std::max(bits.magnitude, format.min_normal_exponent) - (format.precision_bits - 1);
}

}  // namespace

bool representable(DType dtype, double value) {
  if (dtype == DType::fp64 || !std::isfinite(value) || value == 0.0) return true;
  const FloatFormat& format = float_format(dtype);
  // The oracles ask this for every intermediate, so read the bits instead of rounding.
  const auto bits = normal_bits(value);
  if (!bits) return round_to(dtype, value) == value;  // double subnormal: rare path
  return fits(format, *bits, std::fabs(value));
}

std::array<bool, kFloatDTypes.size()> representable_in_float_dtypes(double value) {
  std::array<bool, kFloatDTypes.size()> result;
  if (value == 0.0) {  // common (empty sums, zero weights), and held by every format
    result.fill(true);
    return result;
  }
  const auto bits = std::isfinite(value) ? normal_bits(value) : std::nullopt;
  if (!bits) {  // non-finite or a double subnormal: rare
    for (std::size_t f = 0; f < result.size(); ++f) result[f] = representable(kFloatDTypes[f], value);
    return result;
  }
  const double magnitude = std::fabs(value);
  // The answers packed in a register and copied out whole: stored as four bools, they were
  // read back as one word (the array is returned in a register), which store forwarding
  // cannot serve; that stall was half of this function's time and a tenth of a small
  // loss case's oracle.
  static_assert(sizeof result == sizeof(std::uint32_t) && sizeof(bool) == 1);
  static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "format f's answer is byte f of the word");
  std::uint32_t packed = 0;
#pragma GCC unroll 4
  for (std::size_t f = 0; f < result.size(); ++f)
    packed |= static_cast<std::uint32_t>(kFloatDTypes[f] == DType::fp64 || fits(kFloatFormats[f], *bits, magnitude))
              << (8 * f);
  std::memcpy(&result, &packed, sizeof result);
  return result;
}

double ulp(DType dtype, double value) {
  if (!std::isfinite(value)) return std::numeric_limits<double>::quiet_NaN();
  if (dtype == DType::fp64) {
    double magnitude = std::fabs(value);
    return std::nextafter(magnitude, std::numeric_limits<double>::infinity()) - magnitude;
  }
  return power_of_two(spacing_exponent(float_format(dtype), value));
}

double half_ulp(DType dtype, double value) { return ulp(dtype, value) / 2; }

double step_ulps(DType dtype, double value, int steps) {
  const FloatFormat& format = float_format(dtype);
  double current = value;
  for (int i = 0; i < steps; ++i)
    current = current >= 0 ? next_away_from_zero(format, current)
                           : -next_toward_zero(format, -current);
  for (int i = 0; i < -steps; ++i)
    current = current > 0 ? next_toward_zero(format, current)
                          : -next_away_from_zero(format, -current);
  if (std::fabs(current) > format.max_finite)
    current = std::copysign(std::numeric_limits<double>::infinity(), current);
  return current;
}

}  // namespace detfuzz
