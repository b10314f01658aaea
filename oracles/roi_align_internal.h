// What the reference and the closed form of the RoIAlign oracle share (oracles/roi_align.cpp
// builds the samples and keeps the reference; oracles/roi_align_closed_form.cpp is the
// vectorized engine; oracles/roi_align_backward.cpp scatters gradients through the same
// geometry and samples). Internal to the oracles: nothing outside oracles/ includes it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <set>
#include <vector>

#include "roi_align.h"
#include "running_error.h"

namespace detfuzz::oracles::roi_align_internal {

// Second-order terms and reorderings, as for the IoU (box_iou.h).
constexpr double kSafety = 2.0;
constexpr int kTiers = 2;  // 0: accumulate type, 1: storage dtype

struct Tiers {
  std::size_t format[kTiers];
  std::size_t fp64;
};

// One sampling point of a bin: its position as fp64 computes it, how far a kernel's
// position may be from it, and whether it counts.
struct Sample {
  double y = 0, x = 0;
  double error_y[kTiers]{}, error_x[kTiers]{};
  bool inside = false;               // fp64's decision
  bool ambiguous[kTiers]{};          // the tier's rounding may flip it
  bool counted = false;              // inside or ambiguous in some tier: its term is read
  int y_low = 0, y_high = 0, x_low = 0, x_high = 0;
  std::int64_t offset[4]{};          // of the four pixels in a channel's plane
  Tracked weight[4];
  float weight_fp32[4]{};
};

// The per-RoI quantities every grid shares, with their rounding errors.
struct RoiGeometry {
  ErrorTracker tracker;
  Tracked start_h, start_w, bin_h, bin_w;
  double height = 0, width = 0;  // roi size (after the >= 1 clamp when not aligned)
};

// What a sample takes from one of its coordinates alone. make_sample combines a row's and
// a column's: a bin's samples are a grid and a row of bins shares its rows, so each
// coordinate's tracker steps run once, not once per sample (they were most of a small
// case's oracle time).
struct AxisSample {
  Tracked position;
  double error[kTiers]{};   // widened, per tier
  bool crosses[kTiers]{};   // the tier's error may take it across an edge (-1 or the size)
  bool inside = false;      // fp64's decision
  int low = 0, high = 0;    // the pixels it interpolates between
  double clamped = 0;       // where it interpolates: clamped to the map as the kernel clamps
  // The fraction past `low` and one minus it, per pattern of formats in which both of the
  // sample's coordinates are exact (the fraction is exact there): usually one or two, so a
  // few are kept in place (no allocation per coordinate) and any further one is recomputed.
  struct Fractions {
    unsigned pattern;
    Tracked fraction, rest;
  };
  static constexpr int kKeptFractions = 4;
  Fractions fractions[kKeptFractions];
  int kept = 0;
};


// Error of a tracked quantity in one tier: widened, plus the oracle's own fp64 error.
double widened(const Tracked& t, const Tiers& tiers, int tier);

// The RoI's start, size and bin size as the kernel computes them. `aligned`: the problem's
// flag, or true for PSRoIAlign (whose geometry it is).
RoiGeometry geometry(const RoiAlignProblem& p, const Roi& roi, bool aligned);

// Grid counts a kernel may use along one axis: ceil(size / pooled) of its own (rounded)
// quotient, which is the bin size; empty when too many to say (the caller gives up).
std::set<int> grid_counts(const RoiAlignProblem& p, const Tracked& bin, const Tiers& tiers, int tier);

// Sample positions along one axis for bin `index`: start + index * bin + (i + .5) * bin / grid,
// in torchvision's evaluation order.
std::vector<Tracked> positions(ErrorTracker& t, const Tracked& start, const Tracked& bin, int index, int grid);

AxisSample axis_sample(const Tracked& position, std::int64_t size, const Tiers& tiers);

// The sample at row coordinate `y` and column coordinate `x`, into a fresh `s` in place (a
// Sample is 440 bytes). `one`: t.input(1.0).
void make_sample(AxisSample& y, AxisSample& x, std::int64_t width, const Tracked& one, ErrorTracker& t, Sample& s);

// The fp64 geometry of one RoI, naive: what the explanations (the samples or terms an
// element sums, in the kernel's order) walk; the bounds use the tracked one above.
struct PlainGeometry {
  double start_h, start_w, bin_h, bin_w, grid_h, grid_w;
  // Sample i of bin `index` along an axis: start + index * bin + (i + .5) * bin / grid.
  static double position(double start, std::int64_t index, double bin, double i, double grid) {
    return start + static_cast<double>(index) * bin + (i + 0.5) * bin / grid;
  }
};
PlainGeometry plain_geometry(const RoiAlignProblem& p, const Roi& roi, bool aligned);

// bilinear_interpolate(_gradient) at (y, x) in fp64: false outside [-1, size]; else the four
// corners (y_low, x_low), (y_low, x_high), (y_high, x_low), (y_high, x_high), clamped as the
// kernel clamps, and their weights.
struct PlainCorners {
  std::int64_t row[4], column[4];
  double weight[4];
};
bool plain_corners(double y, double x, std::int64_t height, std::int64_t width, PlainCorners& corners);

// How far the bilinear surface can move, per unit of position error along each axis, when
// a kernel's sample position is off by up to the tier's error: the largest difference
// between neighbouring pixels over every cell the position may reach (the surface is
// continuous and bilinear in each cell, whose slopes its own differences bound). Positions
// clamp as the kernel clamps them (below 0 to row 0, past the last row to it: flat there),
// so the reachable pixels run from floor(max(0, p - e)) to floor(max(0, p + e)) + 1, capped
// at the edge. A position that stays in its cell needs only the four values at hand.
inline bool within_cell(const Sample& s, int tier) {
  auto inside = [](double position, double error, int low) { return low <= position - error && position + error <= low + 1; };
  return inside(s.y, s.error_y[tier], s.y_low) && inside(s.x, s.error_x[tier], s.x_low);
}

// The slopes of the cell whose corners are v00, v01 (same row) and v10, v11.
inline void cell_slopes(double v00, double v01, double v10, double v11, double& slope_x, double& slope_y) {
  slope_x = std::max(std::fabs(v01 - v00), std::fabs(v11 - v10));
  slope_y = std::max(std::fabs(v10 - v00), std::fabs(v11 - v01));
}

// The pixels [first, last] along one axis that positions within `error` of `position` read.
inline void reachable(double position, double error, std::int64_t size, std::int64_t& first, std::int64_t& last) {
  first = std::min(size - 1, static_cast<std::int64_t>(std::floor(std::max(0.0, position - error))));
  last = std::min(size - 1, static_cast<std::int64_t>(std::floor(std::max(0.0, position + error))) + 1);
}

// The pixels a position error that leaves its cell may read: rows first_row..last_row,
// columns first_column..last_column. The same for every channel.
struct SlopeWindow {
  std::int64_t first_row, last_row, first_column, last_column;
};

inline SlopeWindow slope_window(const Sample& s, int tier, std::int64_t height, std::int64_t width) {
  SlopeWindow w{};
  reachable(s.y, s.error_y[tier], height, w.first_row, w.last_row);
  reachable(s.x, s.error_x[tier], width, w.first_column, w.last_column);
  return w;
}

inline void window_slopes(const double* plane, std::int64_t width, const SlopeWindow& w, double& slope_x, double& slope_y) {
  double sx = 0, sy = 0;
  for (std::int64_t row = w.first_row; row <= w.last_row; ++row) {
    const double* here = plane + row * width;
    for (std::int64_t col = w.first_column; col < w.last_column; ++col)
      sx = std::max(sx, std::fabs(here[col + 1] - here[col]));
    if (row < w.last_row)
      for (std::int64_t col = w.first_column; col <= w.last_column; ++col)
        sy = std::max(sy, std::fabs(here[col + width] - here[col]));
  }
  slope_x = sx;
  slope_y = sy;
}

inline void position_slopes(const double* plane, std::int64_t height, std::int64_t width, const Sample& s, int tier,
                     const double (&v)[4], double& slope_x, double& slope_y) {
  if (within_cell(s, tier))
    cell_slopes(v[0], v[1], v[2], v[3], slope_x, slope_y);
  else
    window_slopes(plane, width, slope_window(s, tier, height, width), slope_x, slope_y);
}

// What one RoI's elements share: the map, the tiers and the formats their bounds read.
struct ElementContext {
  const FeatureMap& map;
  const Tiers& tiers;
  const FloatFormat& strict;  // the format whose range range_ok reports
  Tracked count;              // samples per bin, as the kernel divides by it
  // The formats the tiers read (their own and fp64), each once.
  int formats = 0;
  std::size_t format_index[3]{};
  int slot_of_tier[kTiers]{};
  int fp64_slot = 0;
  double unit_roundoff[3]{};
  double smallest_normal = 0;  // the largest min_normal among those formats
  // 1 when both tiers are one format (fp32 and fp64 storage): the second is then the first,
  // and the closed form computes it once.
  int distinct_tiers = kTiers;
  bool geometry_in_range = true;  // the RoI's shared steps stay in the strict format's range
};

// The reference arithmetic: every step of the element through the general ErrorTracker,
// which knows which steps are exact in which format.
void tracked_element(const ElementContext& ctx, const double* plane, const Sample* begin, const Sample* end,
                     RoiAlignElement& r);

// The closed form: one RoI's elements (channels x bins) bin by bin, the channels as the
// lanes of every loop; `samples` holds each bin's per_bin samples, the bins row by row
// (pooled_width to a row). Into results[0, channels x bins), every field written.
void closed_form_elements(const ElementContext& ctx, const double* base, const Sample* samples, std::size_t bins,
                          std::size_t per_bin, std::size_t pooled_width, std::int64_t channels, DType storage,
                          RoiAlignElement* results);

}  // namespace detfuzz::oracles::roi_align_internal
