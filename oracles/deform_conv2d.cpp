#include "deform_conv2d.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "running_error.h"
#include "vector_clones.h"

namespace detfuzz::oracles {
namespace {

// Index arithmetic of the problem's row-major tensors; c / o are absolute channels.
struct Layout {
  std::int64_t n, c, h, w, o, kh, kw, og, oh, ow, taps, group_channels, group_outputs;

  explicit Layout(const DeformConv2dProblem& p)
      : n(p.batch), c(p.in_channels), h(p.height), w(p.width), o(p.out_channels), kh(p.kernel_h), kw(p.kernel_w),
        og(p.offset_groups), oh(p.out_height()), ow(p.out_width()), taps(p.kernel_h * p.kernel_w),
        group_channels(p.in_channels / p.groups), group_outputs(p.out_channels / p.groups) {}

  std::size_t input(std::int64_t b, std::int64_t ch, std::int64_t y, std::int64_t x) const {
    return static_cast<std::size_t>(((b * c + ch) * h + y) * w + x);
  }
  std::size_t weight(std::int64_t out, std::int64_t group_channel, std::int64_t tap) const {
    return static_cast<std::size_t>((out * group_channels + group_channel) * taps + tap);
  }
  std::int64_t offset_group(std::int64_t ch) const { return ch / (c / og); }
  // component 0: the row offset (dy), 1: the column offset (dx)
  std::size_t offset(std::int64_t b, std::int64_t ch, std::int64_t tap, int component, std::int64_t y,
                     std::int64_t x) const {
    return static_cast<std::size_t>((((b * og + offset_group(ch)) * 2 * taps + 2 * tap + component) * oh + y) * ow + x);
  }
  std::size_t mask(std::int64_t b, std::int64_t ch, std::int64_t tap, std::int64_t y, std::int64_t x) const {
    return static_cast<std::size_t>((((b * og + offset_group(ch)) * taps + tap) * oh + y) * ow + x);
  }
  std::size_t output(std::int64_t b, std::int64_t out, std::int64_t y, std::int64_t x) const {
    return static_cast<std::size_t>(((b * o + out) * oh + y) * ow + x);
  }
};

// A map value with the kernel's zero outside the map.
double padded(const DeformConv2dProblem& p, const Layout& l, std::int64_t b, std::int64_t ch, std::int64_t y,
              std::int64_t x) {
  if (y < 0 || y >= l.h || x < 0 || x >= l.w) return 0;
  return p.input[l.input(b, ch, y, x)];
}

// The bilinear value and the sum of its |weight x corner| products (what its arithmetic's
// rounding scales with), torchvision's bilinear_interpolate.
struct Bilinear {
  double value = 0, magnitude = 0;
};

Bilinear bilinear(const DeformConv2dProblem& p, const Layout& l, std::int64_t b, std::int64_t ch, double y, double x) {
  if (y <= -1 || static_cast<double>(l.h) <= y || x <= -1 || static_cast<double>(l.w) <= x) return {};
  const double y_low = std::floor(y), x_low = std::floor(x);
  const auto row = static_cast<std::int64_t>(y_low), column = static_cast<std::int64_t>(x_low);
  const double ly = y - y_low, lx = x - x_low, hy = 1 - ly, hx = 1 - lx;
  const std::array<double, 4> terms = {hy * hx * padded(p, l, b, ch, row, column),
                                       hy * lx * padded(p, l, b, ch, row, column + 1),
                                       ly * hx * padded(p, l, b, ch, row + 1, column),
                                       ly * lx * padded(p, l, b, ch, row + 1, column + 1)};
  Bilinear result;
  for (double t : terms) {
    result.value += t;
    result.magnitude += std::fabs(t);
  }
  return result;
}

// How far the bilinear value can move per unit of position within one pixel of (y, x): the
// largest difference of neighbouring (zero-padded) map values around it.
double local_slope(const DeformConv2dProblem& p, const Layout& l, std::int64_t b, std::int64_t ch, double y, double x) {
  const auto row = static_cast<std::int64_t>(std::floor(y)), column = static_cast<std::int64_t>(std::floor(x));
  // The 5 x 5 patch from (row - 1, column - 1), read once (each value takes part in up to
  // four differences): the bench's layer asks this of every sample.
  double patch[5][5];
  const bool inside = row - 1 >= 0 && row + 3 < l.h && column - 1 >= 0 && column + 3 < l.w;
  for (std::int64_t r = 0; r < 5; ++r)
    for (std::int64_t s = 0; s < 5; ++s)
      patch[r][s] = inside ? p.input[l.input(b, ch, row - 1 + r, column - 1 + s)]
                           : padded(p, l, b, ch, row - 1 + r, column - 1 + s);
  double slope = 0;
  for (int r = 0; r < 4; ++r)
    for (int s = 0; s < 4; ++s)
      slope = std::max({slope, std::fabs(patch[r + 1][s] - patch[r][s]), std::fabs(patch[r][s + 1] - patch[r][s])});
  return slope;
}

// local_slope of every pixel a sample can sit in or next to (rows -2 .. h, columns -2 .. w),
// for one image and channel: a layer asks it of every one of its samples, which are many
// more than the pixels (9 taps each, and every output channel's group reads them).
class SlopeMap {
 public:
  SlopeMap() = default;
  SlopeMap(const DeformConv2dProblem& p, const Layout& l, std::int64_t b, std::int64_t ch)
      : rows_(l.h + 3), columns_(l.w + 3), slopes_(static_cast<std::size_t>(rows_ * columns_)) {
    for (std::int64_t r = 0; r < rows_; ++r)
      for (std::int64_t s = 0; s < columns_; ++s)
        slopes_[static_cast<std::size_t>(r * columns_ + s)] =
            local_slope(p, l, b, ch, static_cast<double>(r + kFirst), static_cast<double>(s + kFirst));
  }
  // The slope around (y, x), or -1 where the map does not reach (a sample far outside).
  double at(double y, double x) const {
    const double fy = std::floor(y) - kFirst, fx = std::floor(x) - kFirst;
    if (!(fy >= 0 && fy < static_cast<double>(rows_) && fx >= 0 && fx < static_cast<double>(columns_))) return -1;
    return slopes_[static_cast<std::size_t>(static_cast<std::int64_t>(fy) * columns_ + static_cast<std::int64_t>(fx))];
  }

 private:
  static constexpr std::int64_t kFirst = -2;
  std::int64_t rows_ = 0, columns_ = 0;
  std::vector<double> slopes_;
};

double largest_magnitude(const DeformConv2dProblem& p, const Layout& l, std::int64_t b, std::int64_t ch) {
  double largest = 0;
  for (std::int64_t y = 0; y < l.h; ++y)
    for (std::int64_t x = 0; x < l.w; ++x) largest = std::max(largest, std::fabs(p.input[l.input(b, ch, y, x)]));
  return largest;
}

// The two tiers' formats: the accumulate type and the storage dtype.
struct Tiers {
  std::array<DType, 2> dtype;
  std::array<double, 2> u;
  std::array<double, 2> eta;  // half the subnormal spacing: a rounding's absolute error floor
  explicit Tiers(DType storage)
      : dtype{accumulate_type(storage), storage},
        u{float_format(accumulate_type(storage)).unit_roundoff, float_format(storage).unit_roundoff},
        eta{float_format(accumulate_type(storage)).min_normal * u[0], float_format(storage).min_normal * u[1]} {}
};

// How far a tier's rounded sample position may be from the exact one: one rounding of
// (integer + offset) into the tier's type (two for fp16 / bf16, whose kernels add in float
// and round again), nothing where the sum is representable.
// `base` is the integer part the kernel computes in int, `offset` the input's value (exact
// sums in double for every narrower offset; fp64 rounds as the kernel's double does).
double position_error(DType dtype, double u, double base, double offset) {
  if (dtype == DType::fp64) return std::fabs(sum_rounding_error(base, offset));
  const double position = base + offset;
  // fp32 without the general check: the bench's layer asks this of every sample.
  const bool held = dtype == DType::fp32 ? std::fabs(position) <= 0x1p100 &&
                                               static_cast<double>(static_cast<float>(position)) == position
                                         : representable(dtype, position);
  return held ? 0 : 2 * u * std::fabs(position);
}

// One column entry (mask x sample) and, per tier, the bound of the kernel's error in it.
struct Column {
  double value = 0;
  double peak = 0;  // the largest magnitude on its path (|mask| x the bilinear products' sum)
  std::array<double, 2> error{};
};

// `slopes`: this image and channel's SlopeMap, or nullptr to compute the slope in place.
Column column_entry(const DeformConv2dProblem& p, const Layout& l, const Tiers& tiers, std::int64_t b, std::int64_t ch,
                    std::int64_t tap, std::int64_t oy, std::int64_t ox, const SlopeMap* slopes = nullptr) {
  const std::int64_t i = tap / l.kw, j = tap % l.kw;
  const double dy = p.offset[l.offset(b, ch, tap, 0, oy, ox)], dx = p.offset[l.offset(b, ch, tap, 1, oy, ox)];
  const auto base_y = static_cast<double>(oy * p.stride_h - p.pad_h + i * p.dilation_h);
  const auto base_x = static_cast<double>(ox * p.stride_w - p.pad_w + j * p.dilation_w);
  const double y = base_y + dy, x = base_x + dx;
  const double m = p.use_mask ? p.mask[l.mask(b, ch, tap, oy, ox)] : 1.0;
  const Bilinear sample = bilinear(p, l, b, ch, y, x);
  Column column;
  column.value = m * sample.value;
  column.peak = std::fabs(m) * sample.magnitude;
  double slope = -1;  // computed when a tier needs it
  for (std::size_t t = 0; t < 2; ++t) {
    if (t == 1 && tiers.dtype[1] == tiers.dtype[0]) {  // fp32 and fp64: one format, one bound
      column.error[1] = column.error[0];
      break;
    }
    const double u = tiers.u[t];
    const double moved = position_error(tiers.dtype[t], u, base_y, dy) + position_error(tiers.dtype[t], u, base_x, dx);
    double position_term = 0;
    if (moved > 0) {
      if (moved < 1) {
        if (slope < 0 && slopes) slope = slopes->at(y, x);
        if (slope < 0) slope = local_slope(p, l, b, ch, y, x);
        position_term = slope * moved;
      } else {
        position_term = 2 * largest_magnitude(p, l, b, ch);
      }
    }
    // 1 - ly, the two weight products, the four value products and three additions: at most
    // seven roundings on each term's path, eight with the second-order slack; each of them,
    // below the normal range, loses up to half the subnormal spacing (`eta`) whatever the value.
    const double eta = tiers.eta[t];
    const double sample_error = 8 * (u * sample.magnitude + eta) + position_term;
    column.error[t] = std::fabs(m) * sample_error + (p.use_mask ? u * std::fabs(column.value) + eta : 0.0);
  }
  return column;
}

// One output channel's sums over its group's im2col rows: per output position the signed
// sum, the sum of |w| |column| (what rounding in any order scales with) and the columns' own
// error bounds weighted by |w| per tier (one tier when the storage dtype is its own
// accumulate type). Output positions innermost, so that the loops vectorize; as few streams
// as the bound needs, since they are what the time goes to (memory, not arithmetic).
struct RowSums {
  double* __restrict sum;
  double* __restrict reach;
  double* __restrict strict;
  double* __restrict store;
};
struct Im2col {
  const double* __restrict value;
  const double* __restrict strict_error;
  const double* __restrict storage_error;
};

template <bool kTwoTiers>
DETFUZZ_CHANNEL_LOOPS void add_row(const Im2col& columns, std::size_t base, double w, std::size_t plane,
                                   const RowSums& into) {
  const double aw = std::fabs(w);
  for (std::size_t q = 0; q < plane; ++q) {
    into.sum[q] += w * columns.value[base + q];
    into.reach[q] += aw * std::fabs(columns.value[base + q]);
    into.strict[q] += aw * columns.strict_error[base + q];
    if constexpr (kTwoTiers) into.store[q] += aw * columns.storage_error[base + q];
  }
}

}  // namespace

std::optional<std::string> deform_conv2d_shape_error(const DeformConv2dProblem& p) {
  auto text = [](const char* what, std::int64_t a, std::int64_t b) {
    return std::string(what) + " (got " + std::to_string(a) + ", " + std::to_string(b) + ")";
  };
  if (p.kernel_h <= 0 || p.kernel_w <= 0) return text("the kernel size must be positive", p.kernel_h, p.kernel_w);
  if (p.stride_h <= 0 || p.stride_w <= 0) return text("the stride must be positive", p.stride_h, p.stride_w);
  if (p.pad_h < 0 || p.pad_w < 0) return text("the padding must be non-negative", p.pad_h, p.pad_w);
  if (p.dilation_h <= 0 || p.dilation_w <= 0) return text("the dilation must be positive", p.dilation_h, p.dilation_w);
  if (p.groups <= 0 || p.in_channels % p.groups != 0)
    return text("groups must divide the input channels", p.groups, p.in_channels);
  if (p.out_channels % p.groups != 0) return text("groups must divide the output channels", p.groups, p.out_channels);
  if (p.offset_groups <= 0 || p.in_channels % p.offset_groups != 0)
    return text("offset_groups must divide the input channels", p.offset_groups, p.in_channels);
  if (p.out_height() <= 0 || p.out_width() <= 0)
    return text("the output size must be positive", p.out_height(), p.out_width());
  return std::nullopt;
}

double deform_bilinear(const DeformConv2dProblem& problem, std::int64_t n, std::int64_t c, double y, double x) {
  return bilinear(problem, Layout(problem), n, c, y, x).value;
}

std::vector<DeformConv2dElement> deform_conv2d(const DeformConv2dProblem& p, DType storage) {
  if (deform_conv2d_shape_error(p)) return {};
  const Layout l(p);
  const Tiers tiers(storage);
  const double accumulate_max = float_format(tiers.dtype[0]).max_finite;
  const std::int64_t plane = l.oh * l.ow, rows = l.group_channels * l.taps;
  const auto plane_size = static_cast<std::size_t>(plane);
  const double terms = static_cast<double>(rows);
  std::vector<DeformConv2dElement> answer(static_cast<std::size_t>(l.n * l.o * plane));
  // One image at a time, im2col as the kernel forms it: for each (channel, tap) row the column
  // entries of every output position, then per output channel the sums over the group's rows,
  // output positions innermost so that the loops vectorize.
  const bool two_tiers = tiers.dtype[0] != tiers.dtype[1];
  std::vector<double> value(static_cast<std::size_t>(l.c * l.taps) * plane_size), strict_error(value.size()),
      storage_error(two_tiers ? value.size() : 0), peak(value.size());
  std::vector<double> sum(plane_size), reach(plane_size), strict(plane_size), store(plane_size), highest(plane_size);
  for (std::int64_t b = 0; b < l.n; ++b) {
    for (std::int64_t ch = 0; ch < l.c; ++ch) {
      const SlopeMap slopes(p, l, b, ch);
      for (std::int64_t tap = 0; tap < l.taps; ++tap)
        for (std::int64_t oy = 0; oy < l.oh; ++oy)
          for (std::int64_t ox = 0; ox < l.ow; ++ox) {
            const Column column = column_entry(p, l, tiers, b, ch, tap, oy, ox, &slopes);
            const auto at = static_cast<std::size_t>((ch * l.taps + tap) * plane + oy * l.ow + ox);
            value[at] = column.value;
            strict_error[at] = column.error[0];
            if (two_tiers) storage_error[at] = column.error[1];
            peak[at] = column.peak;
          }
    }
    for (std::int64_t out = 0; out < l.o; ++out) {
      const std::int64_t first_row = (out / l.group_outputs) * rows;
      if (out % l.group_outputs == 0) {
        // A column entry past the range is infinite in the kernel whatever its weight (times a
        // zero weight it is NaN): the group's largest entry per position, whatever the output.
        std::fill(highest.begin(), highest.end(), 0.0);
        for (std::int64_t r = 0; r < rows; ++r) {
          const double* row_peak = &peak[static_cast<std::size_t>(first_row + r) * plane_size];
          for (std::size_t q = 0; q < plane_size; ++q) highest[q] = std::max(highest[q], row_peak[q]);
        }
      }
      std::fill(sum.begin(), sum.end(), 0.0);
      std::fill(reach.begin(), reach.end(), 0.0);
      std::fill(strict.begin(), strict.end(), 0.0);
      std::fill(store.begin(), store.end(), 0.0);
      const Im2col columns{value.data(), strict_error.data(), storage_error.data()};
      const RowSums into{sum.data(), reach.data(), strict.data(), store.data()};
      for (std::int64_t r = 0; r < rows; ++r) {
        const std::size_t base = static_cast<std::size_t>(first_row + r) * plane_size;
        const double w = p.weight[l.weight(out, r / l.taps, r % l.taps)];
        if (two_tiers)
          add_row<true>(columns, base, w, plane_size, into);
        else
          add_row<false>(columns, base, w, plane_size, into);
      }
      if (!two_tiers) store = strict;
      const double bias = p.bias[static_cast<std::size_t>(out)];
      for (std::size_t q = 0; q < plane_size; ++q) {
        DeformConv2dElement& e = answer[l.output(b, out, 0, 0) + q];
        e.sum = sum[q];
        e.value = sum[q] + bias;
        // Our own fp64 sum is off by at most n u64 reach; the kernel's in any order by n u
        // reach, plus the rounding of the stored sum and of the bias's addition; each of its
        // 2 n + 2 roundings may also lose the tier's subnormal floor.
        const double own = (terms + 1) * 0x1p-53 * reach[q];
        const auto tier_bound = [&](std::size_t t, double column_errors) {
          const double u = tiers.u[t];
          return 1.0001 * (column_errors + terms * u * reach[q] + u * std::fabs(e.sum) + u * std::fabs(e.value) +
                           (2 * terms + 2) * tiers.eta[t]) +
                 own;
        };
        e.strict_bound = tier_bound(0, strict[q]);
        e.storage_bound = tier_bound(1, store[q]);
        e.range_ok = reach[q] + std::fabs(bias) <= accumulate_max && highest[q] <= accumulate_max;
      }
    }
  }
  return answer;
}

std::vector<DeformConv2dTerm> deform_conv2d_terms(const DeformConv2dProblem& p, std::size_t element) {
  if (deform_conv2d_shape_error(p)) return {};
  const Layout l(p);
  const Tiers tiers(DType::fp64);
  const auto plane = static_cast<std::size_t>(l.oh * l.ow);
  if (plane == 0 || element >= static_cast<std::size_t>(l.n * l.o) * plane) return {};
  const auto q = static_cast<std::int64_t>(element % plane);
  const auto out = static_cast<std::int64_t>((element / plane) % static_cast<std::size_t>(l.o));
  const auto b = static_cast<std::int64_t>(element / plane / static_cast<std::size_t>(l.o));
  const std::int64_t group = out / l.group_outputs;
  std::vector<DeformConv2dTerm> terms;
  for (std::int64_t gc = 0; gc < l.group_channels; ++gc)
    for (std::int64_t tap = 0; tap < l.taps; ++tap) {
      const Column column = column_entry(p, l, tiers, b, group * l.group_channels + gc, tap, q / l.ow, q % l.ow);
      terms.push_back({p.weight[l.weight(out, gc, tap)], column.value, column.peak});
    }
  return terms;
}

}  // namespace detfuzz::oracles
