#include "kernels/mutants/emulated_targets.h"

#include <utility>

#include <algorithm>
#include <memory>
#include <cmath>
#include <numeric>
#include <optional>
#include <stdexcept>

#include "model/error.h"

namespace detfuzz::kernels {
namespace {

struct Rounding {
  DType compute;
  double r(double v) const { return round_to(compute, v); }
  double sub(double a, double b) const { return r(a - b); }
  double add(double a, double b) const { return r(a + b); }
  double mul(double a, double b) const { return r(a * b); }
  double div(double a, double b) const { return r(a / b); }
};

// `area_dtype` rounds the areas once more (a kernel that stores them in a narrower type);
// `area_extra` is the legacy +1 pixel added to each side of the areas only.
double iou_in(const Box& a, const Box& b, const Rounding& m, std::optional<DType> area_dtype = {},
              double area_extra = 0) {
  auto area = [&](const Box& x) {
    double value = m.mul(m.add(m.sub(x.x2, x.x1), area_extra), m.add(m.sub(x.y2, x.y1), area_extra));
    return area_dtype ? round_to(*area_dtype, value) : value;
  };
  double area_a = area(a);
  double area_b = area(b);
  double w = std::max(0.0, m.sub(std::min(a.x2, b.x2), std::max(a.x1, b.x1)));
  double h = std::max(0.0, m.sub(std::min(a.y2, b.y2), std::max(a.y1, b.y1)));
  double inter = m.mul(w, h);
  return m.div(inter, m.sub(m.add(area_a, area_b), inter));
}

Availability cpu_only(Device device) {
  if (device == Device::cuda) return {false, "emulated targets run on the CPU only"};
  return {};
}

template <class Problem>
Target<Problem> cpu_target(const std::string& name, std::string description) {
  Target<Problem> target;
  target.name = name;
  target.description = std::move(description);
  target.availability = cpu_only;
  return target;
}

HostTensor tensor(std::vector<std::int64_t> shape, DType dtype, std::vector<double> values) {
  return {std::move(shape), std::string(dtype_name(dtype)), "cpu", std::move(values)};
}

}  // namespace

double emulated_iou(const Box& a, const Box& b, DType compute) {
  Box ra{round_to(compute, a.x1), round_to(compute, a.y1), round_to(compute, a.x2), round_to(compute, a.y2)};
  Box rb{round_to(compute, b.x1), round_to(compute, b.y1), round_to(compute, b.x2), round_to(compute, b.y2)};
  return iou_in(ra, rb, {compute});
}

Target<NmsProblem> emulated_nms(const std::string& name, NmsVariant variant, std::string description) {
  auto target = cpu_target<NmsProblem>(name, std::move(description));
  auto calls = std::make_shared<int>(0);
  target.run = [variant, calls](const NmsProblem& problem, DType dtype, Device) {
    if (variant.unsupported_low_precision && (dtype == DType::fp16 || dtype == DType::bf16))
      throw Error(ErrorKind::unsupported, "this emulated target has no kernel for fp16/bf16");
    if (variant.throws_on_empty && problem.boxes.empty())
      throw std::runtime_error("emulated nms: cannot handle 0 boxes");
    const Rounding m{variant.storage_arithmetic ? dtype : accumulate_type(dtype)};
    const auto n = problem.boxes.size();
    std::vector<std::int64_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    if (!variant.assumes_sorted)
      std::sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) {
        if (problem.scores[a] != problem.scores[b]) return problem.scores[a] > problem.scores[b];
        return variant.reverse_ties ? a > b : a < b;
      });
    std::vector<bool> suppressed(n, false);
    std::vector<double> keep;
    for (std::size_t oi = 0; oi < n; ++oi) {
      auto i = order[oi];
      if (suppressed[i]) continue;
      keep.push_back(static_cast<double>(i));
      for (std::size_t oj = oi + 1; oj < n; ++oj) {
        auto j = order[oj];
        if (suppressed[j]) continue;
        double iou = iou_in(problem.boxes[i], problem.boxes[j], m,
                            variant.fp16_areas ? std::optional<DType>(DType::fp16) : std::nullopt);
        bool suppress = variant.greater_equal ? iou >= problem.iou_threshold : iou > problem.iou_threshold;
        if (suppress) suppressed[j] = true;
      }
    }
    if (variant.corrupt_every_third_call && ++*calls % 3 == 0) keep.push_back(static_cast<double>(n));
    if (variant.wrong_above_count && n > variant.wrong_above_count && !keep.empty()) keep.pop_back();
    std::vector<std::int64_t> shape{static_cast<std::int64_t>(keep.size())};
    return std::vector<HostTensor>{
        tensor(shape, variant.int32_output ? DType::int32 : DType::int64, keep)};
  };
  return target;
}

Target<BoxIouProblem> emulated_box_iou(const std::string& name, BoxIouVariant variant, std::string description) {
  auto target = cpu_target<BoxIouProblem>(name, std::move(description));
  auto calls = std::make_shared<int>(0);
  target.run = [variant, calls](const BoxIouProblem& problem, DType dtype, Device) {
    const Rounding m{variant.storage_arithmetic ? dtype : accumulate_type(dtype)};
    const auto rows = static_cast<std::int64_t>(problem.boxes1.size());
    const auto cols = static_cast<std::int64_t>(problem.boxes2.size());
    std::vector<double> values;
    for (const Box& a : problem.boxes1)
      for (const Box& b : problem.boxes2) values.push_back(iou_in(a, b, m, {}, variant.legacy_plus_one_area ? 1.0 : 0.0));
    DType output = variant.fp64_output ? DType::fp64 : accumulate_type(dtype);
    for (double& v : values) v = round_to(output, v);
    if (variant.corrupt_every_third_call && ++*calls % 3 == 0 && !values.empty()) values[0] += 0.25;
    std::vector<std::int64_t> shape = variant.transposed ? std::vector<std::int64_t>{cols, rows}
                                                         : std::vector<std::int64_t>{rows, cols};
    return std::vector<HostTensor>{tensor(shape, output, values)};
  };
  return target;
}

namespace {

// torchvision's RoIAlign geometry for one RoI, every step rounded by `m`: start, size (at
// least 1 when not aligned), bin size, grid and count (max(count, 1) in the forward; the
// backward's loops simply do not run for an empty grid).
struct EmulatedRoi {
  double start_h, start_w, bin_h, bin_w;
  int grid_h, grid_w;
};

EmulatedRoi emulated_roi(const RoiAlignProblem& p, const Roi& roi, const Rounding& m, bool aligned, double scale,
                         double offset) {
  EmulatedRoi g{};
  g.start_w = m.sub(m.mul(roi.x1, scale), offset);
  g.start_h = m.sub(m.mul(roi.y1, scale), offset);
  double size_w = m.sub(m.sub(m.mul(roi.x2, scale), offset), g.start_w);
  double size_h = m.sub(m.sub(m.mul(roi.y2, scale), offset), g.start_h);
  if (!aligned) {
    size_w = std::max(size_w, 1.0);
    size_h = std::max(size_h, 1.0);
  }
  g.bin_h = m.div(size_h, static_cast<double>(p.pooled_height));
  g.bin_w = m.div(size_w, static_cast<double>(p.pooled_width));
  g.grid_h = p.sampling_ratio > 0 ? static_cast<int>(p.sampling_ratio) : static_cast<int>(std::ceil(g.bin_h));
  g.grid_w = p.sampling_ratio > 0 ? static_cast<int>(p.sampling_ratio) : static_cast<int>(std::ceil(g.bin_w));
  return g;
}

// bilinear_interpolate(_gradient) at one sample: false outside [-1, size]; else the four
// pixels (y_low, x_low), (y_low, x_high), (y_high, x_low), (y_high, x_high) and their
// weights, rounded by `m`.
bool emulated_corners(double y, double x, std::int64_t height, std::int64_t width, const Rounding& m,
                      std::int64_t (&offset)[4], double (&weight)[4]) {
  if (y < -1.0 || y > static_cast<double>(height) || x < -1.0 || x > static_cast<double>(width)) return false;
  y = std::max(y, 0.0);
  x = std::max(x, 0.0);
  auto y_low = static_cast<std::int64_t>(y), x_low = static_cast<std::int64_t>(x);
  std::int64_t y_high = y_low + 1, x_high = x_low + 1;
  if (y_low >= height - 1) y = static_cast<double>(y_high = y_low = height - 1);
  if (x_low >= width - 1) x = static_cast<double>(x_high = x_low = width - 1);
  // A NaN position casts to a negative index: torchvision's backward checks for it (`if
  // (x_low >= 0 && ...)`); the forward reads there, which a port must not.
  if (y_low < 0 || x_low < 0) return false;
  const double ly = m.sub(y, static_cast<double>(y_low)), lx = m.sub(x, static_cast<double>(x_low));
  const double hy = m.sub(1.0, ly), hx = m.sub(1.0, lx);
  const double weights[4] = {m.mul(hy, hx), m.mul(hy, lx), m.mul(ly, hx), m.mul(ly, lx)};
  const std::int64_t offsets[4] = {y_low * width + x_low, y_low * width + x_high, y_high * width + x_low,
                                   y_high * width + x_high};
  for (int k = 0; k < 4; ++k) {
    weight[k] = weights[k];
    offset[k] = offsets[k];
  }
  return true;
}

// Sample (iy, ix) of bin (ph, pw): start + bin index * bin + (i + .5) * bin / grid.
double emulated_position(const Rounding& m, double start, std::int64_t index, double bin, int i, int grid) {
  return m.add(m.add(start, m.mul(static_cast<double>(index), bin)), m.div(m.mul(i + 0.5, bin), grid));
}

}  // namespace

Target<RoiAlignProblem> emulated_roi_align(const std::string& name, RoiAlignVariant variant, std::string description) {
  auto target = cpu_target<RoiAlignProblem>(name, std::move(description));
  target.run = [variant](const RoiAlignProblem& p, DType dtype, Device) {
    const Rounding m{accumulate_type(dtype)};
    const FeatureMap& map = p.input;
    const double scale = variant.ignores_spatial_scale ? 1.0 : m.r(p.spatial_scale);
    const bool aligned = p.aligned || variant.position_sensitive;
    const double offset = aligned && !variant.ignores_aligned ? 0.5 : 0.0;
    const std::int64_t bins = p.pooled_height * p.pooled_width;
    if (variant.position_sensitive && (bins <= 0 || map.channels % bins != 0))
      throw std::invalid_argument("input channels must be a multiple of pooling height * pooling width");
    const std::int64_t channels_out = variant.position_sensitive ? map.channels / bins : map.channels;
    std::vector<double> out, channel_mapping;
    for (const Roi& roi : p.rois) {
      const auto n = variant.ignores_batch_index ? 0 : static_cast<std::int64_t>(roi.batch_index);
      const EmulatedRoi g = emulated_roi(p, roi, m, aligned, scale, offset);
      const double count = m.r(std::max(g.grid_h * g.grid_w, 1));
      for (std::int64_t c_out = 0; c_out < channels_out; ++c_out)
        for (std::int64_t ph = 0; ph < p.pooled_height; ++ph)
          for (std::int64_t pw = 0; pw < p.pooled_width; ++pw) {
            const std::int64_t c = !variant.position_sensitive ? c_out
                                   : variant.channel_off_by_one ? (c_out * bins + ph * p.pooled_width + pw + 1) % map.channels
                                                                : c_out * bins + ph * p.pooled_width + pw;
            channel_mapping.push_back(static_cast<double>(c_out * bins + ph * p.pooled_width + pw));
            const double* plane = &map.values[static_cast<std::size_t>((n * map.channels + c) * map.height * map.width)];
            double sum = 0;
            for (int iy = 0; iy < g.grid_h; ++iy) {
              const double y = emulated_position(m, g.start_h, ph, g.bin_h, iy, g.grid_h);
              for (int ix = 0; ix < g.grid_w; ++ix) {
                std::int64_t at[4];
                double w[4];
                if (!emulated_corners(y, emulated_position(m, g.start_w, pw, g.bin_w, ix, g.grid_w), map.height,
                                      map.width, m, at, w))
                  continue;
                double term = m.mul(w[0], plane[at[0]]);
                for (int k = 1; k < 4; ++k) term = m.add(term, m.mul(w[k], plane[at[k]]));
                sum = m.add(sum, term);
              }
            }
            out.push_back(round_to(dtype, m.div(sum, count)));
          }
    }
    std::vector<std::int64_t> shape{static_cast<std::int64_t>(p.rois.size()), channels_out, p.pooled_height,
                                    p.pooled_width};
    if (variant.position_sensitive)
      return std::vector<HostTensor>{tensor(shape, dtype, out), {shape, "int32", "cpu", channel_mapping}};
    return std::vector<HostTensor>{tensor(shape, dtype, out)};
  };
  return target;
}

Target<RoiAlignBackwardProblem> emulated_roi_align_backward(const std::string& name, RoiAlignBackwardVariant variant,
                                                            std::string description) {
  auto target = cpu_target<RoiAlignBackwardProblem>(name, std::move(description));
  target.run = [variant](const RoiAlignBackwardProblem& problem, DType dtype, Device) {
    const Rounding m{variant.storage_arithmetic ? dtype : accumulate_type(dtype)};
    const RoiAlignProblem& p = problem.forward;
    const FeatureMap& map = p.input;
    const double scale = variant.ignores_spatial_scale ? 1.0 : m.r(p.spatial_scale);
    const bool aligned = p.aligned || variant.position_sensitive;
    const std::int64_t bins = p.pooled_height * p.pooled_width;
    const std::int64_t channels_out = variant.position_sensitive ? map.channels / bins : map.channels;
    const auto plane = map.height * map.width;
    std::vector<double> grad_input(static_cast<std::size_t>(map.batch * map.channels * plane), 0.0);
    for (std::size_t k = 0; k < p.rois.size(); ++k) {
      const Roi& roi = p.rois[k];
      const auto n = static_cast<std::int64_t>(roi.batch_index);
      if (n < 0 || n >= map.batch) throw std::invalid_argument("RoI batch index outside the batch");
      const EmulatedRoi g = emulated_roi(p, roi, m, aligned, scale, aligned ? 0.5 : 0.0);
      const double count = m.r(g.grid_h * g.grid_w);
      for (std::int64_t c_out = 0; c_out < channels_out; ++c_out)
        for (std::int64_t ph = 0; ph < p.pooled_height; ++ph)
          for (std::int64_t pw = 0; pw < p.pooled_width; ++pw) {
            const std::int64_t bin = ph * p.pooled_width + pw;
            std::int64_t c = variant.position_sensitive ? c_out * bins + bin : c_out;
            if (variant.channel_off_by_one) c = (c + 1) % map.channels;
            const double grad = problem.grad[(k * static_cast<std::size_t>(channels_out) + static_cast<std::size_t>(c_out)) *
                                                 static_cast<std::size_t>(bins) + static_cast<std::size_t>(bin)];
            double* into = &grad_input[static_cast<std::size_t>((n * map.channels + c) * plane)];
            for (int iy = 0; iy < g.grid_h; ++iy) {
              const double y = emulated_position(m, g.start_h, ph, g.bin_h, iy, g.grid_h);
              for (int ix = 0; ix < g.grid_w; ++ix) {
                std::int64_t at[4];
                double w[4];
                if (!emulated_corners(y, emulated_position(m, g.start_w, pw, g.bin_w, ix, g.grid_w), map.height,
                                      map.width, m, at, w))
                  continue;
                for (int corner = 0; corner < (variant.drops_last_corner ? 3 : 4); ++corner)
                  into[at[corner]] = m.add(into[at[corner]], m.div(m.mul(grad, w[corner]), count));
              }
            }
          }
    }
    for (double& v : grad_input) v = round_to(dtype, v);
    return std::vector<HostTensor>{tensor({map.batch, map.channels, map.height, map.width}, dtype, grad_input)};
  };
  return target;
}

Target<RoiPoolBackwardProblem> emulated_roi_pool_backward(const std::string& name, RoiPoolBackwardVariant variant,
                                                          std::string description) {
  auto target = cpu_target<RoiPoolBackwardProblem>(name, std::move(description));
  target.run = [variant](const RoiPoolBackwardProblem& problem, DType dtype, Device) {
    const Rounding m{variant.storage_arithmetic ? dtype : accumulate_type(dtype)};
    const RoiPoolProblem& p = problem.forward;
    const FeatureMap& map = p.input;
    const auto bins = static_cast<std::size_t>(p.pooled_height * p.pooled_width);
    const auto plane = map.height * map.width;
    std::vector<double> grad_input(static_cast<std::size_t>(map.batch * map.channels * plane), 0.0);
    for (std::size_t k = 0; k < p.rois.size(); ++k) {
      const auto n = static_cast<std::int64_t>(p.rois[k].batch_index);
      if (n < 0 || n >= map.batch) throw std::invalid_argument("RoI batch index outside the batch");
      for (std::int64_t c = 0; c < map.channels; ++c)
        for (std::size_t bin = 0; bin < bins; ++bin) {
          const std::size_t i = (k * static_cast<std::size_t>(map.channels) + static_cast<std::size_t>(c)) * bins + bin;
          if (problem.argmax[i] < 0) continue;
          const std::int64_t channel = variant.channel_off_by_one ? (c + 1) % map.channels : c;
          double& into = grad_input[static_cast<std::size_t>((n * map.channels + channel) * plane + problem.argmax[i])];
          into = variant.assigns ? m.r(problem.grad[i]) : m.add(into, problem.grad[i]);
        }
    }
    for (double& v : grad_input) v = round_to(dtype, v);
    return std::vector<HostTensor>{tensor({map.batch, map.channels, map.height, map.width}, dtype, grad_input)};
  };
  return target;
}

namespace {

// A PSRoIPool bin as torchvision's forward and backward kernels compute it (the RoI's
// corners rounded half away from zero, bin_size = max(end - start, 1) / pooled, each bin
// [floor(p * bin_size), ceil((p + 1) * bin_size)) offset by the start and clipped), every
// step rounded by `m`.
struct PsBin {
  std::int64_t h0, h1, w0, w1;
  bool empty() const { return h1 <= h0 || w1 <= w0; }
  double area() const { return static_cast<double>((h1 - h0) * (w1 - w0)); }
};

struct PsRoiGeometry {
  std::int64_t start_h, start_w;
  double bin_h, bin_w;
  std::int64_t height_limit, width_limit;

  PsRoiGeometry(const RoiPoolProblem& p, const Roi& roi, const Rounding& m, const PsRoiPoolVariant& variant) {
    const double scale = variant.ignores_spatial_scale ? 1.0 : m.r(p.spatial_scale);
    start_w = static_cast<std::int64_t>(std::round(m.mul(roi.x1, scale)));
    start_h = static_cast<std::int64_t>(std::round(m.mul(roi.y1, scale)));
    const auto end_w = static_cast<std::int64_t>(std::round(m.mul(roi.x2, scale)));
    const auto end_h = static_cast<std::int64_t>(std::round(m.mul(roi.y2, scale)));
    bin_h = m.div(static_cast<double>(std::max<std::int64_t>(end_h - start_h, 1)), static_cast<double>(p.pooled_height));
    bin_w = m.div(static_cast<double>(std::max<std::int64_t>(end_w - start_w, 1)), static_cast<double>(p.pooled_width));
    height_limit = variant.clips_before_last_pixel ? p.input.height - 1 : p.input.height;
    width_limit = variant.clips_before_last_pixel ? p.input.width - 1 : p.input.width;
  }

  PsBin bin(std::int64_t ph, std::int64_t pw, const Rounding& m) const {
    auto clipped = [](double v, std::int64_t start, std::int64_t limit) {
      return std::clamp<std::int64_t>(static_cast<std::int64_t>(v) + start, 0, limit);
    };
    return {clipped(std::floor(m.mul(static_cast<double>(ph), bin_h)), start_h, height_limit),
            clipped(std::ceil(m.mul(static_cast<double>(ph + 1), bin_h)), start_h, height_limit),
            clipped(std::floor(m.mul(static_cast<double>(pw), bin_w)), start_w, width_limit),
            clipped(std::ceil(m.mul(static_cast<double>(pw + 1), bin_w)), start_w, width_limit)};
  }
};

void check_ps_channels(const RoiPoolProblem& p) {
  const std::int64_t group = p.pooled_height * p.pooled_width;
  if (group <= 0 || p.input.channels % group != 0)
    throw std::invalid_argument("input channels must be a multiple of pooling height * pooling width");
}

}  // namespace

Target<RoiPoolProblem> emulated_ps_roi_pool(const std::string& name, PsRoiPoolVariant variant, std::string description) {
  auto target = cpu_target<RoiPoolProblem>(name, std::move(description));
  target.run = [variant](const RoiPoolProblem& p, DType dtype, Device) {
    const Rounding m{variant.storage_arithmetic ? dtype : accumulate_type(dtype)};
    const FeatureMap& map = p.input;
    check_ps_channels(p);
    const std::int64_t group = p.pooled_height * p.pooled_width;
    std::vector<double> out, channels;
    for (const Roi& roi : p.rois) {
      const auto n = static_cast<std::int64_t>(roi.batch_index);
      const PsRoiGeometry g(p, roi, m, variant);
      std::int64_t c_in = 0;
      for (std::int64_t c_out = 0; c_out < map.channels / group; ++c_out)
        for (std::int64_t ph = 0; ph < p.pooled_height; ++ph)
          for (std::int64_t pw = 0; pw < p.pooled_width; ++pw, ++c_in) {
            const PsBin bin = g.bin(ph, pw, m);
            const std::int64_t read = variant.channel_off_by_one ? (c_in + 1) % map.channels : c_in;
            double sum = 0;
            for (std::int64_t h = bin.h0; h < bin.h1; ++h)
              for (std::int64_t w = bin.w0; w < bin.w1; ++w) sum = m.add(sum, map.at(n, read, h, w));
            out.push_back(bin.empty() ? 0.0 : round_to(dtype, m.div(sum, bin.area())));
            channels.push_back(static_cast<double>(c_in));
          }
    }
    const std::vector<std::int64_t> shape{static_cast<std::int64_t>(p.rois.size()), map.channels / group,
                                          p.pooled_height, p.pooled_width};
    return std::vector<HostTensor>{tensor(shape, dtype, out), {shape, "int32", "cpu", channels}};
  };
  return target;
}

Target<PsRoiPoolBackwardProblem> emulated_ps_roi_pool_backward(const std::string& name, PsRoiPoolVariant variant,
                                                               std::string description) {
  auto target = cpu_target<PsRoiPoolBackwardProblem>(name, std::move(description));
  target.run = [variant](const PsRoiPoolBackwardProblem& problem, DType dtype, Device) {
    const Rounding m{variant.storage_arithmetic ? dtype : accumulate_type(dtype)};
    const RoiPoolProblem& p = problem.forward;
    const FeatureMap& map = p.input;
    check_ps_channels(p);
    const std::int64_t group = p.pooled_height * p.pooled_width, plane = map.height * map.width;
    std::vector<double> grad_input(static_cast<std::size_t>(map.batch * map.channels * plane), 0.0);
    for (std::size_t k = 0; k < p.rois.size(); ++k) {
      const auto n = static_cast<std::int64_t>(p.rois[k].batch_index);
      if (n < 0 || n >= map.batch) throw std::invalid_argument("RoI batch index outside the batch");
      const PsRoiGeometry g(p, p.rois[k], m, variant);
      // torchvision's order: bins outer, output channels inner.
      for (std::int64_t ph = 0; ph < p.pooled_height; ++ph)
        for (std::int64_t pw = 0; pw < p.pooled_width; ++pw) {
          const PsBin bin = g.bin(ph, pw, m);
          for (std::int64_t c_out = 0; c_out < map.channels / group; ++c_out) {
            const std::int64_t c_in = (c_out * p.pooled_height + ph) * p.pooled_width + pw;
            const std::int64_t into = variant.channel_off_by_one ? (c_in + 1) % map.channels : c_in;
            const double share = bin.empty() ? 0.0 : m.div(problem.grad[k * static_cast<std::size_t>(map.channels) +
                                                                         static_cast<std::size_t>(c_in)],
                                                           bin.area());
            double* channel = &grad_input[static_cast<std::size_t>((n * map.channels + into) * plane)];
            for (std::int64_t h = bin.h0; h < bin.h1; ++h)
              for (std::int64_t w = bin.w0; w < bin.w1; ++w) channel[h * map.width + w] = m.add(channel[h * map.width + w], share);
          }
        }
    }
    for (double& v : grad_input) v = round_to(dtype, v);
    return std::vector<HostTensor>{tensor({map.batch, map.channels, map.height, map.width}, dtype, grad_input)};
  };
  return target;
}

Target<DeformConv2dProblem> emulated_deform_conv2d(const std::string& name, DeformConv2dVariant variant,
                                                   std::string description) {
  auto target = cpu_target<DeformConv2dProblem>(name, std::move(description));
  target.run = [variant](const DeformConv2dProblem& p, DType dtype, Device) {
    if (p.kernel_h <= 0 || p.kernel_w <= 0 || p.stride_h <= 0 || p.stride_w <= 0 || p.pad_h < 0 || p.pad_w < 0 ||
        p.dilation_h <= 0 || p.dilation_w <= 0 || p.groups <= 0 || p.offset_groups <= 0 ||
        p.in_channels % p.groups != 0 || p.out_channels % p.groups != 0 || p.in_channels % p.offset_groups != 0 ||
        p.out_height() <= 0 || p.out_width() <= 0)
      throw std::invalid_argument("deform_conv2d: shapes the kernel refuses");
    const Rounding m{variant.storage_arithmetic ? dtype : accumulate_type(dtype)};
    const std::int64_t taps = p.kernel_h * p.kernel_w, oh = p.out_height(), ow = p.out_width();
    const std::int64_t group_channels = p.in_channels / p.groups, group_outputs = p.out_channels / p.groups;
    const std::int64_t channels_per_offset_group = p.in_channels / p.offset_groups;
    auto map = [&](std::int64_t b, std::int64_t c, std::int64_t y, std::int64_t x) {
      if (y < 0 || y >= p.height || x < 0 || x >= p.width) return 0.0;
      return p.input[static_cast<std::size_t>(((b * p.in_channels + c) * p.height + y) * p.width + x)];
    };
    std::vector<double> out;
    for (std::int64_t b = 0; b < p.batch; ++b)
      for (std::int64_t o = 0; o < p.out_channels; ++o)
        for (std::int64_t oy = 0; oy < oh; ++oy)
          for (std::int64_t ox = 0; ox < ow; ++ox) {
            double sum = 0;
            for (std::int64_t gc = 0; gc < group_channels; ++gc) {
              const std::int64_t c = (o / group_outputs) * group_channels + gc;
              const std::int64_t og = c / channels_per_offset_group;
              for (std::int64_t tap = 0; tap < taps; ++tap) {
                auto offset = [&](std::int64_t component) {
                  return p.offset[static_cast<std::size_t>(
                      (((b * p.offset_groups + og) * 2 * taps + 2 * tap + component) * oh + oy) * ow + ox)];
                };
                const double dy = offset(variant.swaps_offset_xy ? 1 : 0), dx = offset(variant.swaps_offset_xy ? 0 : 1);
                const double y = m.add(static_cast<double>(oy * p.stride_h - p.pad_h + (tap / p.kernel_w) * p.dilation_h), dy);
                const double x = m.add(static_cast<double>(ox * p.stride_w - p.pad_w + (tap % p.kernel_w) * p.dilation_w), dx);
                double sample = 0;
                if (!(y <= -1 || p.height <= y || x <= -1 || p.width <= x)) {
                  const double y_low = std::floor(y), x_low = std::floor(x);
                  const auto r = static_cast<std::int64_t>(y_low), s = static_cast<std::int64_t>(x_low);
                  const double ly = y - y_low, lx = x - x_low, hy = m.sub(1, ly), hx = m.sub(1, lx);
                  sample = m.add(m.add(m.add(m.mul(m.mul(hy, hx), map(b, c, r, s)), m.mul(m.mul(hy, lx), map(b, c, r, s + 1))),
                                       m.mul(m.mul(ly, hx), map(b, c, r + 1, s))),
                                 m.mul(m.mul(ly, lx), map(b, c, r + 1, s + 1)));
                }
                if (p.use_mask && !variant.ignores_mask)
                  sample = m.mul(p.mask[static_cast<std::size_t>((((b * p.offset_groups + og) * taps + tap) * oh + oy) * ow + ox)],
                                 sample);
                const double w = p.weight[static_cast<std::size_t>((o * group_channels + gc) * taps + tap)];
                sum = m.add(sum, m.mul(w, sample));
              }
            }
            out.push_back(round_to(dtype, m.add(sum, p.bias[static_cast<std::size_t>(o)])));
          }
    return std::vector<HostTensor>{tensor({p.batch, p.out_channels, oh, ow}, dtype, std::move(out))};
  };
  return target;
}

}  // namespace detfuzz::kernels
