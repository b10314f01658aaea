#include "deform_conv2d.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "running_error.h"

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
  double slope = 0;
  for (std::int64_t r = row - 1; r <= row + 2; ++r)
    for (std::int64_t s = column - 1; s <= column + 2; ++s) {
      const double v = padded(p, l, b, ch, r, s);
      slope = std::max({slope, std::fabs(padded(p, l, b, ch, r + 1, s) - v), std::fabs(padded(p, l, b, ch, r, s + 1) - v)});
    }
  return slope;
}

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
  return representable(dtype, position) ? 0 : 2 * u * std::fabs(position);
}

// One column entry (mask x sample) and, per tier, the bound of the kernel's error in it.
struct Column {
  double value = 0;
  double peak = 0;  // the largest magnitude on its path (|mask| x the bilinear products' sum)
  std::array<double, 2> error{};
};

Column column_entry(const DeformConv2dProblem& p, const Layout& l, const Tiers& tiers, std::int64_t b, std::int64_t ch,
                    std::int64_t tap, std::int64_t oy, std::int64_t ox) {
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
    const double u = tiers.u[t];
    const double moved = position_error(tiers.dtype[t], u, base_y, dy) + position_error(tiers.dtype[t], u, base_x, dx);
    double position_term = 0;
    if (moved > 0) {
      if (moved < 1) {
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
  std::vector<double> value(static_cast<std::size_t>(l.c * l.taps) * plane_size), magnitude(value.size()),
      strict_error(value.size()), storage_error(value.size()), peak(value.size());
  std::vector<double> sum(plane_size), reach(plane_size), strict(plane_size), store(plane_size), highest(plane_size);
  for (std::int64_t b = 0; b < l.n; ++b) {
    for (std::int64_t ch = 0; ch < l.c; ++ch)
      for (std::int64_t tap = 0; tap < l.taps; ++tap)
        for (std::int64_t oy = 0; oy < l.oh; ++oy)
          for (std::int64_t ox = 0; ox < l.ow; ++ox) {
            const Column column = column_entry(p, l, tiers, b, ch, tap, oy, ox);
            const auto at = static_cast<std::size_t>((ch * l.taps + tap) * plane + oy * l.ow + ox);
            value[at] = column.value;
            magnitude[at] = std::fabs(column.value);
            strict_error[at] = column.error[0];
            storage_error[at] = column.error[1];
            peak[at] = column.peak;
          }
    for (std::int64_t out = 0; out < l.o; ++out) {
      std::fill(sum.begin(), sum.end(), 0.0);
      std::fill(reach.begin(), reach.end(), 0.0);
      std::fill(strict.begin(), strict.end(), 0.0);
      std::fill(store.begin(), store.end(), 0.0);
      std::fill(highest.begin(), highest.end(), 0.0);
      const std::int64_t first_row = (out / l.group_outputs) * rows;
      for (std::int64_t r = 0; r < rows; ++r) {
        const double w = p.weight[l.weight(out, r / l.taps, r % l.taps)], aw = std::fabs(w);
        const std::size_t base = static_cast<std::size_t>(first_row + r) * plane_size;
        for (std::size_t q = 0; q < plane_size; ++q) {
          sum[q] += w * value[base + q];
          reach[q] += aw * magnitude[base + q];
          strict[q] += aw * strict_error[base + q];
          store[q] += aw * storage_error[base + q];
          // A column entry past the range is infinite in the kernel whatever its weight (times
          // a zero weight it is NaN).
          highest[q] = std::max(highest[q], peak[base + q]);
        }
      }
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
