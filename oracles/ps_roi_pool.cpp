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

// The mean of one channel over a span, summed in torchvision's order (rows outer, columns
// inner, one running sum), then divided by the span's area.
BinMean bin_mean(const FeatureMap& map, std::int64_t n, std::int64_t c, const quantized_bins::Span& rows,
                 const quantized_bins::Span& columns, const std::size_t formats[2]) {
  if (rows.end <= rows.begin || columns.end <= columns.begin) return {};
  ErrorTracker t;
  Tracked sum = t.input(0.0);
  // A running sum within its rounding error of the accumulate type's largest finite value
  // may round to infinity in a kernel: out of range too, not only one whose exact value is.
  const double largest = float_format(kFloatDTypes[formats[0]]).max_finite;
  bool sums_in_range = true;
  for (std::int64_t h = rows.begin; h < rows.end; ++h)
    for (std::int64_t w = columns.begin; w < columns.end; ++w) {
      sum = t.add(sum, t.input(map.at(n, c, h, w)));
      sums_in_range = sums_in_range && std::fabs(sum.value) + kSafety * sum.error[formats[0]] < largest;
    }
  const double area = static_cast<double>((rows.end - rows.begin) * (columns.end - columns.begin));
  const Tracked mean = t.div(sum, t.input(area));
  BinMean out;
  out.value = mean.value;
  for (int tier = 0; tier < 2; ++tier)
    out.error[tier] = kSafety * (mean.error[formats[tier]] + mean.error[format_index(DType::fp64)]);
  out.in_range = t.in_range()[formats[0]] && sums_in_range;
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
          const BinMean nominal =
              bin_mean(map, n, e.channel, bins.rows[0][row].front(), bins.columns[0][column].front(), formats);
          e.value = nominal.value;
          for (int tier = 0; tier < 2; ++tier) {
            RoiAlignTier& into = tier == 0 ? e.strict : e.storage;
            into = {std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(), 0};
            for (const quantized_bins::Span& r : bins.rows[tier + 1][row])
              for (const quantized_bins::Span& k : bins.columns[tier + 1][column]) {
                const BinMean option = bin_mean(map, n, e.channel, r, k, formats);
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
