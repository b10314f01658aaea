#include "fuzz/gen/rois.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "fuzz/gen/common.h"
#include "oracles/roi_pool.h"

namespace detfuzz::gen {
namespace {

constexpr int kMaxSide = 24;
constexpr int kMaxRois = 12;

std::vector<double> rounded(DType dtype, std::vector<double> values) {
  for (double& v : values) v = round_to(dtype, v);
  return values;
}

}  // namespace

rc::Gen<std::vector<double>> map_values(DType dtype, std::int64_t count, std::int64_t height, std::int64_t width) {
  const auto n = static_cast<std::size_t>(count);
  auto constant = rc::gen::map(in_range(-8, 9), [n](int c) { return std::vector<double>(n, c); });
  auto ramp = rc::gen::map(
      rc::gen::tuple(in_range(-4, 5), in_range(-4, 5), in_range(-16, 17)),
      [n, height, width](const std::tuple<int, int, int>& t) {
        auto [sx, sy, offset] = t;
        std::vector<double> values(n);
        for (std::size_t i = 0; i < n; ++i) {
          const auto x = static_cast<std::int64_t>(i) % width, y = (static_cast<std::int64_t>(i) / width) % height;
          values[i] = offset + sx * static_cast<double>(x) + sy * static_cast<double>(y);
        }
        return values;
      });
  auto checkerboard = rc::gen::map(rc::gen::element(1.0, 100.0, 1000.0), [n, height, width](double amplitude) {
    std::vector<double> values(n);
    for (std::size_t i = 0; i < n; ++i) {
      const auto x = static_cast<std::int64_t>(i) % width, y = (static_cast<std::int64_t>(i) / width) % height;
      values[i] = (x + y) % 2 ? amplitude : -amplitude;
    }
    return values;
  });
  auto noise = rc::gen::mapcat(in_range(0, 11), [n](int fraction_bits) {
    return rows(n, [fraction_bits](const Row<1>& k) { return std::ldexp(k[0], -fraction_bits); }, Column{-1024, 1025});
  });
  // Near the dtype's maximum (a quarter of it for the largest): fp16 sums of a few of them
  // overflow, fp64 ones lie below -FLT_MAX.
  const double big = float_format(dtype).max_finite / 4;
  auto huge = rows(n, [big](const Row<1>& k) { return big * (k[0] / 64.0); }, Column{-64, 65});  // big * k overflows fp64
  return rc::gen::map(weighted<std::vector<double>>({{2, constant}, {3, ramp}, {2, checkerboard}, {4, noise}, {1, huge}}),
                      [dtype](std::vector<double> values) { return rounded(dtype, std::move(values)); });
}

namespace {

// Corners and extents in 1/64ths of the image (plus an off-grid fraction in 1/1024ths of a
// pixel), by placement; `count` RoIs. Columns of a row: the placement (weights 4 / 2 / 1 /
// 1 / 1 / 1, shrinking toward inside), the sub-pixel switch, the image, then per axis the
// start and size as fractions (in 2^-20) of the placement's ranges and their off-grid parts.
rc::Gen<std::vector<Roi>> some_rois(std::size_t count, std::int64_t batch, double image_w, double image_h, double scale,
                                    DType dtype) {
  struct Placement {
    int a_lo, a_hi, b_lo, b_hi;  // start in [a_lo, a_hi], size in [b_lo, b_hi], in 1/64ths
  };
  static constexpr Placement kPlacements[] = {
      {0, 63, 1, 64},     {0, 63, 1, 64},  {0, 63, 1, 64}, {0, 63, 1, 64},  // inside
      {-32, 63, 32, 96},  {-32, 63, 32, 96},                                  // partly outside
      {65, 128, 1, 32},                                                       // wholly outside (right/below)
      {-64, -1, 1, 64},                                                       // negative corners
      {0, 63, 0, 0},                                                          // zero size
      {-64, 0, 64, 256},                                                      // very large
  };
  constexpr int kFractionBits = 20;
  auto within = [](int lo, int hi, int fraction) {
    return lo + static_cast<int>((static_cast<std::int64_t>(fraction) * (hi - lo + 1)) >> kFractionBits);
  };
  auto roi = [=](const Row<11>& r) {
    const Placement& place = kPlacements[r[0]];
    const int sub_pixel = r[1];
    auto corners = [&](int start_at, int size_at, int start_fraction, int size_fraction, double extent) {
      const int start = within(place.a_lo, place.a_hi, start_at), size = within(place.b_lo, place.b_hi, size_at);
      const double pixel = 1.0 / scale;  // one feature pixel in image units
      double lo = extent * start / 64 + pixel * start_fraction / 1024;
      double length = extent * size / 64 + pixel * size_fraction / 1024;
      if (sub_pixel == 0) length = pixel * size_fraction / 4096;  // under a quarter pixel
      return std::pair<double, double>{round_to(dtype, lo), round_to(dtype, lo + length)};
    };
    auto [x1, x2] = corners(r[3], r[4], r[5], r[6], image_w);
    auto [y1, y2] = corners(r[7], r[8], r[9], r[10], image_h);
    return Roi{static_cast<double>(r[2]), x1, y1, std::max(x1, x2), std::max(y1, y2)};
  };
  const Column fraction{0, 1 << kFractionBits}, off_grid{0, 1024};
  return rows(count, roi, Column{0, 10}, Column{0, 6}, Column{0, static_cast<int>(batch)}, fraction, fraction, off_grid,
              off_grid, fraction, fraction, off_grid, off_grid);
}

}  // namespace

rc::Gen<FeatureMap> feature_map(DType dtype) { return feature_map(dtype, in_range<std::int64_t>(1, 5)); }

rc::Gen<FeatureMap> feature_map(DType dtype, rc::Gen<std::int64_t> channels) {
  return rc::gen::withSize([dtype, channels](int size) {
    const int side = std::max(1, kMaxSide * std::clamp(size, 0, 100) / 100);
    return rc::gen::mapcat(
        rc::gen::tuple(in_range<std::int64_t>(1, 4), channels, in_range<std::int64_t>(1, side + 1),
                       in_range<std::int64_t>(1, side + 1)),
        [dtype](const std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t>& shape) {
          auto [batch, channels, height, width] = shape;
          return rc::gen::map(map_values(dtype, batch * channels * height * width, height, width),
                              [=](std::vector<double> values) {
                                return FeatureMap{batch, channels, height, width, std::move(values)};
                              });
        });
  });
}

rc::Gen<std::vector<Roi>> rois(const FeatureMap& map, double spatial_scale, DType dtype, int max_rois) {
  const double image_w = static_cast<double>(map.width) / spatial_scale;
  const double image_h = static_cast<double>(map.height) / spatial_scale;
  return rc::gen::mapcat(count(std::min(max_rois, kMaxRois)), [=](int k) {
    return some_rois(static_cast<std::size_t>(k), map.batch, image_w, image_h, spatial_scale, dtype);
  });
}

rc::Gen<double> spatial_scale() {
  return weighted<double>({
      {6, rc::gen::element(1.0, 0.25, 0.125, 0.0625, 0.03125)},
      {2, rc::gen::map(in_range(1, 201), [](int k) { return k / 100.0; })},
  });
}

namespace {

rc::Gen<std::int64_t> pooled_size() {
  return weighted<std::int64_t>({{3, rc::gen::element<std::int64_t>(1, 2, 7)}, {2, in_range<std::int64_t>(1, 15)}});
}

rc::Gen<std::int64_t> ps_pooled_size() {
  return weighted<std::int64_t>({{6, in_range<std::int64_t>(1, 5)}, {1, rc::gen::just<std::int64_t>(7)}});
}

// The map and RoIs every RoI op draws: a map, a scale (as the kernel receives it, a
// double), RoIs at that scale.
template <class Problem, class Finish>
rc::Gen<Problem> roi_problem(const BoxGenOptions& options, rc::Gen<FeatureMap> maps, Finish finish) {
  const DType dtype = options.dtype;
  const int max_rois = std::max(0, options.max_boxes);
  return rc::gen::mapcat(rc::gen::pair(std::move(maps), spatial_scale()),
                         [=](const std::pair<FeatureMap, double>& setup) {
                           const auto& [map, scale] = setup;
                           return rc::gen::mapcat(rois(map, scale, dtype, max_rois),
                                                  [=](const std::vector<Roi>& roi_list) {
                                                    return finish(map, roi_list, scale);
                                                  });
                         });
}

template <class Problem, class Finish>
rc::Gen<Problem> roi_problem(const BoxGenOptions& options, Finish finish) {
  return roi_problem<Problem>(options, feature_map(options.dtype), finish);
}

}  // namespace

rc::Gen<RoiAlignProblem> roi_align_problem(const BoxGenOptions& options) {
  return roi_problem<RoiAlignProblem>(options, [](const FeatureMap& map, const std::vector<Roi>& roi_list, double scale) {
    return rc::gen::map(rc::gen::tuple(pooled_size(), pooled_size(), rc::gen::element<std::int64_t>(-1, 0, 1, 2, 4),
                                       rc::gen::element(false, true)),
                        [=](const std::tuple<std::int64_t, std::int64_t, std::int64_t, bool>& t) {
                          auto [ph, pw, ratio, aligned] = t;
                          return RoiAlignProblem{map, roi_list, scale, ph, pw, ratio, aligned};
                        });
  });
}

rc::Gen<RoiPoolProblem> roi_pool_problem(const BoxGenOptions& options) {
  return roi_problem<RoiPoolProblem>(options, [](const FeatureMap& map, const std::vector<Roi>& roi_list, double scale) {
    return rc::gen::map(rc::gen::pair(pooled_size(), pooled_size()), [=](const std::pair<std::int64_t, std::int64_t>& p) {
      return RoiPoolProblem{map, roi_list, scale, p.first, p.second};
    });
  });
}

namespace {

// The position-sensitive problems' maps: C_out x PH x PW channels (C_out 1..3), or, one case
// in 16, one more than that, which the kernel must refuse. Grids up to 4 x 4, and R-FCN's
// 7 x 7, keep the map (up to 147 channels) small. `finish` gets the map's generator and the grid.
template <class Problem, class Finish>
rc::Gen<Problem> position_sensitive_problem(const BoxGenOptions& options, Finish finish) {
  auto grid = rc::gen::tuple(ps_pooled_size(), ps_pooled_size(), in_range<std::int64_t>(1, 4), in_range(0, 16));
  return rc::gen::mapcat(grid, [options, finish](const std::tuple<std::int64_t, std::int64_t, std::int64_t, int>& g) {
    const auto [ph, pw, channels_out, divisible] = g;
    const std::int64_t extra = divisible == 0 && ph * pw > 1 ? 1 : 0;
    return finish(feature_map(options.dtype, rc::gen::just(channels_out * ph * pw + extra)), ph, pw);
  });
}

}  // namespace

rc::Gen<RoiAlignProblem> ps_roi_align_problem(const BoxGenOptions& options) {
  return position_sensitive_problem<RoiAlignProblem>(options, [options](rc::Gen<FeatureMap> maps, std::int64_t ph,
                                                                        std::int64_t pw) {
    return roi_problem<RoiAlignProblem>(
        options, std::move(maps), [ph, pw](const FeatureMap& map, const std::vector<Roi>& roi_list, double scale) {
          return rc::gen::map(rc::gen::element<std::int64_t>(-1, 0, 1, 2, 4), [=](std::int64_t ratio) {
            return RoiAlignProblem{map, roi_list, scale, ph, pw, ratio, true};
          });
        });
  });
}

rc::Gen<RoiPoolProblem> ps_roi_pool_problem(const BoxGenOptions& options) {
  return position_sensitive_problem<RoiPoolProblem>(options, [options](rc::Gen<FeatureMap> maps, std::int64_t ph,
                                                                       std::int64_t pw) {
    return roi_problem<RoiPoolProblem>(
        options, std::move(maps), [ph, pw](const FeatureMap& map, const std::vector<Roi>& roi_list, double scale) {
          return rc::gen::just(RoiPoolProblem{map, roi_list, scale, ph, pw});
        });
  });
}

}  // namespace detfuzz::gen

namespace detfuzz::gen {
namespace {

// The backward of a forward problem: the map's shape alone, and a gradient of the forward's
// output shape with the map generator's kinds of values (constant, smooth, alternating,
// dyadic noise, near the dtype's maximum: sums of those overflow fp16). Position-sensitive
// maps whose channels the grid does not divide lose the remainder (the gradient needs C / bins).
template <class Forward>
rc::Gen<GradientOf<Forward>> backward_problem(rc::Gen<Forward> forward, DType dtype, bool position_sensitive) {
  return rc::gen::mapcat(std::move(forward), [dtype, position_sensitive](Forward f) {
    const std::int64_t bins = f.pooled_height * f.pooled_width;
    if (position_sensitive) f.input.channels = std::max(bins, f.input.channels - f.input.channels % bins);
    const std::int64_t channels_out = position_sensitive ? f.input.channels / bins : f.input.channels;
    f.input.values.clear();
    f.input.values.shrink_to_fit();
    const auto count = static_cast<std::int64_t>(f.rois.size()) * channels_out * bins;
    return rc::gen::map(map_values(dtype, count, f.pooled_height, f.pooled_width), [f](std::vector<double> grad) {
      return GradientOf<Forward>{f, std::move(grad)};
    });
  });
}

}  // namespace

rc::Gen<RoiAlignBackwardProblem> roi_align_backward_problem(const BoxGenOptions& options) {
  return backward_problem(roi_align_problem(options), options.dtype, false);
}

rc::Gen<RoiAlignBackwardProblem> ps_roi_align_backward_problem(const BoxGenOptions& options) {
  return backward_problem(ps_roi_align_problem(options), options.dtype, true);
}

rc::Gen<RoiPoolBackwardProblem> roi_pool_backward_problem(const BoxGenOptions& options) {
  const DType dtype = options.dtype;
  return rc::gen::mapcat(roi_pool_problem(options), [dtype](RoiPoolProblem f) {
    std::vector<std::int64_t> argmax;
    for (const oracles::RoiPoolElement& e : oracles::roi_pool(f, dtype)) argmax.push_back(e.nominal.argmax);
    f.input.values.clear();
    f.input.values.shrink_to_fit();
    const auto count = static_cast<std::int64_t>(argmax.size());
    return rc::gen::map(map_values(dtype, count, f.pooled_height, f.pooled_width),
                        [f, argmax = std::move(argmax)](std::vector<double> grad) {
                          return RoiPoolBackwardProblem{f, std::move(grad), argmax};
                        });
  });
}

rc::Gen<PsRoiPoolBackwardProblem> ps_roi_pool_backward_problem(const BoxGenOptions& options) {
  return backward_problem(ps_roi_pool_problem(options), options.dtype, true);
}

}  // namespace detfuzz::gen
