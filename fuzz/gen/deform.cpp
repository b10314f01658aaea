#include "fuzz/gen/deform.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <tuple>

#include "fuzz/gen/common.h"
#include "fuzz/gen/rois.h"

namespace detfuzz::gen {
namespace {

// The layer's hyper-parameters, drawn before the values (their counts depend on them).
struct Layer {
  std::int64_t batch, groups, offset_groups, channel_factor, outputs_per_group, kernel_h, kernel_w;
  std::int64_t stride, pad, dilation, extra_height, extra_width;
  bool use_mask, indivisible_outputs;
};

rc::Gen<std::int64_t> batch_size() {
  return weighted<std::int64_t>({{12, in_range<std::int64_t>(1, 5)},
                                 {2, rc::gen::element<std::int64_t>(31, 32, 33, 64, 65)},
                                 {1, rc::gen::just<std::int64_t>(0)}});
}

rc::Gen<Layer> layer(int max_side) {
  auto shape = rc::gen::tuple(batch_size(), rc::gen::element<std::int64_t>(1, 1, 2), rc::gen::element<std::int64_t>(1, 1, 2),
                              in_range<std::int64_t>(1, 4), in_range<std::int64_t>(1, 4),
                              rc::gen::element<std::int64_t>(1, 3, 3, 2), rc::gen::element<std::int64_t>(1, 3, 3, 2));
  auto geometry = rc::gen::tuple(in_range<std::int64_t>(1, 3), in_range<std::int64_t>(0, 3), in_range<std::int64_t>(1, 3),
                                 in_range<std::int64_t>(0, max_side), in_range<std::int64_t>(0, max_side),
                                 rc::gen::arbitrary<bool>(), in_range(0, 16));
  return rc::gen::map(rc::gen::pair(shape, geometry), [](const auto& drawn) {
    const auto& [batch, groups, offset_groups, factor, per_group, kh, kw] = drawn.first;
    const auto& [stride, pad, dilation, extra_h, extra_w, mask, divisible] = drawn.second;
    return Layer{batch, groups, offset_groups, factor, per_group, kh, kw, stride, pad, dilation, extra_h, extra_w,
                 mask, divisible == 0 && groups > 1};
  });
}

// Offsets in pixels: zero, integral (samples on the grid), dyadic quarters, fine fractions,
// and far outside the map (samples that read 0).
rc::Gen<std::vector<double>> offsets(DType dtype, std::size_t count, std::int64_t side) {
  auto zero = rc::gen::just(std::vector<double>(count, 0.0));
  auto integral = rows(count, [](const Row<1>& k) { return static_cast<double>(k[0]); }, Column{-3, 4, 0});
  auto quarters = rows(count, [](const Row<1>& k) { return k[0] / 4.0; }, Column{-16, 17, 0});
  auto fine = rows(count, [](const Row<1>& k) { return k[0] / 1024.0; }, Column{-8192, 8193, 0});
  const double far = static_cast<double>(side + 2);
  auto outside = rows(count, [far](const Row<2>& k) { return (k[0] ? far : -far) * (1 + k[1] / 8.0); }, Column{0, 2},
                      Column{0, 8});
  return rc::gen::map(weighted<std::vector<double>>({{2, zero}, {2, integral}, {3, quarters}, {4, fine}, {1, outside}}),
                      [dtype](std::vector<double> values) {
                        for (double& v : values) v = round_to(dtype, v);
                        return values;
                      });
}

// Masks: DCNv2's sigmoid range in sixteenths mostly, now and then beyond it (the op takes any).
rc::Gen<std::vector<double>> masks(DType dtype, std::size_t count) {
  auto unit = rows(count, [](const Row<1>& k) { return k[0] / 16.0; }, Column{0, 17, 16});
  auto wide = rows(count, [](const Row<1>& k) { return k[0] / 4.0; }, Column{-8, 9, 4});
  return rc::gen::map(weighted<std::vector<double>>({{4, unit}, {1, wide}}), [dtype](std::vector<double> values) {
    for (double& v : values) v = round_to(dtype, v);
    return values;
  });
}

// Conv weights and biases: dyadic sixteenths in [-2, 2], biases zero (bias=None) or quarters.
rc::Gen<std::vector<double>> weights(std::size_t count) {
  return rows(count, [](const Row<1>& k) { return k[0] / 16.0; }, Column{-32, 33, 16});
}
rc::Gen<std::vector<double>> biases(std::size_t count) {
  return weighted<std::vector<double>>({{1, rc::gen::just(std::vector<double>(count, 0.0))},
                                        {2, rows(count, [](const Row<1>& k) { return k[0] / 4.0; }, Column{-32, 33, 0})}});
}

}  // namespace

rc::Gen<DeformConv2dProblem> deform_conv2d_problem(const BoxGenOptions& options) {
  const DType dtype = options.dtype;
  return rc::gen::withSize([dtype](int size) {
    const int max_side = std::max(1, 10 * std::clamp(size, 0, 100) / 100);
    return rc::gen::mapcat(layer(max_side + 1), [dtype](const Layer& l) {
      DeformConv2dProblem p;
      p.batch = l.batch;
      p.groups = l.groups;
      p.offset_groups = l.offset_groups;
      // Channels a multiple of both groups; many images get one channel (they are about the chunks).
      const std::int64_t unit = std::lcm(l.groups, l.offset_groups);
      p.in_channels = unit * (l.batch > 8 ? 1 : l.channel_factor);
      p.out_channels = l.groups * l.outputs_per_group + (l.indivisible_outputs ? 1 : 0);
      p.kernel_h = l.batch > 8 ? 1 : l.kernel_h;
      p.kernel_w = l.batch > 8 ? 1 : l.kernel_w;
      p.stride_h = p.stride_w = l.stride;
      p.pad_h = p.pad_w = l.pad;
      p.dilation_h = p.dilation_w = l.dilation;
      p.use_mask = l.use_mask;
      // The smallest map with an output, plus what was drawn (small for many images).
      const std::int64_t reach_h = std::max<std::int64_t>(1, p.dilation_h * (p.kernel_h - 1) + 1 - 2 * p.pad_h);
      const std::int64_t reach_w = std::max<std::int64_t>(1, p.dilation_w * (p.kernel_w - 1) + 1 - 2 * p.pad_w);
      p.height = reach_h + (l.batch > 8 ? std::min<std::int64_t>(l.extra_height, 2) : l.extra_height);
      p.width = reach_w + (l.batch > 8 ? std::min<std::int64_t>(l.extra_width, 2) : l.extra_width);
      const std::int64_t taps = p.kernel_h * p.kernel_w, plane = p.out_height() * p.out_width();
      const auto weight_count = static_cast<std::size_t>(p.out_channels * (p.in_channels / p.groups) * taps);
      const auto offset_count = static_cast<std::size_t>(p.batch * 2 * p.offset_groups * taps * plane);
      const auto mask_count = p.use_mask ? static_cast<std::size_t>(p.batch * p.offset_groups * taps * plane) : 0;
      return rc::gen::map(
          rc::gen::tuple(map_values(dtype, p.batch * p.in_channels * p.height * p.width, p.height, p.width),
                         weights(weight_count), offsets(dtype, offset_count, std::max(p.height, p.width)),
                         masks(dtype, mask_count), biases(static_cast<std::size_t>(p.out_channels))),
          [p, dtype](std::tuple<std::vector<double>, std::vector<double>, std::vector<double>, std::vector<double>,
                                std::vector<double>> values) {
            DeformConv2dProblem q = p;
            std::tie(q.input, q.weight, q.offset, q.mask, q.bias) = std::move(values);
            for (double& w : q.weight) w = round_to(dtype, w);
            for (double& b : q.bias) b = round_to(dtype, b);
            return q;
          });
    });
  });
}

}  // namespace detfuzz::gen
