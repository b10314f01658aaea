// The RoIAlign oracle's closed form (roi_align_internal.h): the running error bound of a
// bin's elements for every channel at once, vectorized. The reference it must never
// undercut is tracked_element (oracles/roi_align.cpp).
#include "roi_align_internal.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "vector_clones.h"

namespace detfuzz::oracles::roi_align_internal {
namespace {

// The closed form's per-channel loops are DETFUZZ_CHANNEL_LOOPS (vector_clones.h): AVX2's
// three-operand selects take about half the instructions of SSE2's.

// Whether a value the kernel reads is exactly what it stores: without a call, since the
// closed form asks it for every pixel it reads (bf16 is the top half of fp32; fp16 has 11
// significand bits, spacing 2^-24 below 2^-14, and ends at 65504).
template <DType kStorage>
bool storage_holds(double v) {
  if constexpr (kStorage == DType::fp64) {
    return true;
  } else {
    const float f = static_cast<float>(v);
    const bool in_fp32 = static_cast<double>(f) == v;
    if constexpr (kStorage == DType::fp32) return in_fp32;
    std::uint32_t bits;
    std::memcpy(&bits, &f, sizeof bits);
    if constexpr (kStorage == DType::bf16) return in_fp32 & ((bits & 0xffffu) == 0);
    const float magnitude = std::fabs(f), scaled = magnitude * 0x1p24f;
    const bool subnormal = magnitude < 0x1p-14f;
    const bool subnormal_ok = static_cast<float>(static_cast<std::int32_t>(subnormal ? scaled : 0.0f)) == scaled;
    const bool normal_ok = (magnitude <= 65504.0f) & ((bits & 0x1fffu) == 0);
    return in_fp32 & (subnormal ? subnormal_ok : normal_ok);
  }
}

// The formats the tiers of a storage dtype read, in slot order (ElementContext's).
template <DType kStorage>
constexpr int kSlots = kStorage == DType::fp64 ? 1 : kStorage == DType::fp32 ? 2 : 3;

// One bin's elements, for every channel at once, in closed form: the running error bound
// with every step counted as a rounding,
//   error_f = u_f * sum over steps |result| + sum over products (|value| error_f(weight)
//             + |weight| error_f(value)),
// which is what ErrorTracker gives when no step is exact and never less than it otherwise
// (an exact step only drops its u_f |result|). The channels are the lanes of every loop
// (structure of arrays, no branch on a channel's data), so the compiler vectorizes them.
// Three kinds of element go to tracked_element instead, so the closed form needs neither
// exactness tests nor subnormal terms: one whose fp32 evaluation matches fp64's (it may be
// exact, and an exact expectation is worth keeping), one with a step below some tracked
// format's normal range, and one whose step magnitudes sum past the fp64 range.
class ClosedFormBin {
 public:
  // For `channels` lanes: every per-channel array sized to exactly that (the loops and the
  // searches run over whole arrays). Reused from RoI to RoI and call to call: a small
  // case's RoIs would otherwise each pay some twenty allocations.
  void prepare(std::size_t channels) {
    channels_ = channels;
    for (auto* lane : {&sum_, &rounding_, &largest_, &smallest_, &poison_, &inexact_, &term_, &term_rounding_,
                       &flip_low_[0], &flip_low_[1], &flip_high_[0], &flip_high_[1], &extra_[0], &extra_[1]})
      lane->resize(channels);
    for (int f = 0; f < 3; ++f) {
      propagated_[f].resize(channels);
      term_propagated_[f].resize(channels);
    }
    sum_fp32_.resize(channels);
    for (auto& scratch : discarded_) scratch.resize(channels);
    slope_x_.resize(channels);
    slope_y_.resize(channels);
    for (auto* lane : {&average_, &fallback_, &range_ok_, &low_[0], &low_[1], &high_[0], &high_[1], &bound_[0],
                       &bound_[1]})
      lane->resize(channels);
  }

  // Elements (c, bin) for every channel c into results[c * bins + bin]; `base`: channel 0's
  // plane of the RoI's image.
  template <DType kStorage>
  void evaluate(const ElementContext& ctx, const double* base, const Sample* begin, const Sample* end,
                std::size_t bins, std::size_t bin, RoiAlignElement* results) {
    const auto plane_size = static_cast<std::size_t>(ctx.map.height * ctx.map.width);
    reset();
    for (const Sample* s = begin; s != end; ++s) {
      if (!s->counted) continue;
      locate(*s);
      add_sample<kStorage>(ctx, *s, band_clean_);
    }
    finish(ctx, base, plane_size, begin, end, bins, bin, results);
  }

 private:
  // Whether every product of the sample's nonzero weights with a window's nonzero pixel is
  // normal in every tracked format (twice the largest smallest normal, for fp64's rounding).
  // An all-zero window (smallest nonzero pixel infinite) has no product to check.
  bool products_normal(const ElementContext& ctx, const Sample& s) const {
    double weight = std::numeric_limits<double>::infinity();
    for (const Tracked& w : s.weight) weight = std::min(weight, nonzero(std::fabs(w.value)));
    return weight * band_.smallest >= 2 * ctx.smallest_normal;
  }

  // One counted sample's term into the bin's elements, every channel at once. Most samples
  // are plain: counted by fp64, unambiguous, and kept in their cell in every tier. Their
  // lanes (sample_lanes) do everything in one pass: the sum and its step magnitudes, the
  // fp32 sum, the propagated errors and the cell slopes. The rest add what only they need
  // after those lanes: the slopes of a position error that leaves its cell, and for an
  // ambiguous sample the term it may add or drop. kClean (the band is clean, see
  // transpose_band, and products_normal holds for a plain sample): nothing can overflow, be
  // subnormal or be inexact on input but a cancelling sum, so term_steps' checks are skipped.
  template <DType kStorage>
  void add_sample(const ElementContext& ctx, const Sample& s, bool clean_band) {
    bool in_cell[kTiers], all_in_cell = true, ambiguous = false;
    for (int tier = 0; tier < ctx.distinct_tiers; ++tier) {
      in_cell[tier] = within_cell(s, tier);
      all_in_cell = all_in_cell && in_cell[tier];
      ambiguous = ambiguous || s.ambiguous[tier];
    }
    const bool plain = s.inside && all_in_cell && !ambiguous;
    const bool clean = plain && clean_band && products_normal(ctx, s);
    // A tier whose error leaves the cell takes its slopes from add_window_slopes below: the
    // lanes' cell slopes for it go to scratch.
    double* extra[kTiers];
    for (int tier = 0; tier < kTiers; ++tier)
      extra[tier] = tier < ctx.distinct_tiers && in_cell[tier] ? extra_[tier].data() : discarded_[tier].data();
    const auto lanes = [&](auto tiers, auto clean_constant, auto sum) {
      sample_lanes<kStorage, decltype(tiers)::value, decltype(clean_constant)::value, decltype(sum)::value>(ctx, s,
                                                                                                          extra);
    };
    using One = std::integral_constant<int, 1>;
    using Two = std::integral_constant<int, kTiers>;
    using Yes = std::true_type;
    using No = std::false_type;
    if (ctx.distinct_tiers == 1)
      clean ? lanes(One{}, Yes{}, Yes{}) : s.inside ? lanes(One{}, No{}, Yes{}) : lanes(One{}, No{}, No{});
    else
      clean ? lanes(Two{}, Yes{}, Yes{}) : s.inside ? lanes(Two{}, No{}, Yes{}) : lanes(Two{}, No{}, No{});
    for (int tier = 0; tier < ctx.distinct_tiers; ++tier)
      if (!in_cell[tier]) add_window_slopes(ctx, s, tier);
    if (ambiguous) flip_terms<kStorage>(ctx, s);
    if (!clean && std::find(inexact_.begin(), inexact_.end(), 1.0) != inexact_.end()) input_errors<kStorage>(ctx, s);
  }

  // One sample's lanes: term_steps unless kClean, then fused_lanes (kSum: the sample is
  // inside, so its term joins the sum).
  template <DType kStorage, int kDistinctTiers, bool kClean, bool kSum>
  void sample_lanes(const ElementContext& ctx, const Sample& s, double* const (&extra)[kTiers]) {
    constexpr int slots = kSlots<kStorage>;
    const std::size_t n = channels_;
    SampleWeights k;
    for (int corner = 0; corner < 4; ++corner) {
      k.value[corner] = s.weight[corner].value;
      k.fp32[corner] = s.weight_fp32[corner];
      for (int f = 0; f < slots; ++f) k.error[f][corner] = s.weight[corner].error[ctx.format_index[f]];
    }
    for (int tier = 0; tier < kDistinctTiers; ++tier) {
      k.error_x[tier] = s.error_x[tier];
      k.error_y[tier] = s.error_y[tier];
    }
    // term_steps on its own: fused with the rest, GCC 12 does not vectorize the loop.
    if constexpr (!kClean)
      term_steps<kStorage>(n, pixels_[0], pixels_[1], pixels_[2], pixels_[3], k.value[0], k.value[1], k.value[2],
                           k.value[3], inexact_.data(), term_.data(), term_rounding_.data(), largest_.data(),
                           smallest_.data(), poison_.data());
    fused_lanes<kDistinctTiers, slots, kClean, kSum>(
        n, k, pixels_[0], pixels_[1], pixels_[2], pixels_[3], term_.data(), term_rounding_.data(), sum_.data(),
        rounding_.data(), largest_.data(), smallest_.data(), poison_.data(), sum_fp32_.data(), propagated_[0].data(),
        propagated_[1].data(), propagated_[2].data(), extra[0], extra[1]);
  }

  // An ambiguous sample: per ambiguous tier, the term it may add (outside) or drop (inside),
  // with the term's error in that tier's format and fp64's.
  template <DType kStorage>
  void flip_terms(const ElementContext& ctx, const Sample& s) {
    constexpr int slots = kSlots<kStorage>;
    const std::size_t n = channels_;
    const double* __restrict v0 = pixels_[0];
    const double* __restrict v1 = pixels_[1];
    const double* __restrict v2 = pixels_[2];
    const double* __restrict v3 = pixels_[3];
    for (int f = 0; f < slots; ++f) {
      const std::size_t format = ctx.format_index[f];
      const double errors[4] = {s.weight[0].error[format], s.weight[1].error[format], s.weight[2].error[format],
                                s.weight[3].error[format]};
      double* __restrict into = term_propagated_[f].data();
      for (std::size_t c = 0; c < n; ++c)
        into[c] = corner_errors(std::fabs(v0[c]), std::fabs(v1[c]), std::fabs(v2[c]), std::fabs(v3[c]), errors);
    }
    for (int tier = 0; tier < ctx.distinct_tiers; ++tier) {
      if (!s.ambiguous[tier]) continue;
      const double sign = s.inside ? -1.0 : 1.0;
      const double u = ctx.unit_roundoff[ctx.slot_of_tier[tier]] + ctx.unit_roundoff[ctx.fp64_slot];
      const double* own = term_propagated_[ctx.slot_of_tier[tier]].data();
      const double* fp64 = term_propagated_[ctx.fp64_slot].data();
      flip_term(n, sign, u, term_.data(), term_rounding_.data(), own, fp64, flip_low_[tier].data(),
                flip_high_[tier].data(), extra_[tier].data());
    }
  }

  // A term's error propagated from its weights': each corner's |pixel| times its weight's
  // error in one format (fused_lanes and flip_terms: one expression, so the same bits).
  static double corner_errors(double m0, double m1, double m2, double m3, const double (&weight_error)[4]) {
    return m0 * weight_error[0] + m1 * weight_error[1] + m2 * weight_error[2] + m3 * weight_error[3];
  }

  // What a sample's lanes share: its weights (fp64, fp32 and their errors per slot)
  // and position errors per tier.
  struct SampleWeights {
    double value[4];
    float fp32[4];
    double error[3][4];
    double error_x[kTiers], error_y[kTiers];
  };

  // The lanes of sample_lanes. Every array a parameter with restrict: GCC 12 honours
  // restrict there, not on locals, and would otherwise need more run-time alias checks
  // than it allows to vectorize the loop.
  template <int kDistinctTiers, int kSlotCount, bool kClean, bool kSum>
  DETFUZZ_CHANNEL_LOOPS static void fused_lanes(std::size_t n, const SampleWeights& k, const double* __restrict v0,
                          const double* __restrict v1, const double* __restrict v2, const double* __restrict v3,
                          const double* __restrict term, const double* __restrict term_rounding,
                          double* __restrict sum, double* __restrict rounding, double* __restrict largest,
                          double* __restrict smallest, double* __restrict poison, float* __restrict sum_fp32,
                          double* __restrict propagated0, double* __restrict propagated1,
                          double* __restrict propagated2, double* __restrict extra0, double* __restrict extra1) {
    const double w0 = k.value[0], w1 = k.value[1], w2 = k.value[2], w3 = k.value[3];
    const float f0 = k.fp32[0], f1 = k.fp32[1], f2 = k.fp32[2], f3 = k.fp32[3];
    for (std::size_t c = 0; c < n; ++c) {
      const double a = v0[c], b = v1[c], d = v2[c], e = v3[c];
      const double ma = std::fabs(a), mb = std::fabs(b), md = std::fabs(d), me = std::fabs(e);
      double slope_x, slope_y;
      cell_slopes(a, b, d, e, slope_x, slope_y);
      extra0[c] += slope_x * k.error_x[0] + slope_y * k.error_y[0];
      if constexpr (kDistinctTiers == 2) extra1[c] += slope_x * k.error_x[1] + slope_y * k.error_y[1];
      if constexpr (!kSum) continue;
      double t, steps;
      if constexpr (kClean) {
        const double p0 = w0 * a, p1 = w1 * b, p2 = w2 * d, p3 = w3 * e;
        const double partial1 = p0 + p1, partial2 = partial1 + p2;
        t = partial2 + p3;
        const double mp1 = std::fabs(partial1), mp2 = std::fabs(partial2), mt = std::fabs(t);
        steps = std::fabs(p0) + std::fabs(p1) + std::fabs(p2) + std::fabs(p3) + mp1 + mp2 + mt;
        smallest[c] = std::min(smallest[c], std::min(std::min(nonzero(mp1), nonzero(mp2)), nonzero(mt)));
      } else {
        t = term[c];
        steps = term_rounding[c];
      }
      const double total = sum[c] + t;
      sum[c] = total;
      const double magnitude = std::fabs(total);
      if constexpr (!kClean) {
        largest[c] = std::max(largest[c], magnitude);
        poison[c] += magnitude * 0.0;
      }
      smallest[c] = std::min(smallest[c], nonzero(magnitude));
      rounding[c] += steps + magnitude;
      sum_fp32[c] += f0 * static_cast<float>(a) + f1 * static_cast<float>(b) + f2 * static_cast<float>(d) +
                     f3 * static_cast<float>(e);
      propagated0[c] += corner_errors(ma, mb, md, me, k.error[0]);
      if constexpr (kSlotCount > 1)
        propagated1[c] += corner_errors(ma, mb, md, me, k.error[1]);
      if constexpr (kSlotCount > 2)
        propagated2[c] += corner_errors(ma, mb, md, me, k.error[2]);
    }
  }

  // Each sample's term per channel: its value, the magnitudes of its steps, and what the
  // range checks and the routing to the tracker need.
  template <DType kStorage>
  DETFUZZ_CHANNEL_LOOPS static void term_steps(std::size_t n, const double* __restrict v0, const double* __restrict v1,
                         const double* __restrict v2, const double* __restrict v3, double w0, double w1, double w2,
                         double w3, double* __restrict inexact, double* __restrict term,
                         double* __restrict term_rounding, double* __restrict largest, double* __restrict smallest,
                         double* __restrict poison) {
    const double inf = std::numeric_limits<double>::infinity();
    // A product of nonzero factors that comes out 0 underflowed: its magnitude counts as 0,
    // which sends the element to the tracker.
    const double zero_product0 = w0 != 0 ? 0.0 : inf, zero_product1 = w1 != 0 ? 0.0 : inf,
                 zero_product2 = w2 != 0 ? 0.0 : inf, zero_product3 = w3 != 0 ? 0.0 : inf;
    for (std::size_t c = 0; c < n; ++c) {
      const double a = v0[c], b = v1[c], d = v2[c], e = v3[c];
      inexact[c] = storage_holds<kStorage>(a) & storage_holds<kStorage>(b) & storage_holds<kStorage>(d) &
                     storage_holds<kStorage>(e)
                 ? 0.0
                 : 1.0;
      const double p0 = w0 * a, p1 = w1 * b, p2 = w2 * d, p3 = w3 * e;
      const double partial1 = p0 + p1, partial2 = partial1 + p2, t = partial2 + p3;
      const double ma = std::fabs(a), mb = std::fabs(b), md = std::fabs(d), me = std::fabs(e);
      const double m0 = std::fabs(p0), m1 = std::fabs(p1), m2 = std::fabs(p2), m3 = std::fabs(p3);
      const double mp1 = std::fabs(partial1), mp2 = std::fabs(partial2), mt = std::fabs(t);
      const double top = std::max(std::max(std::max(ma, mb), std::max(md, me)),
                        std::max(std::max(std::max(m0, m1), std::max(m2, m3)), std::max(std::max(mp1, mp2), mt)));
      largest[c] = std::max(largest[c], top);
      poison[c] += top * 0.0;
      const double n0 = m0 != 0 ? m0 : (a != 0 ? zero_product0 : inf);
      const double n1 = m1 != 0 ? m1 : (b != 0 ? zero_product1 : inf);
      const double n2 = m2 != 0 ? m2 : (d != 0 ? zero_product2 : inf);
      const double n3 = m3 != 0 ? m3 : (e != 0 ? zero_product3 : inf);
      const double bottom = std::min(std::min(std::min(nonzero(ma), nonzero(mb)), std::min(nonzero(md), nonzero(me))),
                           std::min(std::min(std::min(n0, n1), std::min(n2, n3)),
                                std::min(std::min(nonzero(mp1), nonzero(mp2)), nonzero(mt))));
      smallest[c] = std::min(smallest[c], bottom);
      term[c] = t;
      term_rounding[c] = m0 + m1 + m2 + m3 + mp1 + mp2 + mt;
    }
  }

  // An ambiguous sample: the term may be added or dropped, with its error.
  static void flip_term(std::size_t n, double sign, double u, const double* __restrict term,
                        const double* __restrict term_rounding, const double* own, const double* fp64,
                        double* __restrict flip_low, double* __restrict flip_high, double* __restrict extra) {
    for (std::size_t c = 0; c < n; ++c) {
      const double change = sign * term[c];
      flip_low[c] += std::min(0.0, change);
      flip_high[c] += std::max(0.0, change);
      extra[c] += kSafety * (u * term_rounding[c] + own[c] + fp64[c]);
    }
  }

  static double nonzero(double magnitude) {
    return magnitude != 0 ? magnitude : std::numeric_limits<double>::infinity();
  }

  void reset() {
    const double inf = std::numeric_limits<double>::infinity();
    for (auto* lane : {&sum_, &rounding_, &largest_, &poison_, &propagated_[0], &propagated_[1], &propagated_[2],
                       &flip_low_[0], &flip_low_[1], &flip_high_[0], &flip_high_[1], &extra_[0], &extra_[1]})
      std::fill(lane->begin(), lane->end(), 0.0);
    std::fill(smallest_.begin(), smallest_.end(), inf);
    std::fill(sum_fp32_.begin(), sum_fp32_.end(), 0.0f);
  }

 public:
  // The pixels a band's (a row of bins') counted samples read, and the slope windows of
  // those whose position error may leave their cell (add_window_slopes), every channel of
  // one pixel contiguous: window_[(row index * columns + column index) * channels + c], over
  // the band's rows and columns. A bin's samples are a grid and a band's share their rows,
  // so this is at most four pixels per sample and usually far fewer. (Per band rather than
  // per bin measured no faster by itself; it is what lets the slope windows be read here
  // instead of plane by plane from the map.) Then whether the band is clean: whether its
  // pixels spare the plain samples the per-channel checks of term_steps. All are finite and
  // held by the storage dtype (no input errors), and small enough that no step of a bin (at
  // most per_bin terms of magnitude <= max |pixel|, weights in [0, 1]) nor the sum of their
  // magnitudes can leave the strict format's range. products_normal then checks, per
  // sample, that no product (nor so any pixel) is below the normal range: only a cancelling
  // sum can be, which the clean loop still watches. Over the band's pixels, not each bin's:
  // a superset, so never clean where a bin is not.
  template <DType kStorage>
  void transpose_band(const ElementContext& ctx, const double* base, const Sample* begin, const Sample* end,
                      std::size_t per_bin) {
    const std::int64_t width = ctx.map.width;
    const auto plane_size = static_cast<std::size_t>(ctx.map.height * width);
    pixel_axes(begin, end, band_rows_, band_columns_);
    // The cells a position error may reach beyond the sample's own (add_window_slopes).
    for (const Sample* s = begin; s != end; ++s) {
      if (!s->counted) continue;
      for (int tier = 0; tier < ctx.distinct_tiers; ++tier) {
        if (within_cell(*s, tier)) continue;
        const SlopeWindow w = slope_window(*s, tier, ctx.map.height, width);
        for (std::int64_t row = w.first_row; row <= w.last_row; ++row) band_rows_.push_back(static_cast<int>(row));
        for (std::int64_t column = w.first_column; column <= w.last_column; ++column)
          band_columns_.push_back(static_cast<int>(column));
      }
    }
    sort_unique(band_rows_);
    sort_unique(band_columns_);
    const std::size_t n = channels_, pixels = band_rows_.size() * band_columns_.size();
    if (window_.size() < pixels * n) window_.resize(pixels * n);
    offsets_.clear();
    new_line_.clear();
    for (int row : band_rows_)
      for (int column : band_columns_) {
        const auto offset = static_cast<std::size_t>(row * width + column);
        new_line_.push_back(offsets_.empty() || line_of(base + offset) != line_of(base + offsets_.back()));
        offsets_.push_back(offset);
      }
    band_ = BandExtremes{};
    for (std::size_t first = 0; first < n; first += kBlock) {
      const double* from = base + first * plane_size;
      const std::size_t* offsets = offsets_.data();
      const unsigned char* new_line = new_line_.data();
      if (first + kBlock <= n)
        transpose_block<kStorage, kBlock>(from, plane_size, offsets, new_line, pixels, first + 2 * kBlock <= n,
                                          &window_[first], n, band_);
      else
        transpose_block<kStorage, 1>(from, plane_size, offsets, new_line, pixels, false, &window_[first], n, band_,
                                     n - first);
    }
    const double terms = static_cast<double>(per_bin) + 8;
    band_clean_ = band_.all_held && band_.largest * terms * terms * 2 <= ctx.strict.max_finite;
  }

 private:
  // The rows and columns of the map that the counted samples in [begin, end) read, sorted.
  static void pixel_axes(const Sample* begin, const Sample* end, std::vector<int>& rows, std::vector<int>& columns) {
    rows.clear();
    columns.clear();
    for (const Sample* s = begin; s != end; ++s) {
      if (!s->counted) continue;
      rows.insert(rows.end(), {s->y_low, s->y_high});
      columns.insert(columns.end(), {s->x_low, s->x_high});
    }
    sort_unique(rows);
    sort_unique(columns);
  }

  static void sort_unique(std::vector<int>& axis) {
    std::sort(axis.begin(), axis.end());
    axis.erase(std::unique(axis.begin(), axis.end()), axis.end());
  }

  static std::size_t band_index(const std::vector<int>& axis, int at) {
    return static_cast<std::size_t>(std::lower_bound(axis.begin(), axis.end(), at) - axis.begin());
  }

  // The window's channel runs of the sample's four pixels into pixels_.
  void locate(const Sample& s) {
    const std::size_t low_row = band_index(band_rows_, s.y_low), high_row = band_index(band_rows_, s.y_high);
    const std::size_t low_column = band_index(band_columns_, s.x_low);
    const std::size_t high_column = band_index(band_columns_, s.x_high);
    const std::size_t columns = band_columns_.size();
    pixels_[0] = &window_[(low_row * columns + low_column) * channels_];
    pixels_[1] = &window_[(low_row * columns + high_column) * channels_];
    pixels_[2] = &window_[(high_row * columns + low_column) * channels_];
    pixels_[3] = &window_[(high_row * columns + high_column) * channels_];
  }

  // A position error that may leave the sample's cell: the slopes of every cell it may
  // reach (position_slopes, window_slopes), the channels as lanes. transpose_band put the
  // window's pixels in the band's, consecutive rows and columns of the map at consecutive
  // indices.
  void add_window_slopes(const ElementContext& ctx, const Sample& s, int tier) {
    const SlopeWindow w = slope_window(s, tier, ctx.map.height, ctx.map.width);
    const std::size_t n = channels_, columns = band_columns_.size();
    const std::size_t first_column = band_index(band_columns_, static_cast<int>(w.first_column));
    const auto steps = static_cast<std::size_t>(w.last_column - w.first_column);
    double* slope_x = slope_x_.data();
    double* slope_y = slope_y_.data();
    std::fill_n(slope_x, n, 0.0);
    std::fill_n(slope_y, n, 0.0);
    const std::size_t first_row = band_index(band_rows_, static_cast<int>(w.first_row));
    for (std::int64_t row = w.first_row; row <= w.last_row; ++row) {
      const double* here = &window_[((first_row + static_cast<std::size_t>(row - w.first_row)) * columns + first_column) * n];
      for (std::size_t k = 0; k < steps; ++k) largest_difference(n, here + k * n, here + (k + 1) * n, slope_x);
      if (row < w.last_row)
        for (std::size_t k = 0; k <= steps; ++k) largest_difference(n, here + k * n, here + (columns + k) * n, slope_y);
    }
    window_error(n, slope_x, slope_y, s.error_x[tier], s.error_y[tier], extra_[tier].data());
  }

  // add_window_slopes' lanes: the largest |b - a| so far, and the error the slopes carry.
  DETFUZZ_CHANNEL_LOOPS static void largest_difference(std::size_t n, const double* __restrict a,
                                                       const double* __restrict b, double* __restrict largest) {
    for (std::size_t c = 0; c < n; ++c) largest[c] = std::max(largest[c], std::fabs(b[c] - a[c]));
  }
  DETFUZZ_CHANNEL_LOOPS static void window_error(std::size_t n, const double* __restrict slope_x,
                                                 const double* __restrict slope_y, double error_x, double error_y,
                                                 double* __restrict extra) {
    for (std::size_t c = 0; c < n; ++c) extra[c] += slope_x[c] * error_x + slope_y[c] * error_y;
  }

  // Pixels the storage dtype does not hold (a case file's values, say): each tracked format
  // that cannot hold one either reads it off by half an ulp.
  template <DType kStorage>
  void input_errors(const ElementContext& ctx, const Sample& s) {
    constexpr int slots = kSlots<kStorage>;
    for (std::size_t c = 0; c < channels_; ++c) {
      if (inexact_[c] == 0) continue;
      for (int k = 0; k < 4; ++k) {
        const double v = pixels_[k][c];
        if (storage_holds<kStorage>(v)) continue;
        double error[3]{};
        for (int f = 0; f < slots; ++f) {
          const DType format = kFloatDTypes[ctx.format_index[f]];
          error[f] = representable(format, v) ? 0.0 : std::fabs(s.weight[k].value) * half_ulp(format, v);
        }
        for (int tier = 0; tier < ctx.distinct_tiers; ++tier)
          if (s.ambiguous[tier]) extra_[tier][c] += kSafety * (error[ctx.slot_of_tier[tier]] + error[ctx.fp64_slot]);
        if (s.inside)
          for (int f = 0; f < slots; ++f) propagated_[f][c] += error[f];
      }
    }
  }

  // The bin's elements from its running sums. The lanes (finish_lanes) compute every
  // channel's element, or mark it for tracked_element; then each is stored or handed over.
  // Seven divisions an element are most of this, and as lanes they run four at a time.
  void finish(const ElementContext& ctx, const double* base, std::size_t plane_size, const Sample* begin,
              const Sample* end, std::size_t bins, std::size_t bin, RoiAlignElement* results) {
    FinishConstants k;
    k.count = ctx.count.value;
    k.abs_count = std::fabs(k.count);
    k.count_fp32 = static_cast<float>(k.count);
    k.smallest_normal = ctx.smallest_normal;
    k.max_finite = ctx.strict.max_finite;
    auto slot = [&](int f, double& u, double& count_error) {
      u = ctx.unit_roundoff[f];
      count_error = ctx.count.error[ctx.format_index[f]];
    };
    for (int tier = 0; tier < ctx.distinct_tiers; ++tier) slot(ctx.slot_of_tier[tier], k.u_own[tier], k.count_error_own[tier]);
    slot(ctx.fp64_slot, k.u_fp64, k.count_error_fp64);
    const int own1 = ctx.slot_of_tier[ctx.distinct_tiers - 1];
    const auto lanes = ctx.distinct_tiers == 1 ? &finish_lanes<1> : &finish_lanes<kTiers>;
    lanes(channels_, k, sum_.data(), rounding_.data(), largest_.data(), smallest_.data(), poison_.data(),
          sum_fp32_.data(), propagated_[ctx.slot_of_tier[0]].data(), propagated_[own1].data(),
          propagated_[ctx.fp64_slot].data(), flip_low_[0].data(), flip_low_[1].data(), flip_high_[0].data(),
          flip_high_[1].data(), extra_[0].data(), extra_[1].data(), average_.data(), fallback_.data(),
          range_ok_.data(), low_[0].data(), low_[1].data(), high_[0].data(), high_[1].data(), bound_[0].data(),
          bound_[1].data());
    const int last_tier = ctx.distinct_tiers - 1;
    // The lanes' arrays as local pointers: through the members, every store into an element
    // (which may alias them, as far as the compiler knows) reloads each array's address.
    const double *average = average_.data(), *fallback = fallback_.data(), *range_ok = range_ok_.data();
    const double *low0 = low_[0].data(), *high0 = high_[0].data(), *bound0 = bound_[0].data();
    const double *low1 = low_[last_tier].data(), *high1 = high_[last_tier].data(), *bound1 = bound_[last_tier].data();
    const bool geometry_in_range = ctx.geometry_in_range;
    for (std::size_t c = 0, n = channels_; c < n; ++c) {
      RoiAlignElement& r = results[c * bins + bin];
      if (fallback[c] != 0) {
        tracked_element(ctx, base + c * plane_size, begin, end, r);
        continue;
      }
      // Each tier stored whole from registers: copying tier 0 out of r into tier 1 would
      // read 16 bytes just written as 8-byte stores, which store forwarding cannot serve.
      r = RoiAlignElement{average[c], {low0[c], high0[c], bound0[c]}, {low1[c], high1[c], bound1[c]},
                          range_ok[c] != 0 && geometry_in_range, false};
    }
  }

  // What finish_lanes reads besides the arrays: the count, the ranges, and per tier the unit
  // roundoff and the count's error of its own format's slot and of fp64's.
  struct FinishConstants {
    double count, abs_count, smallest_normal, max_finite;
    float count_fp32;
    double u_own[kTiers]{}, count_error_own[kTiers]{}, u_fp64 = 0, count_error_fp64 = 0;
  };

  // One slot's error of an average: the sum's steps and propagated error, the count's
  // error, and the division's own rounding.
  static double average_error(double u, double count_error, double rounding, double propagated, double magnitude,
                              double abs_count) {
    return (u * rounding + propagated + magnitude * count_error) / abs_count + u * magnitude;
  }

  // finish's lanes. fallback: the element goes to tracked_element (a step below the normal
  // range, a sum of step magnitudes past fp64's, or an fp32 evaluation equal to fp64's,
  // which may be exact); the other outputs are then unused.
  template <int kDistinctTiers>
  DETFUZZ_CHANNEL_LOOPS static void finish_lanes(
      std::size_t n, const FinishConstants& k, const double* __restrict sum, const double* __restrict rounding,
      const double* __restrict largest, const double* __restrict smallest, const double* __restrict poison,
      const float* __restrict sum_fp32, const double* __restrict own0, const double* __restrict own1,
      const double* __restrict fp64, const double* __restrict flip_low0, const double* __restrict flip_low1,
      const double* __restrict flip_high0, const double* __restrict flip_high1, const double* __restrict extra0,
      const double* __restrict extra1, double* __restrict average_out, double* __restrict fallback,
      double* __restrict range_ok, double* __restrict low0, double* __restrict low1, double* __restrict high0,
      double* __restrict high1, double* __restrict bound0, double* __restrict bound1) {
    const double largest_double = std::numeric_limits<double>::max();
    for (std::size_t c = 0; c < n; ++c) {
      const double average = sum[c] / k.count;
      const double magnitude = std::fabs(average);
      // The sum of step magnitudes can overflow where no step does (values near the fp64
      // limit): the tracker bounds each step on its own.
      const bool below_normal = std::min(smallest[c], nonzero(magnitude)) < k.smallest_normal;
      const bool finite_rounding = std::fabs(rounding[c]) <= largest_double;
      const bool fp32_agrees = static_cast<double>(sum_fp32[c] / k.count_fp32) == average;
      fallback[c] = below_normal | !finite_rounding | fp32_agrees ? 1.0 : 0.0;
      average_out[c] = average;
      const double fp64_error =
          average_error(k.u_fp64, k.count_error_fp64, rounding[c], fp64[c], magnitude, k.abs_count);
      const double own_error0 =
          average_error(k.u_own[0], k.count_error_own[0], rounding[c], own0[c], magnitude, k.abs_count);
      low0[c] = (sum[c] + flip_low0[c]) / k.count;
      high0[c] = (sum[c] + flip_high0[c]) / k.count;
      bound0[c] = kSafety * (own_error0 + fp64_error) + extra0[c] / k.count;
      if constexpr (kDistinctTiers == 2) {
        const double own_error1 =
            average_error(k.u_own[1], k.count_error_own[1], rounding[c], own1[c], magnitude, k.abs_count);
        low1[c] = (sum[c] + flip_low1[c]) / k.count;
        high1[c] = (sum[c] + flip_high1[c]) / k.count;
        bound1[c] = kSafety * (own_error1 + fp64_error) + extra1[c] / k.count;
      }
      range_ok[c] = (poison[c] == 0) & (std::max(largest[c], magnitude) <= k.max_finite) & !std::isnan(average)
                        ? 1.0
                        : 0.0;
    }
  }

  static std::uintptr_t line_of(const double* at) { return reinterpret_cast<std::uintptr_t>(at) / 64; }

  // Channels are a plane apart in the map: transpose_band copies eight at a time, pixel by
  // pixel, the window written whole.
  static constexpr std::size_t kBlock = 8;

  // Over a band's pixels, every channel: all held by the storage dtype, the largest
  // magnitude, the smallest nonzero one.
  struct BandExtremes {
    bool all_held = true;
    double largest = 0, smallest = std::numeric_limits<double>::infinity();
  };

  // One block of channels (kCount of them, or `count` where kCount is 1: the last block),
  // every pixel of the band: the pixels at plane offsets offsets[0, pixels) of the
  // block's planes into into[p * stride + c], and their extremes into `extremes`, while
  // they are in registers (a pass over the window per bin was a tenth of a 1-RoI call).
  template <DType kStorage, std::size_t kCount>
  DETFUZZ_CHANNEL_LOOPS static void transpose_block(const double* __restrict from, std::size_t plane_size,
                                                    const std::size_t* __restrict offsets,
                                                    const unsigned char* __restrict new_line, std::size_t pixels,
                                                    bool prefetch_next, double* __restrict into, std::size_t stride,
                                                    BandExtremes& extremes, std::size_t count = kCount) {
    double held[kCount], largest[kCount], smallest[kCount];
    for (std::size_t c = 0; c < kCount; ++c) {
      held[c] = 1;
      largest[c] = 0;
      smallest[c] = std::numeric_limits<double>::infinity();
    }
    for (std::size_t p = 0; p < pixels; ++p, into += stride) {
      const double* pixel = from + offsets[p];
      if (kCount > 1 && prefetch_next && new_line[p])
        // The next block's lines, while this one's load: the planes are too far apart for
        // the hardware prefetcher, and each (plane, row) run is too short to train it. Once
        // per line (of channel 0's plane: a hint, exact where a plane is whole lines).
        for (std::size_t c = kCount; c < 2 * kCount; ++c) __builtin_prefetch(pixel + c * plane_size);
      for (std::size_t c = 0; c < (kCount > 1 ? kCount : count); ++c) {  // kCount > 1: unrolled
        const std::size_t lane = kCount > 1 ? c : 0;
        const double v = pixel[c * plane_size], magnitude = std::fabs(v);
        into[c] = v;
        held[lane] = std::min(held[lane], storage_holds<kStorage>(v) ? 1.0 : 0.0);
        largest[lane] = std::max(largest[lane], magnitude);
        smallest[lane] = std::min(smallest[lane], nonzero(magnitude));
      }
    }
    for (std::size_t c = 0; c < kCount; ++c) {
      extremes.all_held = extremes.all_held && held[c] == 1;
      extremes.largest = std::max(extremes.largest, largest[c]);
      extremes.smallest = std::min(extremes.smallest, smallest[c]);
    }
  }

  std::size_t channels_ = 0;
  // Per channel, over the bin's samples so far: the sum, the magnitudes of its steps, the
  // largest and smallest nonzero step magnitude, the propagated errors per slot, the
  // ambiguous samples' flips and the position errors through the slopes, and the fp32 sum.
  std::vector<double> sum_, rounding_, largest_, smallest_, poison_, propagated_[3], flip_low_[kTiers],
      flip_high_[kTiers], extra_[kTiers];
  std::vector<float> sum_fp32_;
  std::vector<int> band_rows_, band_columns_;  // of the map, that the band's samples read
  std::vector<std::size_t> offsets_;           // the band's pixels in a plane, row by row
  std::vector<unsigned char> new_line_;        // whether an offset starts a cache line of the band
  std::vector<double> window_;                 // transpose_band
  BandExtremes band_;                          // of the band's pixels
  bool band_clean_ = false;                    // transpose_band
  const double* pixels_[4]{};                  // the current sample's, in window_
  // The current sample's per channel: pixels the storage dtype does not hold (1), its
  // term, the term's step magnitudes and propagated error per slot.
  std::vector<double> inexact_, term_, term_rounding_, term_propagated_[3];
  // Per tier, cell slopes of an error that leaves the cell (one per tier: the lanes' restrict
  // pointers must not meet).
  std::vector<double> discarded_[kTiers];
  std::vector<double> slope_x_, slope_y_;  // add_window_slopes' per-channel slopes
  // finish_lanes' per-channel answers.
  std::vector<double> average_, fallback_, range_ok_, low_[kTiers], high_[kTiers], bound_[kTiers];
};

}  // namespace

void closed_form_elements(const ElementContext& ctx, const double* base, const Sample* samples, std::size_t bins,
                          std::size_t per_bin, std::size_t pooled_width, std::int64_t channels, DType storage,
                          RoiAlignElement* results) {
  thread_local ClosedFormBin lanes;
  lanes.prepare(static_cast<std::size_t>(channels));
  const std::size_t band_bins = pooled_width;
  auto bins_of = [&](auto storage_type) {
    constexpr DType kStorage = decltype(storage_type)::value;
    for (std::size_t bin = 0; bin < bins; ++bin) {
      const Sample* begin = samples + bin * per_bin;
      if (bin % band_bins == 0)
        lanes.transpose_band<kStorage>(ctx, base, begin, begin + band_bins * per_bin, per_bin);
      lanes.evaluate<kStorage>(ctx, base, begin, begin + per_bin, bins, bin, results);
    }
  };
  switch (storage) {
    case DType::fp16: bins_of(std::integral_constant<DType, DType::fp16>{}); break;
    case DType::bf16: bins_of(std::integral_constant<DType, DType::bf16>{}); break;
    case DType::fp32: bins_of(std::integral_constant<DType, DType::fp32>{}); break;
    default: bins_of(std::integral_constant<DType, DType::fp64>{}); break;
  }
}

}  // namespace detfuzz::oracles::roi_align_internal
