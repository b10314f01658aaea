#include "ps_roi_pool.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "quantized_bins.h"
#include "running_error.h"

namespace detfuzz::oracles {
namespace {

constexpr double kSafety = 2.0;

struct BinMean {
  double value = 0;
  double error[2] = {0, 0};  // per tier, the kernel's rounding may add
  bool in_range = true;      // the sums within the accumulate type's range
};

// Whether `dtype` holds `value` exactly; fp32 and fp64 without the general rounding.
inline bool holds(DType dtype, double value) {
  if (dtype == DType::fp64) return true;
  if (dtype == DType::fp32) return std::fabs(value) <= std::numeric_limits<float>::max() &&
                                   static_cast<double>(static_cast<float>(value)) == value;
  return round_to(dtype, value) == value;
}

// The mean of one channel over a span, summed in torchvision's order (rows outer, columns
// inner, one running sum), then divided by the span's area. The running error analysis of
// ErrorTracker (running_error.h) written out for this one formula, for the two tiers' formats
// only: each partial sum that may round (its operand already did, or the exact sum is not held
// in double or in the format) adds u |sum|, the division likewise. The map's values are held by the storage dtype (they were
// rounded to it), so every term enters exact. A bench-sized call adds 10^8 values: the general
// tracker, four formats per step, made the oracle 30 times slower than the kernel.
BinMean bin_mean(const FeatureMap& map, std::int64_t n, std::int64_t c, const quantized_bins::Span& rows,
                 const quantized_bins::Span& columns, const std::size_t formats[2]) {
  if (rows.end <= rows.begin || columns.end <= columns.begin) return {};
  const DType tier_dtype[2] = {kFloatDTypes[formats[0]], kFloatDTypes[formats[1]]};
  const double u[2] = {float_format(tier_dtype[0]).unit_roundoff, float_format(tier_dtype[1]).unit_roundoff};
  const double u64 = float_format(DType::fp64).unit_roundoff;
  // A running sum within its rounding error of the accumulate type's largest finite value
  // may round to infinity in a kernel: out of range too, not only one whose exact value is.
  const double largest = float_format(tier_dtype[0]).max_finite;
  // fp32 and fp64 storage: both tiers round to the same format, computed once.
  const int tiers = formats[0] == formats[1] ? 1 : 2;
  double sum = 0, error[2] = {0, 0}, error64 = 0, largest_sum = 0;
  const double* plane = &map.values[static_cast<std::size_t>((n * map.channels + c) * map.height * map.width)];
  for (std::int64_t h = rows.begin; h < rows.end; ++h)
    for (std::int64_t w = columns.begin; w < columns.end; ++w) {
      const double v = plane[h * map.width + w];
      const double next = sum + v;
      const double back = next - sum;  // TwoSum, inline: this loop is the oracle's time
      const bool double_exact = (sum - (next - back)) + (v - back) == 0;
      // A step is exact only where its operands are (the kernel's running sum is ours) and
      // its result is held: after one rounding every later step may round too.
      for (int tier = 0; tier < tiers; ++tier)
        if (!double_exact || error[tier] > 0 || !holds(tier_dtype[tier], next)) error[tier] += u[tier] * std::fabs(next);
      if (!double_exact || error64 > 0) error64 += u64 * std::fabs(next);
      sum = next;
      largest_sum = std::max(largest_sum, std::fabs(sum));
    }
  if (tiers == 1) error[1] = error[0];
  // The errors only grow, so the final one bounds every partial sum's.
  const bool in_range = std::isfinite(sum) && largest_sum + kSafety * error[0] < largest;
  const double area = static_cast<double>((rows.end - rows.begin) * (columns.end - columns.begin));
  const double mean = sum / area;
  const bool division_exact = std::isfinite(mean) && std::fma(mean, area, -sum) == 0;
  BinMean out;
  out.value = mean;
  const double mean_error64 = error64 / area + (division_exact && error64 == 0 ? 0 : u64 * std::fabs(mean));
  for (int tier = 0; tier < 2; ++tier) {
    const bool exact = division_exact && error[tier] == 0 && round_to(tier_dtype[tier], mean) == mean;
    out.error[tier] = kSafety * (error[tier] / area + (exact ? 0 : u[tier] * std::fabs(mean)) + mean_error64);
  }
  out.in_range = in_range;
  return out;
}

}  // namespace

std::int64_t ps_channel_group(const RoiPoolProblem& p) { return p.pooled_height * p.pooled_width; }

std::vector<PsRoiPoolElement> ps_roi_pool(const RoiPoolProblem& p, DType storage) {
  const FeatureMap& map = p.input;
  const std::int64_t group = ps_channel_group(p);
  if (group <= 0 || map.channels % group != 0) return {};
  const std::int64_t channels_out = map.channels / group;
  const std::size_t formats[2] = {format_index(accumulate_type(storage)), format_index(storage)};
  const auto per_roi = static_cast<std::size_t>(channels_out * group);
  std::vector<PsRoiPoolElement> out;
  out.reserve(p.rois.size() * per_roi);
  for (const Roi& roi : p.rois) {
    const auto n = static_cast<std::int64_t>(roi.batch_index);
    quantized_bins::RoiBins bins;
    try {
      bins = quantized_bins::roi_bins(roi, p.spatial_scale, 0, p.pooled_height, p.pooled_width, map.height, map.width,
                                      storage);
    } catch (const quantized_bins::Unconstrained&) {
      PsRoiPoolElement anything;
      anything.unconstrained = true;
      for (std::size_t i = 0; i < per_roi; ++i) {
        anything.channel = static_cast<std::int64_t>(i);
        out.push_back(anything);
      }
      continue;
    }
    for (std::int64_t c_out = 0; c_out < channels_out; ++c_out)
      for (std::int64_t ph = 0; ph < p.pooled_height; ++ph)
        for (std::int64_t pw = 0; pw < p.pooled_width; ++pw) {
          PsRoiPoolElement e;
          e.channel = (c_out * p.pooled_height + ph) * p.pooled_width + pw;
          const auto row = static_cast<std::size_t>(ph), column = static_cast<std::size_t>(pw);
          const quantized_bins::Span nominal_rows = bins.rows[0][row].front();
          const quantized_bins::Span nominal_columns = bins.columns[0][column].front();
          const BinMean nominal = bin_mean(map, n, e.channel, nominal_rows, nominal_columns, formats);
          e.value = nominal.value;
          for (int tier = 0; tier < 2; ++tier) {
            RoiAlignTier& into = tier == 0 ? e.strict : e.storage;
            into = {std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(), 0};
            for (const quantized_bins::Span& r : bins.rows[tier + 1][row])
              for (const quantized_bins::Span& k : bins.columns[tier + 1][column]) {
                // Most bins have one span in every tier, fp64's: its mean is computed once.
                const BinMean option =
                    r == nominal_rows && k == nominal_columns ? nominal : bin_mean(map, n, e.channel, r, k, formats);
                into.low = std::min(into.low, option.value);
                into.high = std::max(into.high, option.value);
                into.bound = std::max(into.bound, option.error[tier]);
                e.range_ok = e.range_ok && option.in_range;
              }
          }
          out.push_back(e);
        }
  }
  return out;
}

std::optional<PsRoiPoolBin> ps_roi_pool_bin(const RoiPoolProblem& p, std::size_t element) {
  const std::int64_t group = ps_channel_group(p);
  if (group <= 0 || p.input.channels % group != 0) return std::nullopt;
  const auto per_roi = static_cast<std::size_t>(p.input.channels);
  if (element / per_roi >= p.rois.size()) return std::nullopt;
  const Roi& roi = p.rois[element / per_roi];
  const auto within = static_cast<std::int64_t>(element % per_roi);
  const auto row = static_cast<std::size_t>(within / p.pooled_width % p.pooled_height);
  const auto column = static_cast<std::size_t>(within % p.pooled_width);
  try {
    const quantized_bins::RoiBins bins = quantized_bins::roi_bins(roi, p.spatial_scale, 0, p.pooled_height,
                                                                  p.pooled_width, p.input.height, p.input.width,
                                                                  DType::fp64);
    const quantized_bins::Span rows = bins.rows[0][row].front(), columns = bins.columns[0][column].front();
    return PsRoiPoolBin{static_cast<std::int64_t>(roi.batch_index), within, rows.begin, rows.end, columns.begin,
                        columns.end};
  } catch (const quantized_bins::Unconstrained&) {
    return std::nullopt;
  }
}

}  // namespace detfuzz::oracles
