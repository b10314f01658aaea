#include "roi_pool.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "running_error.h"

namespace detfuzz::oracles {
namespace {

constexpr double kSafety = 2.0;

// Beyond this the kernel's int conversions overflow (undefined behaviour in torchvision
// too): the oracle says nothing about such a RoI.
constexpr double kMaxCoordinate = 1 << 30;
constexpr std::int64_t kMaxResolutions = 8;

struct Unconstrained {};  // thrown inside one RoI's evaluation: its outputs accept anything

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

RoiPoolOption pool(const FeatureMap& map, std::int64_t n, std::int64_t c, std::int64_t h0, std::int64_t h1,
                   std::int64_t w0, std::int64_t w1) {
  if (h1 <= h0 || w1 <= w0) return {0.0, -1};
  RoiPoolOption best{-std::numeric_limits<double>::infinity(), -1};
  for (std::int64_t h = h0; h < h1; ++h)
    for (std::int64_t w = w0; w < w1; ++w) {
      const double v = map.at(n, c, h, w);
      if (best.argmax < 0 || v > best.value) best = {v, h * map.width + w};
    }
  return best;
}

void add_unique(std::vector<RoiPoolOption>& options, const RoiPoolOption& option) {
  if (std::find(options.begin(), options.end(), option) == options.end()) options.push_back(option);
}

struct Span {
  std::int64_t begin, end;
};

// Bin spans along one axis for one tier: every start/end rounding, every floor/ceil.
std::vector<std::vector<Span>> bin_spans(const Tracked& start, const Tracked& end, std::int64_t pooled,
                                         std::int64_t limit, std::size_t format, bool nominal_only) {
  auto round_half_away = [](double v) { return std::round(v); };
  const double start_error = nominal_only ? 0 : error_in(start, format);
  const double end_error = nominal_only ? 0 : error_in(end, format);
  std::vector<std::vector<Span>> per_bin(static_cast<std::size_t>(pooled));
  for (std::int64_t s : resolutions(start.value, start_error, round_half_away))
    for (std::int64_t e : resolutions(end.value, end_error, round_half_away)) {
      ErrorTracker t;
      const std::int64_t size = std::max<std::int64_t>(e - s + 1, 1);
      const Tracked bin = t.div(t.input(static_cast<double>(size)), t.input(static_cast<double>(pooled)));
      for (std::int64_t p = 0; p < pooled; ++p) {
        const Tracked lo = t.mul(t.input(static_cast<double>(p)), bin);
        const Tracked hi = t.mul(t.input(static_cast<double>(p + 1)), bin);
        const double lo_error = nominal_only ? 0 : error_in(lo, format);
        const double hi_error = nominal_only ? 0 : error_in(hi, format);
        for (std::int64_t b : resolutions(lo.value, lo_error, [](double v) { return std::floor(v); }))
          for (std::int64_t f : resolutions(hi.value, hi_error, [](double v) { return std::ceil(v); })) {
            Span span{std::clamp<std::int64_t>(b + s, 0, limit), std::clamp<std::int64_t>(f + s, 0, limit)};
            auto& spans = per_bin[static_cast<std::size_t>(p)];
            if (std::none_of(spans.begin(), spans.end(),
                             [&](const Span& x) { return x.begin == span.begin && x.end == span.end; }))
              spans.push_back(span);
          }
      }
    }
  return per_bin;
}

}  // namespace

std::vector<RoiPoolElement> roi_pool(const RoiPoolProblem& p, DType storage) {
  const FeatureMap& map = p.input;
  const std::size_t formats[2] = {format_index(accumulate_type(storage)), format_index(storage)};
  std::vector<RoiPoolElement> out;
  out.reserve(p.rois.size() * static_cast<std::size_t>(map.channels * p.pooled_height * p.pooled_width));
  for (const Roi& roi : p.rois) {
    ErrorTracker t;
    const Tracked scale = t.input(p.spatial_scale);
    const Tracked x1 = t.mul(t.input(roi.x1), scale), y1 = t.mul(t.input(roi.y1), scale);
    const Tracked x2 = t.mul(t.input(roi.x2), scale), y2 = t.mul(t.input(roi.y2), scale);
    const auto n = static_cast<std::int64_t>(roi.batch_index);
    // [0]: nominal, [1]: strict tier, [2]: storage tier.
    std::vector<std::vector<Span>> rows[3], cols[3];
    try {
      rows[0] = bin_spans(y1, y2, p.pooled_height, map.height, formats[0], true);
      cols[0] = bin_spans(x1, x2, p.pooled_width, map.width, formats[0], true);
      for (int tier = 0; tier < 2; ++tier) {
        rows[tier + 1] = bin_spans(y1, y2, p.pooled_height, map.height, formats[tier], false);
        cols[tier + 1] = bin_spans(x1, x2, p.pooled_width, map.width, formats[tier], false);
      }
    } catch (const Unconstrained&) {
      RoiPoolElement anything;
      anything.unconstrained = true;
      out.insert(out.end(), static_cast<std::size_t>(map.channels * p.pooled_height * p.pooled_width), anything);
      continue;
    }
    for (std::int64_t c = 0; c < map.channels; ++c)
      for (std::int64_t ph = 0; ph < p.pooled_height; ++ph)
        for (std::int64_t pw = 0; pw < p.pooled_width; ++pw) {
          RoiPoolElement element;
          const Span& row = rows[0][static_cast<std::size_t>(ph)].front();
          const Span& col = cols[0][static_cast<std::size_t>(pw)].front();
          element.nominal = pool(map, n, c, row.begin, row.end, col.begin, col.end);
          for (int tier = 0; tier < 2; ++tier) {
            auto& options = tier == 0 ? element.strict : element.storage;
            for (const Span& r : rows[tier + 1][static_cast<std::size_t>(ph)])
              for (const Span& k : cols[tier + 1][static_cast<std::size_t>(pw)])
                add_unique(options, pool(map, n, c, r.begin, r.end, k.begin, k.end));
          }
          out.push_back(std::move(element));
        }
  }
  return out;
}

}  // namespace detfuzz::oracles
