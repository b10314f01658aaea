#include "roi_align_backward.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <stdexcept>
#include <string>

#include "roi_align_internal.h"

namespace detfuzz::oracles {
namespace {
using namespace roi_align_internal;

// What reaches one input element, over every term a kernel adds into it. Trivial, so that a
// vector of them starts zeroed.
// 40 bytes: the channel loop writes one per pixel a bin touches, over an answer-sized array,
// so its size is the oracle's memory traffic.
struct GradientSum {
  double value;          // the terms of the samples fp64 counts
  double magnitude;      // sum of |term| over every sample that may count
  double terms;          // additions into the element
  double error[kTiers];  // weight rounding and position errors, first order
};

// What ambiguous samples may remove (<= 0) or add, per tier: kept apart and only where some
// sample is ambiguous (a few cases in a hundred), as the rest of a case has none.
struct GradientFlips {
  double low[kTiers], high[kTiers];
};

// An image's sums and, once some sample needs them, its flips.
struct ImageSums {
  GradientSum* sums;
  std::vector<GradientFlips>* flips;  // empty until needed, then one per element of the image
  std::size_t size;
};

// What one bin's samples put on one pixel of a plane, per unit of grad / count (the same for
// every channel, so that the channel loop is a few multiply-adds per pixel).
struct PixelWeight {
  std::int64_t pixel;
  double weight;               // the samples fp64 counts
  double magnitude;            // every sample that may count
  double terms;
  double rise[kTiers];         // ambiguous samples fp64 leaves out: what a kernel may add
  double fall[kTiers];         // ambiguous samples fp64 counts: what a kernel may drop (<= 0)
  double error[kTiers];
  bool flips;                  // some rise or fall is nonzero
};

// A bin's pixel weights, gathered through a plane-sized index (kept per thread, reset by the
// pixels the bin touched).
class BinWeights {
 public:
  void start(std::size_t plane) {
    if (slot_.size() != plane) slot_.assign(plane, -1);
    for (const PixelWeight& w : pixels_) slot_[static_cast<std::size_t>(w.pixel)] = -1;
    pixels_.clear();
  }
  PixelWeight& at(std::int64_t pixel) {
    std::int64_t& slot = slot_[static_cast<std::size_t>(pixel)];
    if (slot < 0) {
      slot = static_cast<std::int64_t>(pixels_.size());
      pixels_.push_back(PixelWeight{pixel, 0, 0, 0, {}, {}, {}, false});
    }
    return pixels_[static_cast<std::size_t>(slot)];
  }
  const std::vector<PixelWeight>& pixels() const { return pixels_; }

 private:
  std::vector<std::int64_t> slot_;
  std::vector<PixelWeight> pixels_;
};

// One sample's four terms and the reach of its position error, into the bin's weights.
void add_sample(const Sample& s, const Tiers& tiers, const double (&count_error)[kTiers], std::int64_t height,
                std::int64_t width, BinWeights& weights) {
  if (!s.counted) return;
  for (int corner = 0; corner < 4; ++corner) {
    PixelWeight& w = weights.at(s.offset[corner]);
    const double weight = s.weight[corner].value;
    if (s.inside) w.weight += weight;
    w.magnitude += weight;
    w.terms += 1;
    for (int tier = 0; tier < kTiers; ++tier) {
      w.error[tier] += widened(s.weight[corner], tiers, tier) + weight * count_error[tier];
      if (s.ambiguous[tier]) {
        (s.inside ? w.fall[tier] : w.rise[tier]) += s.inside ? -weight : weight;
        w.flips = true;
      }
    }
  }
  for (int tier = 0; tier < kTiers; ++tier) {
    const double shift = s.error_y[tier] + s.error_x[tier];
    if (shift == 0) continue;
    if (within_cell(s, tier)) {
      for (int corner = 0; corner < 4; ++corner) weights.at(s.offset[corner]).error[tier] += shift;
      continue;
    }
    // A shift across a cell's edge hands weight (at most the shift) to pixels the fp64
    // sample does not touch: each gets the error and one more possible addition.
    const SlopeWindow reach = slope_window(s, tier, height, width);
    for (std::int64_t row = reach.first_row; row <= reach.last_row; ++row)
      for (std::int64_t column = reach.first_column; column <= reach.last_column; ++column) {
        PixelWeight& w = weights.at(row * width + column);
        w.error[tier] += shift;
        w.terms += 1;
      }
  }
}

// RoI k's terms for one grid count, added into `image` (its image's [C][H * W] sums).
void scatter_roi(const RoiAlignBackwardProblem& problem, std::size_t k, RoiGeometry& g, int grid_h, int grid_w,
                 const Tiers& tiers, bool position_sensitive, const ImageSums& image) {
  if (grid_h <= 0 || grid_w <= 0) return;  // an aligned RoI with x2 < x1: no samples, as the kernel's loops
  const RoiAlignProblem& p = problem.forward;
  const FeatureMap& map = p.input;
  ErrorTracker& t = g.tracker;
  const std::int64_t bins = p.pooled_height * p.pooled_width;
  const std::int64_t channels_out = position_sensitive ? map.channels / bins : map.channels;
  const auto plane = static_cast<std::size_t>(map.height * map.width);
  // `const T count = roi_bin_grid_h * roi_bin_grid_w`: an integer, rounded where T cannot
  // hold it (fp16 above 2048; past 65504 it is infinite and every term 0).
  const double count = static_cast<double>(grid_h) * static_cast<double>(grid_w);
  double count_error[kTiers];
  for (int tier = 0; tier < kTiers; ++tier) {
    const double held = round_to(kFloatDTypes[tiers.format[tier]], count);
    count_error[tier] = std::isfinite(held) ? std::fabs(held - count) / count : 1.0;
  }
  const Tracked one = t.input(1.0);
  thread_local BinWeights weights;
  Sample sample;
  for (std::int64_t ph = 0; ph < p.pooled_height; ++ph) {
    std::vector<AxisSample> rows;
    for (const Tracked& position : positions(t, g.start_h, g.bin_h, static_cast<int>(ph), grid_h))
      rows.push_back(axis_sample(position, map.height, tiers));
    for (std::int64_t pw = 0; pw < p.pooled_width; ++pw) {
      std::vector<AxisSample> columns;
      for (const Tracked& position : positions(t, g.start_w, g.bin_w, static_cast<int>(pw), grid_w))
        columns.push_back(axis_sample(position, map.width, tiers));
      weights.start(plane);
      for (AxisSample& y : rows)
        for (AxisSample& x : columns) {
          sample = Sample{};
          make_sample(y, x, map.width, one, t, sample);
          add_sample(sample, tiers, count_error, map.height, map.width, weights);
        }
      const std::int64_t bin = ph * p.pooled_width + pw;
      const bool flips = std::any_of(weights.pixels().begin(), weights.pixels().end(),
                                     [](const PixelWeight& w) { return w.flips; });
      if (flips && image.flips->empty()) image.flips->assign(image.size, GradientFlips{});
      for (std::int64_t c = 0; c < channels_out; ++c) {
        const double grad = problem.grad[static_cast<std::size_t>((static_cast<std::int64_t>(k) * channels_out + c) * bins + bin)];
        if (grad == 0) continue;  // its terms are zeros: exact, whatever the order
        const std::int64_t channel = position_sensitive ? c * bins + bin : c;
        const std::size_t offset = static_cast<std::size_t>(channel) * plane;
        GradientSum* sums = image.sums + offset;
        const double scale = grad / count, size = std::fabs(scale);
        for (const PixelWeight& w : weights.pixels()) {
          GradientSum& s = sums[w.pixel];
          s.value += scale * w.weight;
          s.magnitude += size * w.magnitude;
          s.terms += w.terms;
          for (int tier = 0; tier < kTiers; ++tier) s.error[tier] += size * w.error[tier];
        }
        if (!flips) continue;
        GradientFlips* flip_sums = image.flips->data() + offset;
        for (const PixelWeight& w : weights.pixels()) {
          if (!w.flips) continue;
          GradientFlips& f = flip_sums[w.pixel];
          for (int tier = 0; tier < kTiers; ++tier) {
            f.low[tier] += scale * (scale >= 0 ? w.fall[tier] : w.rise[tier]);
            f.high[tier] += scale * (scale >= 0 ? w.rise[tier] : w.fall[tier]);
          }
        }
      }
    }
  }
}

// The sums of an image under every grid count the tiers leave open: per tier the interval
// spanning all of them, the largest error, magnitude and length.
void merge_alternative(const GradientSum& alternative, const GradientFlips& alternative_flips,
                       const bool (&in_tier)[kTiers], GradientSum& merged, GradientFlips& merged_flips) {
  for (int tier = 0; tier < kTiers; ++tier) {
    if (!in_tier[tier]) continue;
    const double low = std::min(merged.value + merged_flips.low[tier], alternative.value + alternative_flips.low[tier]);
    const double high = std::max(merged.value + merged_flips.high[tier], alternative.value + alternative_flips.high[tier]);
    merged_flips.low[tier] = low - merged.value;
    merged_flips.high[tier] = high - merged.value;
    merged.error[tier] = std::max(merged.error[tier], alternative.error[tier]);
  }
  merged.magnitude = std::max(merged.magnitude, alternative.magnitude);
  merged.terms = std::max(merged.terms, alternative.terms);
}

void add_into(const GradientSum& from, GradientSum& into) {
  into.value += from.value;
  into.magnitude += from.magnitude;
  into.terms += from.terms;
  for (int tier = 0; tier < kTiers; ++tier) into.error[tier] += from.error[tier];
}

// A scratch image (sums and flips, both zeroed) for one grid count's scatter.
struct ScratchImage {
  std::vector<GradientSum> sums;
  std::vector<GradientFlips> flips;
  ImageSums view(std::size_t size) {
    sums.assign(size, GradientSum{});
    flips.assign(size, GradientFlips{});
    return {sums.data(), &flips, size};
  }
};

RoiAlignAnswer evaluate(const RoiAlignBackwardProblem& problem, DType storage, bool position_sensitive) {
  const RoiAlignProblem& p = problem.forward;
  const FeatureMap& map = p.input;
  const std::int64_t bins = p.pooled_height * p.pooled_width;
  if (bins <= 0 || (position_sensitive && map.channels % bins != 0)) return {};
  const std::int64_t channels_out = position_sensitive ? map.channels / bins : map.channels;
  const auto expected_grad = p.rois.size() * static_cast<std::size_t>(channels_out * bins);
  if (problem.grad.size() != expected_grad)
    throw std::invalid_argument("roi_align_backward: grad holds " + std::to_string(problem.grad.size()) +
                                " values, " + std::to_string(p.rois.size()) + " RoIs of [" +
                                std::to_string(channels_out) + ", " + std::to_string(p.pooled_height) + ", " +
                                std::to_string(p.pooled_width) + "] need " + std::to_string(expected_grad));
  const Tiers tiers{{format_index(accumulate_type(storage)), format_index(storage)}, format_index(DType::fp64)};
  const auto image_size = static_cast<std::size_t>(map.channels * map.height * map.width);
  const auto batch = static_cast<std::size_t>(std::max<std::int64_t>(map.batch, 0));
  std::vector<GradientSum> sums(batch * image_size);
  std::vector<std::vector<GradientFlips>> flips(batch);  // per image, empty until needed
  std::vector<char> image_unconstrained(batch, 0), image_out_of_range(batch, 0);
  bool all_unconstrained = false;
  thread_local ScratchImage merged, alternative;
  for (std::size_t k = 0; k < p.rois.size(); ++k) {
    const Roi& roi = p.rois[k];
    if (!(roi.batch_index >= 0 && roi.batch_index < static_cast<double>(map.batch) &&
          roi.batch_index == std::floor(roi.batch_index))) {
      all_unconstrained = true;
      continue;
    }
    const auto n = static_cast<std::size_t>(roi.batch_index);
    RoiGeometry g = geometry(p, roi, p.aligned || position_sensitive);
    auto grid = [&](const Tracked& bin) {
      return p.sampling_ratio > 0 ? static_cast<double>(p.sampling_ratio) : std::max(1.0, std::ceil(std::fabs(bin.value)));
    };
    const double work = grid(g.bin_h) * grid(g.bin_w) * static_cast<double>(channels_out * bins);
    bool sane = std::isfinite(work) && work <= kMaxRoiAlignSamples;
    for (const Tracked* t : {&g.start_h, &g.start_w, &g.bin_h, &g.bin_w}) sane = sane && std::fabs(t->value) < (1 << 30);
    std::set<int> heights[kTiers], widths[kTiers];
    for (int tier = 0; sane && tier < kTiers; ++tier) {
      heights[tier] = grid_counts(p, g.bin_h, tiers, tier);
      widths[tier] = grid_counts(p, g.bin_w, tiers, tier);
      sane = !heights[tier].empty() && !widths[tier].empty();
    }
    if (!sane) {
      image_unconstrained[n] = 1;
      continue;
    }
    const int nominal_h = p.sampling_ratio > 0 ? static_cast<int>(p.sampling_ratio) : static_cast<int>(std::ceil(g.bin_h.value));
    const int nominal_w = p.sampling_ratio > 0 ? static_cast<int>(p.sampling_ratio) : static_cast<int>(std::ceil(g.bin_w.value));
    std::set<int> all_heights = heights[0], all_widths = widths[0];
    all_heights.insert(heights[1].begin(), heights[1].end());
    all_widths.insert(widths[1].begin(), widths[1].end());
    const ImageSums image{sums.data() + n * image_size, &flips[n], image_size};
    if (all_heights.size() == 1 && all_widths.size() == 1) {
      scatter_roi(problem, k, g, nominal_h, nominal_w, tiers, position_sensitive, image);
    } else {
      scatter_roi(problem, k, g, nominal_h, nominal_w, tiers, position_sensitive, merged.view(image_size));
      for (int gh : all_heights)
        for (int gw : all_widths) {
          if (gh == nominal_h && gw == nominal_w) continue;
          scatter_roi(problem, k, g, gh, gw, tiers, position_sensitive, alternative.view(image_size));
          const bool in_tier[kTiers] = {heights[0].count(gh) && widths[0].count(gw) > 0,
                                        heights[1].count(gh) && widths[1].count(gw) > 0};
          for (std::size_t i = 0; i < image_size; ++i)
            merge_alternative(alternative.sums[i], alternative.flips[i], in_tier, merged.sums[i], merged.flips[i]);
        }
      if (image.flips->empty()) image.flips->assign(image_size, GradientFlips{});
      for (std::size_t i = 0; i < image_size; ++i) {
        add_into(merged.sums[i], image.sums[i]);
        for (int tier = 0; tier < kTiers; ++tier) {
          (*image.flips)[i].low[tier] += merged.flips[i].low[tier];
          (*image.flips)[i].high[tier] += merged.flips[i].high[tier];
        }
      }
    }
    if (!g.tracker.in_range()[tiers.format[0]]) image_out_of_range[n] = 1;
  }

  const FloatFormat& strict = kFloatFormats[tiers.format[0]];
  const double fp64_roundoff = kFloatFormats[tiers.fp64].unit_roundoff;
  RoiAlignAnswer out(sums.size());
  for (std::size_t i = 0; i < sums.size(); ++i) {
    const GradientSum& s = sums[i];
    const std::size_t n = i / std::max<std::size_t>(image_size, 1);
    const GradientFlips flip = flips[n].empty() ? GradientFlips{} : flips[n][i - n * image_size];
    RoiAlignElement& r = out[i];
    r.value = s.value;
    for (int tier = 0; tier < kTiers; ++tier) {
      const FloatFormat& f = kFloatFormats[tiers.format[tier]];
      RoiAlignTier& into = tier == 0 ? r.strict : r.storage;
      into.low = s.value + flip.low[tier];
      into.high = s.value + flip.high[tier];
      // Two roundings per term (grad * w, / count) and one per addition, in any order; an
      // underflowing operation errs by at most half the smallest subnormal.
      into.bound = kSafety * (s.error[tier] + (s.terms + 1) * (f.unit_roundoff + fp64_roundoff) * s.magnitude +
                              3 * s.terms * f.min_normal * f.unit_roundoff);
    }
    // Whatever the order, a partial sum is at most the sum of the positive terms or of the
    // negative ones: (magnitude + |value|) / 2 is the larger.
    r.range_ok = (s.magnitude + std::fabs(s.value)) / 2 <= strict.max_finite && !image_out_of_range[n];
    r.unconstrained = all_unconstrained || image_unconstrained[n];
  }
  return out;
}

}  // namespace

RoiAlignAnswer roi_align_backward(const RoiAlignBackwardProblem& problem, DType storage) {
  return evaluate(problem, storage, false);
}

RoiAlignAnswer ps_roi_align_backward(const RoiAlignBackwardProblem& problem, DType storage) {
  return evaluate(problem, storage, true);
}

}  // namespace detfuzz::oracles

namespace detfuzz::oracles {
using namespace roi_align_internal;

std::vector<double> roi_align_backward_terms(const RoiAlignBackwardProblem& problem, bool position_sensitive,
                                             std::size_t element) {
  const RoiAlignProblem& p = problem.forward;
  const FeatureMap& map = p.input;
  const std::int64_t bins = p.pooled_height * p.pooled_width;
  if (bins <= 0 || (position_sensitive && map.channels % bins != 0)) return {};
  const std::int64_t channels_out = position_sensitive ? map.channels / bins : map.channels;
  const auto plane = map.height * map.width, at = static_cast<std::int64_t>(element);
  const std::int64_t n = at / (map.channels * plane), channel = at / plane % map.channels;
  const std::int64_t pixel_y = at / map.width % map.height, pixel_x = at % map.width;
  if (n >= map.batch || problem.grad.size() != p.rois.size() * static_cast<std::size_t>(channels_out * bins)) return {};
  std::vector<double> terms;
  for (std::size_t k = 0; k < p.rois.size(); ++k) {
    const Roi& roi = p.rois[k];
    if (roi.batch_index != static_cast<double>(n)) continue;
    const PlainGeometry g = plain_geometry(p, roi, p.aligned || position_sensitive);
    if (!(g.grid_w * g.grid_h * static_cast<double>(bins) <= kMaxRoiAlignSamples)) return {};
    const double count = g.grid_h * g.grid_w;
    for (std::int64_t c = 0; c < channels_out; ++c)
      for (std::int64_t ph = 0; ph < p.pooled_height; ++ph)
        for (std::int64_t pw = 0; pw < p.pooled_width; ++pw) {
          const std::int64_t bin = ph * p.pooled_width + pw;
          if ((position_sensitive ? c * bins + bin : c) != channel) continue;
          const double grad = problem.grad[static_cast<std::size_t>((static_cast<std::int64_t>(k) * channels_out + c) * bins + bin)];
          for (double iy = 0; iy < g.grid_h; ++iy) {
            const double y = PlainGeometry::position(g.start_h, ph, g.bin_h, iy, g.grid_h);
            for (double ix = 0; ix < g.grid_w; ++ix) {
              PlainCorners corners;
              if (!plain_corners(y, PlainGeometry::position(g.start_w, pw, g.bin_w, ix, g.grid_w), map.height,
                                 map.width, corners))
                continue;
              for (int corner = 0; corner < 4; ++corner)
                if (corners.row[corner] == pixel_y && corners.column[corner] == pixel_x)
                  terms.push_back(grad * corners.weight[corner] / count);
            }
          }
        }
  }
  return terms;
}

}  // namespace detfuzz::oracles
