#include "roi_align.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <set>

#include "roi_align_internal.h"

namespace detfuzz::oracles {
using namespace roi_align_internal;

namespace {

// What a bin's samples sum to, per channel and tier (before dividing by the count).
struct BinSum {
  Tracked sum;                                  // over the samples fp64 counts
  double flip_low[kTiers]{}, flip_high[kTiers]{};  // what ambiguous samples may add or remove
  double extra_error[kTiers]{};                 // position errors through the local slope
};

AxisSample::Fractions fractions(AxisSample& a, const std::array<bool, kFloatDTypes.size()>& exact,
                                const Tracked& one, ErrorTracker& t) {
  unsigned pattern = 0;
  for (std::size_t f = 0; f < exact.size(); ++f) pattern |= static_cast<unsigned>(exact[f]) << f;
  for (int i = 0; i < a.kept; ++i)
    if (a.fractions[i].pattern == pattern) return a.fractions[i];
  const Tracked fraction = t.derived(a.clamped - a.low, exact);
  const AxisSample::Fractions computed{pattern, fraction, t.sub(one, fraction)};
  if (a.kept < AxisSample::kKeptFractions) a.fractions[a.kept++] = computed;
  return computed;
}

}  // namespace

// Error of a tracked quantity in one tier: widened, plus the oracle's own fp64 error.
double roi_align_internal::widened(const Tracked& t, const Tiers& tiers, int tier) {
  return kSafety * (t.error[tiers.format[tier]] + t.error[tiers.fp64]);
}




// `aligned`: the problem's flag, or true for PSRoIAlign (whose geometry it is).
RoiGeometry roi_align_internal::geometry(const RoiAlignProblem& p, const Roi& roi, bool aligned) {
  RoiGeometry g;
  ErrorTracker& t = g.tracker;
  // torchvision passes spatial_scale as T: a kernel in fp16 rounds it.
  const Tracked scale = t.input(p.spatial_scale);
  const Tracked offset = t.input(aligned ? 0.5 : 0.0);
  g.start_w = t.sub(t.mul(t.input(roi.x1), scale), offset);
  g.start_h = t.sub(t.mul(t.input(roi.y1), scale), offset);
  const Tracked end_w = t.sub(t.mul(t.input(roi.x2), scale), offset);
  const Tracked end_h = t.sub(t.mul(t.input(roi.y2), scale), offset);
  Tracked size_w = t.sub(end_w, g.start_w), size_h = t.sub(end_h, g.start_h);
  if (!aligned) {
    size_w = t.max(size_w, t.input(1.0));
    size_h = t.max(size_h, t.input(1.0));
  }
  g.width = size_w.value;
  g.height = size_h.value;
  g.bin_w = t.div(size_w, t.input(static_cast<double>(p.pooled_width)));
  g.bin_h = t.div(size_h, t.input(static_cast<double>(p.pooled_height)));
  return g;
}

// Grid counts a kernel may use: ceil(size / pooled) of its own (rounded) quotient, which
// is the bin size.
std::set<int> roi_align_internal::grid_counts(const RoiAlignProblem& p, const Tracked& bin, const Tiers& tiers, int tier) {
  if (p.sampling_ratio > 0) return {static_cast<int>(p.sampling_ratio)};
  const double error = widened(bin, tiers, tier);
  if (!(bin.value + error < kMaxRoiAlignSamples) || error > 4) return {};  // the caller gives up on the RoI
  std::set<int> counts;
  for (double c = std::ceil(bin.value - error); c <= std::ceil(bin.value + error); ++c) counts.insert(static_cast<int>(c));
  return counts;
}

// Sample positions along one axis for one bin: start + index * bin + (i + .5) * bin / grid,
// in torchvision's evaluation order.
std::vector<Tracked> roi_align_internal::positions(ErrorTracker& t, const Tracked& start, const Tracked& bin, int index, int grid) {
  std::vector<Tracked> out;
  const Tracked base = t.add(start, t.mul(t.input(index), bin));
  for (int i = 0; i < grid; ++i)
    out.push_back(t.add(base, t.div(t.mul(t.input(i + 0.5), bin), t.input(grid))));
  return out;
}


AxisSample roi_align_internal::axis_sample(const Tracked& position, std::int64_t size, const Tiers& tiers) {
  AxisSample a;
  a.position = position;
  const double p = position.value, edge = static_cast<double>(size);
  a.inside = p >= -1.0 && p <= edge;
  for (int tier = 0; tier < kTiers; ++tier) {
    a.error[tier] = widened(position, tiers, tier);
    auto crosses = [&](double line) { return p - a.error[tier] <= line && line <= p + a.error[tier]; };
    a.crosses[tier] = crosses(-1.0) || crosses(edge);
  }
  a.clamped = p <= 0 ? 0 : p;
  a.low = static_cast<int>(a.clamped);
  if (a.low >= size - 1) {
    a.high = a.low = static_cast<int>(size - 1);
    a.clamped = a.low;
  } else {
    a.high = a.low + 1;
  }
  return a;
}


// `one`: t.input(1.0). Into a fresh sample `s` in place: a Sample is 440 bytes, and
// returning one to copy into the vector was a fifth of evaluate_roi's own time.
void roi_align_internal::make_sample(AxisSample& y, AxisSample& x, std::int64_t width, const Tracked& one, ErrorTracker& t, Sample& s) {
  s.y = y.position.value;
  s.x = x.position.value;
  s.inside = y.inside && x.inside;
  std::array<bool, kFloatDTypes.size()> exact_position{};
  for (std::size_t f = 0; f < exact_position.size(); ++f)
    exact_position[f] = y.position.error[f] == 0 && x.position.error[f] == 0;
  for (int tier = 0; tier < kTiers; ++tier) {
    s.error_y[tier] = y.error[tier];
    s.error_x[tier] = x.error[tier];
    s.ambiguous[tier] = y.crosses[tier] || x.crosses[tier];
  }
  s.counted = s.inside || s.ambiguous[0] || s.ambiguous[1];
  s.y_low = y.low;
  s.y_high = y.high;
  s.x_low = x.low;
  s.x_high = x.high;
  s.offset[0] = s.y_low * width + s.x_low;
  s.offset[1] = s.y_low * width + s.x_high;
  s.offset[2] = s.y_high * width + s.x_low;
  s.offset[3] = s.y_high * width + s.x_high;
  const AxisSample::Fractions along_y = fractions(y, exact_position, one, t);
  const AxisSample::Fractions along_x = fractions(x, exact_position, one, t);
  s.weight[0] = t.mul(along_y.rest, along_x.rest);
  s.weight[1] = t.mul(along_y.rest, along_x.fraction);
  s.weight[2] = t.mul(along_y.fraction, along_x.rest);
  s.weight[3] = t.mul(along_y.fraction, along_x.fraction);
  for (int k = 0; k < 4; ++k) s.weight_fp32[k] = static_cast<float>(s.weight[k].value);
}


namespace {

// A tier of an element by number (0: strict, 1: storage), as the per-tier loops count them.
RoiAlignTier& tier_of(RoiAlignElement& element, int tier) { return tier == 0 ? element.strict : element.storage; }


ElementContext element_context(const FeatureMap& map, const Tiers& tiers, const Tracked& count,
                               bool geometry_in_range) {
  ElementContext c{map, tiers, float_format(kFloatDTypes[tiers.format[0]]), count};
  c.geometry_in_range = geometry_in_range;
  auto slot = [&](std::size_t index) {
    for (int i = 0; i < c.formats; ++i)
      if (c.format_index[i] == index) return i;
    const FloatFormat& format = float_format(kFloatDTypes[index]);
    c.format_index[c.formats] = index;
    c.unit_roundoff[c.formats] = format.unit_roundoff;
    c.smallest_normal = std::max(c.smallest_normal, format.min_normal);
    return c.formats++;
  };
  for (int tier = 0; tier < kTiers; ++tier) c.slot_of_tier[tier] = slot(tiers.format[tier]);
  c.fp64_slot = slot(tiers.fp64);
  if (tiers.format[0] == tiers.format[1]) c.distinct_tiers = 1;
  return c;
}

}  // namespace

// The reference arithmetic: every step of the element through the general ErrorTracker,
// which knows which steps are exact in which format.
void roi_align_internal::tracked_element(const ElementContext& ctx, const double* plane, const Sample* begin,
                                         const Sample* end, RoiAlignElement& r) {
  const FeatureMap& map = ctx.map;
  ErrorTracker values;
  BinSum bin{values.input(0.0)};
  for (const Sample* s = begin; s != end; ++s) {
    if (!s->counted) continue;
    const double v[4] = {plane[s->offset[0]], plane[s->offset[1]], plane[s->offset[2]], plane[s->offset[3]]};
    Tracked term = values.mul(s->weight[0], values.input(v[0]));
    for (int k = 1; k < 4; ++k) term = values.add(term, values.mul(s->weight[k], values.input(v[k])));
    for (int tier = 0; tier < kTiers; ++tier) {
      double slope_x, slope_y;
      position_slopes(plane, map.height, map.width, *s, tier, v, slope_x, slope_y);
      bin.extra_error[tier] += slope_x * s->error_x[tier] + slope_y * s->error_y[tier];
      if (s->ambiguous[tier]) {
        const double change = s->inside ? -term.value : term.value;
        bin.flip_low[tier] += std::min(0.0, change);
        bin.flip_high[tier] += std::max(0.0, change);
        bin.extra_error[tier] += widened(term, ctx.tiers, tier);
      }
    }
    if (s->inside) bin.sum = values.add(bin.sum, term);
  }
  const Tracked average = values.div(bin.sum, ctx.count);
  r.value = average.value;
  for (int tier = 0; tier < kTiers; ++tier) {
    RoiAlignTier& into = tier_of(r, tier);
    into.low = (bin.sum.value + bin.flip_low[tier]) / ctx.count.value;
    into.high = (bin.sum.value + bin.flip_high[tier]) / ctx.count.value;
    into.bound = widened(average, ctx.tiers, tier) + bin.extra_error[tier] / ctx.count.value;
  }
  r.range_ok = values.in_range()[ctx.tiers.format[0]] && ctx.geometry_in_range;
  r.unconstrained = false;
}

namespace {

// How the per-channel arithmetic is evaluated: the general ErrorTracker for every element
// (the reference) or the closed form where it applies (the oracle).
enum class Arithmetic { tracker, closed_form };

// Which input channel an output element reads. RoIAlign's element (c, bin) reads channel c;
// PSRoIAlign's reads c * bins + bin (R-FCN's position-sensitive score maps), and its output
// has C / bins channels.
struct ChannelLayout {
  bool position_sensitive = false;
  // Per bin, the channels that bin reads (c * bins + bin for every c), as a map of their
  // own: the closed form takes a bin's channels as lanes of one contiguous map.
  std::vector<FeatureMap> bin_maps;
};

// Into `layout`, whose maps keep their memory from call to call (per thread): a bench-sized
// map's copy is 100 MB, and fresh pages for it every call were half of the oracle's time.
void position_sensitive_layout(const RoiAlignProblem& p, Arithmetic arithmetic, ChannelLayout& layout) {
  layout.position_sensitive = true;
  if (arithmetic != Arithmetic::closed_form) return;
  const FeatureMap& map = p.input;
  const std::int64_t bins = p.pooled_height * p.pooled_width, channels_out = map.channels / bins;
  const auto plane = static_cast<std::size_t>(map.height * map.width);
  layout.bin_maps.resize(static_cast<std::size_t>(bins));
  for (std::int64_t bin = 0; bin < bins; ++bin) {
    FeatureMap& m = layout.bin_maps[static_cast<std::size_t>(bin)];
    m.batch = map.batch;
    m.channels = channels_out;
    m.height = map.height;
    m.width = map.width;
    m.values.resize(static_cast<std::size_t>(map.batch * channels_out) * plane);
    double* into = m.values.data();
    for (std::int64_t n = 0; n < map.batch; ++n)
      for (std::int64_t c = 0; c < channels_out; ++c, into += plane) {
        const double* from = &map.values[static_cast<std::size_t>((n * map.channels + c * bins + bin)) * plane];
        std::copy(from, from + plane, into);
      }
  }
}

void evaluate_ps_roi(const RoiAlignProblem& p, const Roi& roi, RoiGeometry& g, int grid_h, int grid_w,
                     const Tiers& tiers, DType storage, Arithmetic arithmetic, const ChannelLayout& layout,
                     RoiAlignElement* results);

void evaluate_roi(const RoiAlignProblem& p, const Roi& roi, RoiGeometry& g, int grid_h, int grid_w,
                  const Tiers& tiers, DType storage, Arithmetic arithmetic, const ChannelLayout& layout,
                  RoiAlignElement* results) {
  if (layout.position_sensitive) return evaluate_ps_roi(p, roi, g, grid_h, grid_w, tiers, storage, arithmetic, layout, results);
  const FeatureMap& map = p.input;
  const auto n = static_cast<std::int64_t>(roi.batch_index);
  ErrorTracker& t = g.tracker;
  const auto bins = static_cast<std::size_t>(p.pooled_height * p.pooled_width);
  // A negative grid (an aligned RoI with x2 < x1) samples nothing, as torchvision's loops
  // do, while its count max(grid_h * grid_w, 1) may still be positive.
  const auto per_bin = static_cast<std::size_t>(std::max(grid_h, 0)) * static_cast<std::size_t>(std::max(grid_w, 0));
  std::vector<Sample> samples;
  samples.reserve(bins * per_bin);
  auto axis = [&](const Tracked& start, const Tracked& bin, std::int64_t index, int grid, std::int64_t size) {
    std::vector<AxisSample> out;
    for (const Tracked& position : positions(t, start, bin, static_cast<int>(index), grid))
      out.push_back(axis_sample(position, size, tiers));
    return out;
  };
  std::vector<std::vector<AxisSample>> columns;
  for (std::int64_t pw = 0; pw < p.pooled_width; ++pw) columns.push_back(axis(g.start_w, g.bin_w, pw, grid_w, map.width));
  const Tracked one = t.input(1.0);
  for (std::int64_t ph = 0; ph < p.pooled_height; ++ph) {
    std::vector<AxisSample> rows = axis(g.start_h, g.bin_h, ph, grid_h, map.height);
    for (std::vector<AxisSample>& bin_columns : columns)
      for (AxisSample& y : rows)
        for (AxisSample& x : bin_columns) make_sample(y, x, map.width, one, t, samples.emplace_back());
  }
  const Tracked count = t.input(std::max(grid_h * grid_w, 1));
  const ElementContext ctx = element_context(map, tiers, count, t.in_range()[tiers.format[0]]);
  const double* base = &map.values[static_cast<std::size_t>(n * map.channels * map.height * map.width)];
  if (arithmetic == Arithmetic::tracker) {
    const auto plane_size = static_cast<std::size_t>(map.height * map.width);
    for (std::int64_t c = 0; c < map.channels; ++c)
      for (std::size_t bin = 0; bin < bins; ++bin) {
        const Sample* begin = samples.data() + bin * per_bin;
        tracked_element(ctx, base + static_cast<std::size_t>(c) * plane_size, begin, begin + per_bin,
                        results[static_cast<std::size_t>(c) * bins + bin]);
      }
  } else {
    closed_form_elements(ctx, base, samples.data(), bins, per_bin, static_cast<std::size_t>(p.pooled_width),
                         map.channels, storage, results);
  }
}

// The position-sensitive elements of one RoI (C / bins channels x bins) for one grid count:
// bin by bin, its samples alone, over the channels that bin reads.
void evaluate_ps_roi(const RoiAlignProblem& p, const Roi& roi, RoiGeometry& g, int grid_h, int grid_w,
                     const Tiers& tiers, DType storage, Arithmetic arithmetic, const ChannelLayout& layout,
                     RoiAlignElement* results) {
  const FeatureMap& map = p.input;
  const auto n = static_cast<std::int64_t>(roi.batch_index);
  ErrorTracker& t = g.tracker;
  const std::int64_t bins = p.pooled_height * p.pooled_width, channels_out = map.channels / bins;
  const auto per_bin = static_cast<std::size_t>(std::max(grid_h, 0)) * static_cast<std::size_t>(std::max(grid_w, 0));
  const Tracked one = t.input(1.0);
  const Tracked count = t.input(std::max(grid_h * grid_w, 1));
  const auto plane = static_cast<std::size_t>(map.height * map.width);
  std::vector<Sample> samples;
  thread_local std::vector<RoiAlignElement> lanes;
  for (std::int64_t ph = 0; ph < p.pooled_height; ++ph)
    for (std::int64_t pw = 0; pw < p.pooled_width; ++pw) {
      const std::int64_t bin = ph * p.pooled_width + pw;
      std::vector<AxisSample> rows, columns;
      for (const Tracked& position : positions(t, g.start_h, g.bin_h, static_cast<int>(ph), grid_h))
        rows.push_back(axis_sample(position, map.height, tiers));
      for (const Tracked& position : positions(t, g.start_w, g.bin_w, static_cast<int>(pw), grid_w))
        columns.push_back(axis_sample(position, map.width, tiers));
      samples.clear();
      samples.reserve(per_bin);
      for (AxisSample& y : rows)
        for (AxisSample& x : columns) make_sample(y, x, map.width, one, t, samples.emplace_back());
      const Sample* begin = samples.data();
      if (arithmetic == Arithmetic::tracker) {
        const ElementContext ctx = element_context(map, tiers, count, t.in_range()[tiers.format[0]]);
        const double* base = &map.values[static_cast<std::size_t>(n * map.channels) * plane];
        for (std::int64_t c = 0; c < channels_out; ++c)
          tracked_element(ctx, base + static_cast<std::size_t>(c * bins + bin) * plane, begin, begin + per_bin,
                          results[static_cast<std::size_t>(c * bins + bin)]);
      } else {
        const FeatureMap& bin_map = layout.bin_maps[static_cast<std::size_t>(bin)];
        const ElementContext ctx = element_context(bin_map, tiers, count, t.in_range()[tiers.format[0]]);
        const double* base = &bin_map.values[static_cast<std::size_t>(n * channels_out) * plane];
        lanes.resize(static_cast<std::size_t>(channels_out));
        closed_form_elements(ctx, base, begin, 1, per_bin, 1, channels_out, storage, lanes.data());
        for (std::int64_t c = 0; c < channels_out; ++c)
          results[static_cast<std::size_t>(c * bins + bin)] = lanes[static_cast<std::size_t>(c)];
      }
    }
}

RoiAlignAnswer evaluate(const RoiAlignProblem& p, DType storage, Arithmetic arithmetic,
                        const ChannelLayout& layout = {}) {
  const Tiers tiers{{format_index(accumulate_type(storage)), format_index(storage)}, format_index(DType::fp64)};
  const std::size_t per_roi = static_cast<std::size_t>(
      layout.position_sensitive ? p.input.channels : p.input.channels * p.pooled_height * p.pooled_width);
  RoiAlignAnswer out;
  out.reserve(p.rois.size() * per_roi);
  // Another grid count's elements, kept across calls (per thread): a RoI's elements run to
  // megabytes, and allocating them per call lets malloc hand back and fault in fresh pages
  // every time.
  thread_local RoiAlignAnswer other;
  for (const Roi& roi : p.rois) {
    RoiGeometry g = geometry(p, roi, p.aligned || layout.position_sensitive);
    auto grid = [&](const Tracked& bin) {
      return p.sampling_ratio > 0 ? static_cast<double>(p.sampling_ratio) : std::max(1.0, std::ceil(std::fabs(bin.value)));
    };
    const double work = grid(g.bin_h) * grid(g.bin_w) * static_cast<double>(per_roi);
    bool sane = std::isfinite(work) && work <= kMaxRoiAlignSamples;
    for (const Tracked* t : {&g.start_h, &g.start_w, &g.bin_h, &g.bin_w}) sane = sane && std::fabs(t->value) < (1 << 30);
    if (!sane) {
      const RoiAlignElement anything{0, {0, 0, 0}, {0, 0, 0}, true, true};
      out.insert(out.end(), per_roi, anything);
      continue;
    }
    const int nominal_h = p.sampling_ratio > 0 ? static_cast<int>(p.sampling_ratio)
                                               : static_cast<int>(std::ceil(g.bin_h.value));
    const int nominal_w = p.sampling_ratio > 0 ? static_cast<int>(p.sampling_ratio)
                                               : static_cast<int>(std::ceil(g.bin_w.value));
    // Written in place: through a scratch vector, the copy and its passes cost about 5% of
    // a bench-sized call.
    out.resize(out.size() + per_roi);
    RoiAlignElement* elements = &out[out.size() - per_roi];
    evaluate_roi(p, roi, g, nominal_h, nominal_w, tiers, storage, arithmetic, layout, elements);
    // Grid counts rounding can move: each tier spans every count it leaves open.
    std::set<int> heights[kTiers], widths[kTiers];
    bool open_ended = false;
    for (int tier = 0; tier < kTiers; ++tier) {
      heights[tier] = grid_counts(p, g.bin_h, tiers, tier);
      widths[tier] = grid_counts(p, g.bin_w, tiers, tier);
      open_ended = open_ended || heights[tier].empty() || widths[tier].empty();
    }
    if (open_ended) {
      for (std::size_t i = 0; i < per_roi; ++i) elements[i].unconstrained = true;
      continue;
    }
    std::set<int> all_heights = heights[0], all_widths = widths[0];
    all_heights.insert(heights[1].begin(), heights[1].end());
    all_widths.insert(widths[1].begin(), widths[1].end());
    for (int gh : all_heights)
      for (int gw : all_widths) {
        if (gh == nominal_h && gw == nominal_w) continue;
        other.resize(per_roi);
        evaluate_roi(p, roi, g, gh, gw, tiers, storage, arithmetic, layout, other.data());
        for (int tier = 0; tier < kTiers; ++tier) {
          if (!heights[tier].count(gh) || !widths[tier].count(gw)) continue;
          for (std::size_t i = 0; i < per_roi; ++i) {
            RoiAlignTier& into = tier_of(elements[i], tier);
            const RoiAlignTier& from = tier_of(other[i], tier);
            into.low = std::min(into.low, from.low);
            into.high = std::max(into.high, from.high);
            into.bound = std::max(into.bound, from.bound);
          }
        }
      }
  }
  return out;
}

}  // namespace

RoiAlignAnswer roi_align(const RoiAlignProblem& problem, DType storage) {
  return evaluate(problem, storage, Arithmetic::closed_form);
}

RoiAlignAnswer roi_align_reference(const RoiAlignProblem& problem, DType storage) {
  return evaluate(problem, storage, Arithmetic::tracker);
}

namespace {

RoiAlignAnswer evaluate_ps(const RoiAlignProblem& problem, DType storage, Arithmetic arithmetic) {
  const std::int64_t bins = problem.pooled_height * problem.pooled_width;
  if (bins <= 0 || problem.input.channels % bins != 0) return {};
  // PSRoIAlign's geometry is aligned RoIAlign's (the -0.5 shift, no size clamp), whatever
  // problem.aligned says: the layout tells evaluate so (a copy of the problem would copy its map).
  thread_local ChannelLayout layout;
  position_sensitive_layout(problem, arithmetic, layout);
  return evaluate(problem, storage, arithmetic, layout);
}

}  // namespace

RoiAlignAnswer ps_roi_align(const RoiAlignProblem& problem, DType storage) {
  return evaluate_ps(problem, storage, Arithmetic::closed_form);
}

RoiAlignAnswer ps_roi_align_reference(const RoiAlignProblem& problem, DType storage) {
  return evaluate_ps(problem, storage, Arithmetic::tracker);
}

PlainGeometry roi_align_internal::plain_geometry(const RoiAlignProblem& p, const Roi& roi, bool aligned) {
  const double offset = aligned ? 0.5 : 0.0;
  PlainGeometry g{};
  g.start_w = roi.x1 * p.spatial_scale - offset;
  g.start_h = roi.y1 * p.spatial_scale - offset;
  double size_w = roi.x2 * p.spatial_scale - offset - g.start_w, size_h = roi.y2 * p.spatial_scale - offset - g.start_h;
  if (!aligned) {
    size_w = std::max(size_w, 1.0);
    size_h = std::max(size_h, 1.0);
  }
  g.bin_w = size_w / static_cast<double>(p.pooled_width);
  g.bin_h = size_h / static_cast<double>(p.pooled_height);
  g.grid_w = p.sampling_ratio > 0 ? static_cast<double>(p.sampling_ratio) : std::ceil(g.bin_w);
  g.grid_h = p.sampling_ratio > 0 ? static_cast<double>(p.sampling_ratio) : std::ceil(g.bin_h);
  return g;
}

bool roi_align_internal::plain_corners(double y, double x, std::int64_t height, std::int64_t width,
                                       PlainCorners& corners) {
  if (y < -1.0 || y > static_cast<double>(height) || x < -1.0 || x > static_cast<double>(width)) return false;
  y = std::max(y, 0.0);
  x = std::max(x, 0.0);
  auto cell = [](double& position, std::int64_t size, std::int64_t& low, std::int64_t& high) {
    low = static_cast<std::int64_t>(position);
    if (low >= size - 1) {
      low = high = size - 1;
      position = static_cast<double>(low);
    } else {
      high = low + 1;
    }
  };
  std::int64_t y_low, y_high, x_low, x_high;
  cell(y, height, y_low, y_high);
  cell(x, width, x_low, x_high);
  const double ly = y - static_cast<double>(y_low), lx = x - static_cast<double>(x_low), hy = 1 - ly, hx = 1 - lx;
  corners = {{y_low, y_low, y_high, y_high}, {x_low, x_high, x_low, x_high}, {hy * hx, hy * lx, ly * hx, ly * lx}};
  return true;
}

std::vector<double> roi_align_bin_samples(const RoiAlignProblem& p, std::size_t element) {
  const FeatureMap& map = p.input;
  const std::size_t per_roi = static_cast<std::size_t>(map.channels * p.pooled_height * p.pooled_width);
  if (per_roi == 0 || element / per_roi >= p.rois.size()) return {};
  const Roi& roi = p.rois[element / per_roi];
  const auto within = static_cast<std::int64_t>(element % per_roi);
  const std::int64_t channel = within / (p.pooled_height * p.pooled_width);
  const std::int64_t ph = within / p.pooled_width % p.pooled_height, pw = within % p.pooled_width;
  const auto image = static_cast<std::int64_t>(roi.batch_index);
  if (image < 0 || image >= map.batch) return {};
  const PlainGeometry g = plain_geometry(p, roi, p.aligned);
  if (!(g.grid_w * g.grid_h <= kMaxRoiAlignSamples)) return {};
  // pre_calc_for_bilinear_interpolate, one position at a time.
  std::vector<double> samples;
  for (double iy = 0; iy < g.grid_h; ++iy) {
    const double y = PlainGeometry::position(g.start_h, ph, g.bin_h, iy, g.grid_h);
    for (double ix = 0; ix < g.grid_w; ++ix) {
      PlainCorners corners;
      double value = 0;
      if (plain_corners(y, PlainGeometry::position(g.start_w, pw, g.bin_w, ix, g.grid_w), map.height, map.width, corners))
        for (int k = 0; k < 4; ++k) value += corners.weight[k] * map.at(image, channel, corners.row[k], corners.column[k]);
      samples.push_back(value);
    }
  }
  return samples;
}

}  // namespace detfuzz::oracles
