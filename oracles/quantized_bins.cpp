#include "quantized_bins.h"

#include <algorithm>
#include <cmath>

namespace detfuzz::oracles::quantized_bins {
namespace {

constexpr double kSafety = 2.0;
constexpr double kMaxCoordinate = 1 << 30;
constexpr std::int64_t kMaxResolutions = 8;

// Integers a kernel's f(value) may produce when its value is off by up to `error`; f is
// monotone (round, floor, ceil), so the ends of the interval bound them.
template <class F>
std::vector<std::int64_t> resolutions(double value, double error, F f) {
  const double lo_value = f(value - error), hi_value = f(value + error);
  if (!(std::fabs(lo_value) < kMaxCoordinate && std::fabs(hi_value) < kMaxCoordinate)) throw Unconstrained{};
  const auto lo = static_cast<std::int64_t>(lo_value), hi = static_cast<std::int64_t>(hi_value);
  if (hi - lo >= kMaxResolutions) throw Unconstrained{};
  std::vector<std::int64_t> out;
  for (std::int64_t v = lo; v <= hi; ++v) out.push_back(v);
  return out;
}

double error_in(const Tracked& t, std::size_t format) {
  return kSafety * (t.error[format] + t.error[format_index(DType::fp64)]);
}

// Bin spans along one axis for one tier: every start/end rounding, every floor/ceil.
std::vector<std::vector<Span>> bin_spans(const Tracked& start, const Tracked& end, std::int64_t size_extra,
                                         std::int64_t pooled, std::int64_t limit, std::size_t format,
                                         bool nominal_only) {
  auto round_half_away = [](double v) { return std::round(v); };
  const double start_error = nominal_only ? 0 : error_in(start, format);
  const double end_error = nominal_only ? 0 : error_in(end, format);
  std::vector<std::vector<Span>> per_bin(static_cast<std::size_t>(pooled));
  for (std::int64_t s : resolutions(start.value, start_error, round_half_away))
    for (std::int64_t e : resolutions(end.value, end_error, round_half_away)) {
      ErrorTracker t;
      const std::int64_t size = std::max<std::int64_t>(e - s + size_extra, 1);
      const Tracked bin = t.div(t.input(static_cast<double>(size)), t.input(static_cast<double>(pooled)));
      for (std::int64_t p = 0; p < pooled; ++p) {
        const Tracked lo = t.mul(t.input(static_cast<double>(p)), bin);
        const Tracked hi = t.mul(t.input(static_cast<double>(p + 1)), bin);
        const double lo_error = nominal_only ? 0 : error_in(lo, format);
        const double hi_error = nominal_only ? 0 : error_in(hi, format);
        for (std::int64_t b : resolutions(lo.value, lo_error, [](double v) { return std::floor(v); }))
          for (std::int64_t f : resolutions(hi.value, hi_error, [](double v) { return std::ceil(v); })) {
            const Span span{std::clamp<std::int64_t>(b + s, 0, limit), std::clamp<std::int64_t>(f + s, 0, limit)};
            auto& spans = per_bin[static_cast<std::size_t>(p)];
            if (std::find(spans.begin(), spans.end(), span) == spans.end()) spans.push_back(span);
          }
      }
    }
  return per_bin;
}

}  // namespace

RoiBins roi_bins(const Roi& roi, double spatial_scale, std::int64_t size_extra, std::int64_t pooled_height,
                 std::int64_t pooled_width, std::int64_t height, std::int64_t width, DType storage) {
  const std::size_t formats[2] = {format_index(accumulate_type(storage)), format_index(storage)};
  ErrorTracker t;
  const Tracked scale = t.input(spatial_scale);
  const Tracked x1 = t.mul(t.input(roi.x1), scale), y1 = t.mul(t.input(roi.y1), scale);
  const Tracked x2 = t.mul(t.input(roi.x2), scale), y2 = t.mul(t.input(roi.y2), scale);
  RoiBins bins;
  bins.rows[0] = bin_spans(y1, y2, size_extra, pooled_height, height, formats[0], true);
  bins.columns[0] = bin_spans(x1, x2, size_extra, pooled_width, width, formats[0], true);
  for (int tier = 0; tier < 2; ++tier) {
    bins.rows[tier + 1] = bin_spans(y1, y2, size_extra, pooled_height, height, formats[tier], false);
    bins.columns[tier + 1] = bin_spans(x1, x2, size_extra, pooled_width, width, formats[tier], false);
  }
  return bins;
}

}  // namespace detfuzz::oracles::quantized_bins
