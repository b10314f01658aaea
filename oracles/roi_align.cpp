#include "roi_align.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "running_error.h"

namespace detfuzz::oracles {
namespace {

// Second-order terms and reorderings, as for the IoU (box_iou.h).
constexpr double kSafety = 2.0;
constexpr int kTiers = 2;  // 0: accumulate type, 1: storage dtype

struct Tiers {
  std::size_t format[kTiers];
  std::size_t fp64;
};

// Error of a tracked quantity in one tier: widened, plus the oracle's own fp64 error.
double widened(const Tracked& t, const Tiers& tiers, int tier) {
  return kSafety * (t.error[tiers.format[tier]] + t.error[tiers.fp64]);
}

// The per-RoI quantities every grid shares, with their rounding errors.
struct RoiGeometry {
  ErrorTracker tracker;
  Tracked start_h, start_w, bin_h, bin_w;
  double height = 0, width = 0;  // roi size (after the >= 1 clamp when not aligned)
};

// One sampling point of a bin: its position as fp64 computes it, how far a kernel's
// position may be from it, and whether it counts.
struct Sample {
  double y = 0, x = 0;
  double error_y[kTiers]{}, error_x[kTiers]{};
  bool inside = false;               // fp64's decision
  bool ambiguous[kTiers]{};          // the tier's rounding may flip it
  int y_low = 0, y_high = 0, x_low = 0, x_high = 0;
  Tracked weight[4];
};

// What a bin's samples sum to, per channel and tier (before dividing by the count).
struct BinSum {
  Tracked sum;                                  // over the samples fp64 counts
  double flip_low[kTiers]{}, flip_high[kTiers]{};  // what ambiguous samples may add or remove
  double extra_error[kTiers]{};                 // position errors through the local slope
};

RoiGeometry geometry(const RoiAlignProblem& p, const Roi& roi) {
  RoiGeometry g;
  ErrorTracker& t = g.tracker;
  // torchvision passes spatial_scale as T: a kernel in fp16 rounds it.
  const Tracked scale = t.input(p.spatial_scale);
  const Tracked offset = t.input(p.aligned ? 0.5 : 0.0);
  g.start_w = t.sub(t.mul(t.input(roi.x1), scale), offset);
  g.start_h = t.sub(t.mul(t.input(roi.y1), scale), offset);
  const Tracked end_w = t.sub(t.mul(t.input(roi.x2), scale), offset);
  const Tracked end_h = t.sub(t.mul(t.input(roi.y2), scale), offset);
  Tracked size_w = t.sub(end_w, g.start_w), size_h = t.sub(end_h, g.start_h);
  if (!p.aligned) {
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
std::set<int> grid_counts(const RoiAlignProblem& p, const Tracked& bin, const Tiers& tiers, int tier) {
  if (p.sampling_ratio > 0) return {static_cast<int>(p.sampling_ratio)};
  const double error = widened(bin, tiers, tier);
  if (!(bin.value + error < kMaxRoiAlignSamples) || error > 4) return {};  // the caller gives up on the RoI
  std::set<int> counts;
  for (double c = std::ceil(bin.value - error); c <= std::ceil(bin.value + error); ++c) counts.insert(static_cast<int>(c));
  return counts;
}

// Sample positions along one axis for one bin: start + index * bin + (i + .5) * bin / grid,
// in torchvision's evaluation order.
std::vector<Tracked> positions(ErrorTracker& t, const Tracked& start, const Tracked& bin, int index, int grid) {
  std::vector<Tracked> out;
  const Tracked base = t.add(start, t.mul(t.input(index), bin));
  for (int i = 0; i < grid; ++i)
    out.push_back(t.add(base, t.div(t.mul(t.input(i + 0.5), bin), t.input(grid))));
  return out;
}

Sample make_sample(const Tracked& y, const Tracked& x, std::int64_t height, std::int64_t width,
                   const Tiers& tiers, ErrorTracker& t) {
  Sample s;
  s.y = y.value;
  s.x = x.value;
  const double h = static_cast<double>(height), w = static_cast<double>(width);
  s.inside = s.y >= -1.0 && s.y <= h && s.x >= -1.0 && s.x <= w;
  std::array<bool, kFloatDTypes.size()> exact_position{};
  for (std::size_t f = 0; f < exact_position.size(); ++f)
    exact_position[f] = y.error[f] == 0 && x.error[f] == 0;
  for (int tier = 0; tier < kTiers; ++tier) {
    s.error_y[tier] = widened(y, tiers, tier);
    s.error_x[tier] = widened(x, tiers, tier);
    auto crosses = [](double v, double e, double edge) { return v - e <= edge && edge <= v + e; };
    s.ambiguous[tier] = crosses(s.y, s.error_y[tier], -1.0) || crosses(s.y, s.error_y[tier], h) ||
                        crosses(s.x, s.error_x[tier], -1.0) || crosses(s.x, s.error_x[tier], w);
  }
  double yy = s.y <= 0 ? 0 : s.y, xx = s.x <= 0 ? 0 : s.x;
  s.y_low = static_cast<int>(yy);
  s.x_low = static_cast<int>(xx);
  if (s.y_low >= height - 1) {
    s.y_high = s.y_low = static_cast<int>(height - 1);
    yy = s.y_low;
  } else {
    s.y_high = s.y_low + 1;
  }
  if (s.x_low >= width - 1) {
    s.x_high = s.x_low = static_cast<int>(width - 1);
    xx = s.x_low;
  } else {
    s.x_high = s.x_low + 1;
  }
  const Tracked ly = t.derived(yy - s.y_low, exact_position), lx = t.derived(xx - s.x_low, exact_position);
  const Tracked one = t.input(1.0);
  const Tracked hy = t.sub(one, ly), hx = t.sub(one, lx);
  s.weight[0] = t.mul(hy, hx);
  s.weight[1] = t.mul(hy, lx);
  s.weight[2] = t.mul(ly, hx);
  s.weight[3] = t.mul(ly, lx);
  return s;
}

// Largest change between neighbouring pixels within `radius` of the sample's cell: how far
// the bilinear surface can move when the sample's position is off by up to `radius` - 1.
void local_slopes(const FeatureMap& map, std::int64_t n, std::int64_t c, const Sample& s, int radius,
                  double& slope_x, double& slope_y) {
  const std::int64_t r0 = std::max<std::int64_t>(0, s.y_low - radius);
  const std::int64_t r1 = std::min<std::int64_t>(map.height - 1, s.y_high + radius);
  const std::int64_t c0 = std::max<std::int64_t>(0, s.x_low - radius);
  const std::int64_t c1 = std::min<std::int64_t>(map.width - 1, s.x_high + radius);
  const double* plane = &map.values[static_cast<std::size_t>((n * map.channels + c) * map.height * map.width)];
  double sx = 0, sy = 0;
  for (std::int64_t row = r0; row <= r1; ++row) {
    const double* here = plane + row * map.width;
    for (std::int64_t col = c0; col < c1; ++col) sx = std::max(sx, std::fabs(here[col + 1] - here[col]));
    if (row < r1)
      for (std::int64_t col = c0; col <= c1; ++col) sy = std::max(sy, std::fabs(here[col + map.width] - here[col]));
  }
  slope_x = sx;
  slope_y = sy;
}

struct ElementResult {
  double value;
  RoiAlignTier tier[kTiers];
  bool range_ok;
};

// The formats a tier reads (its own and fp64), each once: what the lean arithmetic tracks.
struct ActiveFormats {
  std::size_t index[3]{};  // into kFloatDTypes
  int count = 0;
  int slot_of_tier[kTiers]{};
  int fp64_slot = 0;
  const FloatFormat* format[3]{};
  double subnormal_half_spacing[3]{};
};

ActiveFormats active_formats(const Tiers& tiers) {
  ActiveFormats a;
  auto slot = [&](std::size_t index) {
    for (int i = 0; i < a.count; ++i)
      if (a.index[i] == index) return i;
    a.index[a.count] = index;
    a.format[a.count] = &float_format(kFloatDTypes[index]);
    a.subnormal_half_spacing[a.count] =
        std::ldexp(1.0, a.format[a.count]->min_normal_exponent - a.format[a.count]->precision_bits);
    return a.count++;
  };
  for (int tier = 0; tier < kTiers; ++tier) a.slot_of_tier[tier] = slot(tiers.format[tier]);
  a.fp64_slot = slot(tiers.fp64);
  return a;
}

// ErrorTracker's arithmetic (running_error.cpp) for the formats a tier reads only, inline,
// with the range noted for the strict format only: the per-channel loop runs it for every
// sample of every bin of every channel. Same formulas in the same order, so the results
// are bit for bit the tracker's (RoiAlignOracle.LeanArithmeticIsTheTrackers holds it to
// that).
struct Lean {
  double value = 0;
  double error[3]{};
};

class LeanTracker {
 public:
  LeanTracker(const ActiveFormats& active, const FloatFormat& strict) : a_(active), strict_(strict) {}

  Lean input(double value) {
    note_range(value);
    Lean result{value, {}};
    for (int i = 0; i < a_.count; ++i)
      result.error[i] = representable_in(i, value) ? 0.0 : half_ulp(kFloatDTypes[a_.index[i]], value);
    return result;
  }
  Lean from(const Tracked& t) const {
    Lean result{t.value, {}};
    for (int i = 0; i < a_.count; ++i) result.error[i] = t.error[a_.index[i]];
    return result;
  }
  Lean add(const Lean& x, const Lean& y) {
    const double s = x.value + y.value;
    double propagated[3];
    for (int i = 0; i < a_.count; ++i) propagated[i] = x.error[i] + y.error[i];
    return rounded(s, sum_rounding_error(x.value, y.value), propagated);
  }
  Lean mul(const Lean& x, const Lean& y) {
    const double p = x.value * y.value;
    double propagated[3];
    for (int i = 0; i < a_.count; ++i) propagated[i] = std::fabs(y.value) * x.error[i] + std::fabs(x.value) * y.error[i];
    return rounded(p, std::fma(x.value, y.value, -p), propagated);
  }
  Lean div(const Lean& x, const Lean& y) {
    const double q = x.value / y.value;
    double propagated[3];
    for (int i = 0; i < a_.count; ++i) propagated[i] = (x.error[i] + std::fabs(q) * y.error[i]) / std::fabs(y.value);
    return rounded(q, std::fma(q, y.value, -x.value), propagated);
  }
  bool in_range() const { return in_range_; }

 private:
  bool representable_in(int slot, double value) const {
    const std::size_t index = a_.index[slot];
    if (kFloatDTypes[index] == DType::fp64) return true;
    if (kFloatDTypes[index] == DType::fp32 && std::isfinite(value))
      return static_cast<double>(static_cast<float>(value)) == value;
    return representable(kFloatDTypes[index], value);
  }
  void note_range(double value) {
    const double magnitude = std::fabs(value);
    if (!std::isfinite(value) || magnitude > strict_.max_finite || (magnitude != 0 && magnitude < strict_.min_normal))
      in_range_ = false;
  }
  Lean rounded(double value, double residual, const double* propagated) {
    note_range(value);
    Lean result{value, {}};
    const bool exact_in_double = residual == 0 && propagated[a_.fp64_slot] == 0;
    for (int i = 0; i < a_.count; ++i) {
      const bool exact = exact_in_double && propagated[i] == 0 && representable_in(i, value);
      result.error[i] = exact ? 0.0 : propagated[i] + a_.format[i]->unit_roundoff * std::fabs(value);
      if (!exact && std::fabs(value) < a_.format[i]->min_normal) result.error[i] += a_.subnormal_half_spacing[i];
    }
    return result;
  }

  const ActiveFormats& a_;
  const FloatFormat& strict_;
  bool in_range_ = true;
};

// One element (channel c of a bin) in lean arithmetic: the tracker loop of evaluate_roi,
// statement for statement.
void lean_element(const RoiAlignProblem& p, std::int64_t n, std::int64_t c, const std::vector<Sample>& samples,
                  const ActiveFormats& active, const FloatFormat& strict, const Tracked& count_tracked,
                  ElementResult& r) {
  const FeatureMap& map = p.input;
  LeanTracker values(active, strict);
  auto widened_lean = [&](const Lean& x, int tier) {
    return kSafety * (x.error[active.slot_of_tier[tier]] + x.error[active.fp64_slot]);
  };
  Lean sum = values.input(0.0);
  double flip_low[kTiers]{}, flip_high[kTiers]{}, extra_error[kTiers]{};
  for (const Sample& s : samples) {
    if (!s.inside && !s.ambiguous[0] && !s.ambiguous[1]) continue;
    const double v[4] = {map.at(n, c, s.y_low, s.x_low), map.at(n, c, s.y_low, s.x_high),
                         map.at(n, c, s.y_high, s.x_low), map.at(n, c, s.y_high, s.x_high)};
    Lean term = values.mul(values.from(s.weight[0]), values.input(v[0]));
    for (int k = 1; k < 4; ++k) term = values.add(term, values.mul(values.from(s.weight[k]), values.input(v[k])));
    const int radius = 1 + static_cast<int>(std::ceil(std::max(s.error_y[1], s.error_x[1])));
    double slope_x, slope_y;
    local_slopes(map, n, c, s, radius, slope_x, slope_y);
    for (int tier = 0; tier < kTiers; ++tier) {
      extra_error[tier] += slope_x * s.error_x[tier] + slope_y * s.error_y[tier];
      if (s.ambiguous[tier]) {
        const double change = s.inside ? -term.value : term.value;
        flip_low[tier] += std::min(0.0, change);
        flip_high[tier] += std::max(0.0, change);
        extra_error[tier] += widened_lean(term, tier);
      }
    }
    if (s.inside) sum = values.add(sum, term);
  }
  const Lean count = values.from(count_tracked);
  const Lean average = values.div(sum, count);
  r.value = average.value;
  for (int tier = 0; tier < kTiers; ++tier) {
    r.tier[tier].low = (sum.value + flip_low[tier]) / count.value;
    r.tier[tier].high = (sum.value + flip_high[tier]) / count.value;
    r.tier[tier].bound = widened_lean(average, tier) + extra_error[tier] / count.value;
  }
  r.range_ok = values.in_range();
}

// How the per-channel arithmetic is tracked: the general ErrorTracker (the reference) or
// its lean specialization (the oracle).
enum class Arithmetic { tracker, lean };

// The elements of one RoI (channels x bins) for one grid count.
// Into `results` (resized; reused across RoIs, since a RoI's elements run to megabytes).
void evaluate_roi(const RoiAlignProblem& p, const Roi& roi, RoiGeometry& g, int grid_h, int grid_w,
                  const Tiers& tiers, std::size_t strict_format, Arithmetic arithmetic,
                  std::vector<ElementResult>& results) {
  const ActiveFormats active = active_formats(tiers);
  const FloatFormat& strict = float_format(kFloatDTypes[strict_format]);
  const FeatureMap& map = p.input;
  const auto n = static_cast<std::int64_t>(roi.batch_index);
  ErrorTracker& t = g.tracker;
  const Tracked count = t.input(std::max(grid_h * grid_w, 1));
  results.resize(static_cast<std::size_t>(map.channels * p.pooled_height * p.pooled_width));
  for (std::int64_t ph = 0; ph < p.pooled_height; ++ph) {
    const auto ys = positions(t, g.start_h, g.bin_h, static_cast<int>(ph), grid_h);
    for (std::int64_t pw = 0; pw < p.pooled_width; ++pw) {
      const auto xs = positions(t, g.start_w, g.bin_w, static_cast<int>(pw), grid_w);
      std::vector<Sample> samples;
      for (const Tracked& y : ys)
        for (const Tracked& x : xs) samples.push_back(make_sample(y, x, map.height, map.width, tiers, t));
      for (std::int64_t c = 0; c < map.channels; ++c) {
        ElementResult& r = results[static_cast<std::size_t>((c * p.pooled_height + ph) * p.pooled_width + pw)];
        if (arithmetic == Arithmetic::lean) {
          lean_element(p, n, c, samples, active, strict, count, r);
          r.range_ok = r.range_ok && t.in_range()[strict_format];
          continue;
        }
        ErrorTracker values;
        BinSum bin{values.input(0.0)};
        for (const Sample& s : samples) {
          if (!s.inside && !s.ambiguous[0] && !s.ambiguous[1]) continue;
          const double v[4] = {map.at(n, c, s.y_low, s.x_low), map.at(n, c, s.y_low, s.x_high),
                               map.at(n, c, s.y_high, s.x_low), map.at(n, c, s.y_high, s.x_high)};
          Tracked term = values.mul(s.weight[0], values.input(v[0]));
          for (int k = 1; k < 4; ++k) term = values.add(term, values.mul(s.weight[k], values.input(v[k])));
          const int radius = 1 + static_cast<int>(std::ceil(std::max(s.error_y[1], s.error_x[1])));
          double slope_x, slope_y;
          local_slopes(map, n, c, s, radius, slope_x, slope_y);
          for (int tier = 0; tier < kTiers; ++tier) {
            bin.extra_error[tier] += slope_x * s.error_x[tier] + slope_y * s.error_y[tier];
            if (s.ambiguous[tier]) {
              const double change = s.inside ? -term.value : term.value;
              bin.flip_low[tier] += std::min(0.0, change);
              bin.flip_high[tier] += std::max(0.0, change);
              bin.extra_error[tier] += widened(term, tiers, tier);
            }
          }
          if (s.inside) bin.sum = values.add(bin.sum, term);
        }
        const Tracked average = values.div(bin.sum, count);
        r.value = average.value;
        for (int tier = 0; tier < kTiers; ++tier) {
          r.tier[tier].low = (bin.sum.value + bin.flip_low[tier]) / count.value;
          r.tier[tier].high = (bin.sum.value + bin.flip_high[tier]) / count.value;
          r.tier[tier].bound = widened(average, tiers, tier) + bin.extra_error[tier] / count.value;
        }
        r.range_ok = values.in_range()[strict_format] && t.in_range()[strict_format];
      }
    }
  }
}

std::vector<RoiAlignElement> evaluate(const RoiAlignProblem& p, DType storage, Arithmetic arithmetic) {
  const Tiers tiers{{format_index(accumulate_type(storage)), format_index(storage)}, format_index(DType::fp64)};
  const std::size_t per_roi = static_cast<std::size_t>(p.input.channels * p.pooled_height * p.pooled_width);
  std::vector<RoiAlignElement> out;
  out.reserve(p.rois.size() * per_roi);
  std::vector<ElementResult> nominal, other;
  for (const Roi& roi : p.rois) {
    RoiGeometry g = geometry(p, roi);
    auto grid = [&](const Tracked& bin) {
      return p.sampling_ratio > 0 ? static_cast<double>(p.sampling_ratio) : std::max(1.0, std::ceil(std::fabs(bin.value)));
    };
    const double work = grid(g.bin_h) * grid(g.bin_w) * static_cast<double>(per_roi);
    bool sane = std::isfinite(work) && work <= kMaxRoiAlignSamples;
    for (const Tracked* t : {&g.start_h, &g.start_w, &g.bin_h, &g.bin_w}) sane = sane && std::fabs(t->value) < (1 << 30);
    if (!sane) {
      RoiAlignElement anything;
      anything.unconstrained = true;
      out.insert(out.end(), per_roi, anything);
      continue;
    }
    const int nominal_h = p.sampling_ratio > 0 ? static_cast<int>(p.sampling_ratio)
                                               : static_cast<int>(std::ceil(g.bin_h.value));
    const int nominal_w = p.sampling_ratio > 0 ? static_cast<int>(p.sampling_ratio)
                                               : static_cast<int>(std::ceil(g.bin_w.value));
    evaluate_roi(p, roi, g, nominal_h, nominal_w, tiers, tiers.format[0], arithmetic, nominal);
    out.resize(out.size() + per_roi);
    RoiAlignElement* elements = &out[out.size() - per_roi];
    for (std::size_t i = 0; i < per_roi; ++i) {
      elements[i].value = nominal[i].value;
      elements[i].strict = nominal[i].tier[0];
      elements[i].storage = nominal[i].tier[1];
      elements[i].range_ok = nominal[i].range_ok;
    }
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
        evaluate_roi(p, roi, g, gh, gw, tiers, tiers.format[0], arithmetic, other);
        for (int tier = 0; tier < kTiers; ++tier) {
          if (!heights[tier].count(gh) || !widths[tier].count(gw)) continue;
          for (std::size_t i = 0; i < per_roi; ++i) {
            RoiAlignTier& into = tier == 0 ? elements[i].strict : elements[i].storage;
            into.low = std::min(into.low, other[i].tier[tier].low);
            into.high = std::max(into.high, other[i].tier[tier].high);
            into.bound = std::max(into.bound, other[i].tier[tier].bound);
          }
        }
      }
  }
  return out;
}

}  // namespace

std::vector<RoiAlignElement> roi_align(const RoiAlignProblem& problem, DType storage) {
  return evaluate(problem, storage, Arithmetic::lean);
}

std::vector<RoiAlignElement> roi_align_reference(const RoiAlignProblem& problem, DType storage) {
  return evaluate(problem, storage, Arithmetic::tracker);
}

}  // namespace detfuzz::oracles
