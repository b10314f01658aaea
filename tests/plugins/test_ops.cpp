// A tiny op library for the plugin tests (built as detfuzz_test_plugin.so, loaded with
// --load): a correct nms and roi_align, each with a deliberately wrong twin, and an nms whose
// schema breaks the contract. Written the way a user's extension is (TORCH_LIBRARY, one
// templated body per op over fp16 / bf16 / fp32 / fp64), with torchvision 0.14.1's semantics
// (torchvision/csrc/ops/cpu/nms_kernel.cpp, roi_align_kernel.cpp). The correct ops compute in
// double whatever the dtype, so no intermediate overflows or rounds: over any input the
// oracle's verdict on them is clean, and a finding on a twin is its flaw alone.
#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <torch/library.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <numeric>
#include <vector>

namespace {

enum class NmsFlaw { none, never_visits_last_box };

at::Tensor nms_with(const at::Tensor& dets, const at::Tensor& scores, double iou_threshold, NmsFlaw flaw) {
  TORCH_CHECK(dets.dim() == 2 && dets.size(1) == 4, "nms: dets must be [N, 4], got ", dets.sizes());
  TORCH_CHECK(scores.dim() == 1 && scores.size(0) == dets.size(0), "nms: scores must be [", dets.size(0),
              "], got ", scores.sizes());
  const int64_t n = dets.size(0);
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  const at::Tensor score_values = scores.to(at::kDouble).contiguous();
  const double* score = score_values.data_ptr<double>();
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return score[a] > score[b]; });

  std::vector<int64_t> keep;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, dets.scalar_type(), "detfuzz_test::nms", [&] {
    using acc_t = double;
    const at::Tensor boxes = dets.contiguous();
    const scalar_t* b = boxes.data_ptr<scalar_t>();
    auto coordinate = [&](int64_t box, int k) { return static_cast<acc_t>(b[box * 4 + k]); };
    auto area = [&](int64_t box) {
      return (coordinate(box, 2) - coordinate(box, 0)) * (coordinate(box, 3) - coordinate(box, 1));
    };
    std::vector<char> suppressed(n, 0);
    const int64_t visited = flaw == NmsFlaw::never_visits_last_box ? n - 1 : n;  // the off-by-one
    for (int64_t position = 0; position < visited; ++position) {
      const int64_t i = order[position];
      if (suppressed[i]) continue;
      keep.push_back(i);
      const acc_t area_i = area(i);
      for (int64_t later = position + 1; later < n; ++later) {
        const int64_t j = order[later];
        if (suppressed[j]) continue;
        const acc_t w = std::max(acc_t(0), std::min(coordinate(i, 2), coordinate(j, 2)) -
                                               std::max(coordinate(i, 0), coordinate(j, 0)));
        const acc_t h = std::max(acc_t(0), std::min(coordinate(i, 3), coordinate(j, 3)) -
                                               std::max(coordinate(i, 1), coordinate(j, 1)));
        const acc_t inter = w * h;
        const acc_t iou = inter / (area_i + area(j) - inter);
        if (static_cast<double>(iou) > iou_threshold) suppressed[j] = 1;
      }
    }
  });
  at::Tensor result = at::empty({static_cast<int64_t>(keep.size())}, dets.options().dtype(at::kLong));
  std::copy(keep.begin(), keep.end(), result.data_ptr<int64_t>());
  return result;
}

at::Tensor nms(const at::Tensor& dets, const at::Tensor& scores, double iou_threshold) {
  return nms_with(dets, scores, iou_threshold, NmsFlaw::none);
}

at::Tensor nms_never_visits_last_box(const at::Tensor& dets, const at::Tensor& scores, double iou_threshold) {
  return nms_with(dets, scores, iou_threshold, NmsFlaw::never_visits_last_box);
}

at::Tensor nms_int_threshold(const at::Tensor& dets, const at::Tensor& scores, int64_t iou_threshold) {
  return nms_with(dets, scores, static_cast<double>(iou_threshold), NmsFlaw::none);
}

enum class RoiAlignFlaw { none, ignores_aligned_offset };

template <class acc_t, class scalar_t>
acc_t bilinear(const scalar_t* plane, int64_t height, int64_t width, acc_t y, acc_t x) {
  // !(inside) rather than (outside): a NaN coordinate takes this branch, not the int casts.
  if (!(y >= -1 && y <= height && x >= -1 && x <= width)) return 0;
  y = std::max(y, acc_t(0));
  x = std::max(x, acc_t(0));
  int64_t y_low = static_cast<int64_t>(y), x_low = static_cast<int64_t>(x), y_high, x_high;
  if (y_low >= height - 1) {
    y_high = y_low = height - 1;
    y = static_cast<acc_t>(y_low);
  } else {
    y_high = y_low + 1;
  }
  if (x_low >= width - 1) {
    x_high = x_low = width - 1;
    x = static_cast<acc_t>(x_low);
  } else {
    x_high = x_low + 1;
  }
  const acc_t ly = y - y_low, lx = x - x_low, hy = 1 - ly, hx = 1 - lx;
  auto v = [&](int64_t yy, int64_t xx) { return static_cast<acc_t>(plane[yy * width + xx]); };
  return hy * hx * v(y_low, x_low) + hy * lx * v(y_low, x_high) + ly * hx * v(y_high, x_low) +
         ly * lx * v(y_high, x_high);
}

at::Tensor roi_align_with(const at::Tensor& input, const at::Tensor& rois, double spatial_scale, int64_t pooled_height,
                          int64_t pooled_width, int64_t sampling_ratio, bool aligned, RoiAlignFlaw flaw) {
  TORCH_CHECK(input.dim() == 4, "roi_align: input must be [N, C, H, W], got ", input.sizes());
  TORCH_CHECK(rois.dim() == 2 && rois.size(1) == 5, "roi_align: rois must be [K, 5], got ", rois.sizes());
  TORCH_CHECK(pooled_height > 0 && pooled_width > 0, "roi_align: pooled sizes must be positive");
  const int64_t batch = input.size(0), channels = input.size(1), height = input.size(2), width = input.size(3);
  at::Tensor output = at::zeros({rois.size(0), channels, pooled_height, pooled_width}, input.options());
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, input.scalar_type(), "detfuzz_test::roi_align", [&] {
    using acc_t = double;
    const at::Tensor features = input.contiguous();
    const at::Tensor boxes = rois.to(input.scalar_type()).contiguous();
    const scalar_t* map = features.data_ptr<scalar_t>();
    const scalar_t* roi = boxes.data_ptr<scalar_t>();
    scalar_t* out = output.data_ptr<scalar_t>();
    const acc_t offset = aligned && flaw != RoiAlignFlaw::ignores_aligned_offset ? acc_t(0.5) : acc_t(0);
    for (int64_t k = 0; k < rois.size(0); ++k) {
      const scalar_t* r = roi + k * 5;
      const double batch_value = static_cast<double>(r[0]);
      TORCH_CHECK(batch_value >= 0 && batch_value < static_cast<double>(batch), "roi_align: RoI ", k,
                  " has batch index ", batch_value, ", outside 0..", batch - 1);
      const int64_t n = static_cast<int64_t>(batch_value);
      const acc_t start_w = static_cast<acc_t>(r[1]) * static_cast<acc_t>(spatial_scale) - offset;
      const acc_t start_h = static_cast<acc_t>(r[2]) * static_cast<acc_t>(spatial_scale) - offset;
      const acc_t end_w = static_cast<acc_t>(r[3]) * static_cast<acc_t>(spatial_scale) - offset;
      const acc_t end_h = static_cast<acc_t>(r[4]) * static_cast<acc_t>(spatial_scale) - offset;
      acc_t roi_w = end_w - start_w, roi_h = end_h - start_h;
      if (!aligned) {  // legacy: a RoI is at least one pixel
        roi_w = std::max(roi_w, acc_t(1));
        roi_h = std::max(roi_h, acc_t(1));
      }
      const acc_t bin_h = roi_h / static_cast<acc_t>(pooled_height), bin_w = roi_w / static_cast<acc_t>(pooled_width);
      const double grid_h_value = sampling_ratio > 0 ? sampling_ratio : std::ceil(static_cast<double>(bin_h));
      const double grid_w_value = sampling_ratio > 0 ? sampling_ratio : std::ceil(static_cast<double>(bin_w));
      TORCH_CHECK(std::isfinite(grid_h_value) && std::isfinite(grid_w_value) && grid_h_value * grid_w_value < 1e7,
                  "roi_align: RoI ", k, " needs a sampling grid of ", grid_h_value, " x ", grid_w_value);
      const int64_t grid_h = static_cast<int64_t>(grid_h_value), grid_w = static_cast<int64_t>(grid_w_value);
      const acc_t count = static_cast<acc_t>(std::max<int64_t>(grid_h * grid_w, 1));
      for (int64_t c = 0; c < channels; ++c) {
        const scalar_t* plane = map + (n * channels + c) * height * width;
        for (int64_t ph = 0; ph < pooled_height; ++ph)
          for (int64_t pw = 0; pw < pooled_width; ++pw) {
            acc_t sum = 0;
            for (int64_t iy = 0; iy < grid_h; ++iy) {
              const acc_t y = start_h + ph * bin_h + (iy + acc_t(0.5)) * bin_h / static_cast<acc_t>(grid_h);
              for (int64_t ix = 0; ix < grid_w; ++ix) {
                const acc_t x = start_w + pw * bin_w + (ix + acc_t(0.5)) * bin_w / static_cast<acc_t>(grid_w);
                sum += bilinear<acc_t>(plane, height, width, y, x);
              }
            }
            out[((k * channels + c) * pooled_height + ph) * pooled_width + pw] = static_cast<scalar_t>(sum / count);
          }
      }
    }
  });
  return output;
}

at::Tensor roi_align(const at::Tensor& input, const at::Tensor& rois, double spatial_scale, int64_t pooled_height,
                     int64_t pooled_width, int64_t sampling_ratio, bool aligned) {
  return roi_align_with(input, rois, spatial_scale, pooled_height, pooled_width, sampling_ratio, aligned,
                        RoiAlignFlaw::none);
}

at::Tensor roi_align_ignores_aligned_offset(const at::Tensor& input, const at::Tensor& rois, double spatial_scale,
                                            int64_t pooled_height, int64_t pooled_width, int64_t sampling_ratio,
                                            bool aligned) {
  return roi_align_with(input, rois, spatial_scale, pooled_height, pooled_width, sampling_ratio, aligned,
                        RoiAlignFlaw::ignores_aligned_offset);
}

}  // namespace

// A correct nms that hangs or crashes on a share of its inputs, for measuring what a fault
// costs a campaign (bench/fault_cost.sh): DETFUZZ_TEST_FAULT=hang:10 never returns on 10% of
// the inputs, crash:1 raises SIGSEGV on 1%, slow:5 takes 300 ms on 5% (and answers
// correctly: a slow case, not a hang). Which inputs is a hash of the boxes, so a
// faulting case faults again when replayed or shrunk.
at::Tensor nms_faulty(const at::Tensor& dets, const at::Tensor& scores, double iou_threshold) {
  const char* setting = std::getenv("DETFUZZ_TEST_FAULT");
  const std::string fault = setting ? setting : "";
  const auto colon = fault.find(':');
  if (colon != std::string::npos) {
    const int percent = std::atoi(fault.c_str() + colon + 1);
    const at::Tensor values = dets.to(at::kDouble).contiguous();
    std::uint64_t hash = 1469598103934665603ull ^ static_cast<std::uint64_t>(values.numel());
    const double* v = values.data_ptr<double>();
    for (int64_t i = 0; i < values.numel(); ++i) {
      std::uint64_t bits;
      std::memcpy(&bits, &v[i], sizeof bits);
      hash = (hash ^ bits) * 1099511628211ull;
    }
    if (static_cast<int>((hash >> 17) % 100) < percent) {
      if (fault.compare(0, colon, "crash") == 0) std::raise(SIGSEGV);
      if (fault.compare(0, colon, "slow") == 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));
      if (fault.compare(0, colon, "hang") == 0)
        for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
    }
  }
  return nms_with(dets, scores, iou_threshold, NmsFlaw::none);
}

TORCH_LIBRARY(detfuzz_test, m) {
  m.def("nms_faulty(Tensor dets, Tensor scores, float iou_threshold) -> Tensor");
  m.def("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor");
  m.def("nms_never_visits_last_box(Tensor dets, Tensor scores, float iou_threshold) -> Tensor");
  m.def("nms_int_threshold(Tensor dets, Tensor scores, int iou_threshold) -> Tensor");
  m.def("roi_align(Tensor input, Tensor rois, float spatial_scale, int pooled_height, int pooled_width, "
        "int sampling_ratio, bool aligned) -> Tensor");
  m.def("roi_align_ignores_aligned_offset(Tensor input, Tensor rois, float spatial_scale, int pooled_height, "
        "int pooled_width, int sampling_ratio, bool aligned) -> Tensor");
}

TORCH_LIBRARY_IMPL(detfuzz_test, CPU, m) {
  m.impl("nms", nms);
  m.impl("nms_faulty", nms_faulty);
  m.impl("nms_never_visits_last_box", nms_never_visits_last_box);
  m.impl("nms_int_threshold", nms_int_threshold);
  m.impl("roi_align", roi_align);
  m.impl("roi_align_ignores_aligned_offset", roi_align_ignores_aligned_offset);
}
