// The per-element math of detfuzz's own kernels, shared by the CUDA kernels (cuda_launch.cu)
// and their host emulation (host_launch.cpp): one function per output element (or per NMS
// mask word), templated on the storage type T, computing in acc_of<T>. Written the way
// production detection kernels are: torchvision 0.14.1 csrc/ops/cuda/nms_kernel.cu (64-box
// column blocks, one mask word per box and block), roi_align_kernel.cu and roi_pool_kernel.cu
// (one thread per output element), with three deliberate differences that make them a
// known-good baseline: everything is computed in the accumulate type (torchvision computes
// RoIAlign in T), the IoU is compared with the threshold in double, and a RoIPool bin starts
// from its first value instead of -FLT_MAX (which clamps fp64 maps).
#pragma once

#include "kernels/native/scalar.cuh"

namespace detfuzz::native {

constexpr int kNmsBlock = 64;  // boxes per column block: the bits of one mask word

struct RoiShape {
  std::int64_t batch, channels, height, width, rois, pooled_height, pooled_width;
  DETFUZZ_HD std::int64_t outputs() const { return rois * channels * pooled_height * pooled_width; }
};

inline namespace DETFUZZ_NATIVE_ARITHMETIC {

template <class T>
DETFUZZ_HD acc_of<T> box_iou_element(const T* a, const T* b) {
  using A = acc_of<T>;
  const A ax1 = Scalar<T>::load(a[0]), ay1 = Scalar<T>::load(a[1]), ax2 = Scalar<T>::load(a[2]),
          ay2 = Scalar<T>::load(a[3]);
  const A bx1 = Scalar<T>::load(b[0]), by1 = Scalar<T>::load(b[1]), bx2 = Scalar<T>::load(b[2]),
          by2 = Scalar<T>::load(b[3]);
  const A w = max_of(min_of(ax2, bx2) - max_of(ax1, bx1), A(0));
  const A h = max_of(min_of(ay2, by2) - max_of(ay1, by1), A(0));
  const A inter = w * h;
  return inter / (mul_rn(ax2 - ax1, ay2 - ay1) + mul_rn(bx2 - bx1, by2 - by1) - inter);
}

template <class T>
DETFUZZ_HD bool iou_above(const T* a, const T* b, double threshold) {
  return static_cast<double>(box_iou_element(a, b)) > threshold;
}

// Bit t of the word: box `row` (in score order) suppresses box first_column + t, a later
// box. `column_boxes` are the column block's [column_count, 4] boxes (on the device, the
// block's copy in shared memory).
template <class T>
DETFUZZ_HD std::uint64_t nms_mask_word(const T* row_box, std::int64_t row, const T* column_boxes,
                                       std::int64_t first_column, std::int64_t column_count, double threshold) {
  std::uint64_t word = 0;
  for (std::int64_t t = 0; t < column_count; ++t)
    if (first_column + t > row && iou_above(row_box, column_boxes + t * 4, threshold)) word |= std::uint64_t(1) << t;
  return word;
}

template <class A, class T>
DETFUZZ_HD A bilinear(const T* plane, std::int64_t height, std::int64_t width, A y, A x) {
  // !(inside) rather than (outside): a NaN coordinate takes this branch, not the int casts.
  if (!(y >= A(-1) && y <= A(height) && x >= A(-1) && x <= A(width))) return 0;
  y = max_of(y, A(0));
  x = max_of(x, A(0));
  std::int64_t y_low = static_cast<std::int64_t>(y), x_low = static_cast<std::int64_t>(x), y_high, x_high;
  if (y_low >= height - 1) {
    y_high = y_low = height - 1;
    y = static_cast<A>(y_low);
  } else {
    y_high = y_low + 1;
  }
  if (x_low >= width - 1) {
    x_high = x_low = width - 1;
    x = static_cast<A>(x_low);
  } else {
    x_high = x_low + 1;
  }
  const A ly = y - static_cast<A>(y_low), lx = x - static_cast<A>(x_low), hy = A(1) - ly, hx = A(1) - lx;
  const A v1 = Scalar<T>::load(plane[y_low * width + x_low]), v2 = Scalar<T>::load(plane[y_low * width + x_high]);
  const A v3 = Scalar<T>::load(plane[y_high * width + x_low]), v4 = Scalar<T>::load(plane[y_high * width + x_high]);
  return hy * hx * v1 + hy * lx * v2 + ly * hx * v3 + ly * lx * v4;
}

// What output element `index` ([roi, channel, ph, pw] row-major) of a RoI op reads: its
// RoI's row of the [K, 5] table, its channel's plane (null when the RoI's batch index is
// outside the batch: the element is 0; the host side refuses such input first) and its bin.
template <class T>
struct RoiElement {
  const T* roi;
  const T* plane;
  std::int64_t ph, pw;
};

template <class T>
DETFUZZ_HD RoiElement<T> roi_element(std::int64_t index, const RoiShape& s, const T* input, const T* rois) {
  const std::int64_t pw = index % s.pooled_width, ph = (index / s.pooled_width) % s.pooled_height;
  const std::int64_t c = (index / s.pooled_width / s.pooled_height) % s.channels;
  const std::int64_t k = index / s.pooled_width / s.pooled_height / s.channels;
  const T* roi = rois + k * 5;
  const std::int64_t n = static_cast<std::int64_t>(Scalar<T>::load(roi[0]));
  const T* plane = n < 0 || n >= s.batch ? nullptr : input + (n * s.channels + c) * s.height * s.width;
  return {roi, plane, ph, pw};
}

// Output element `index` of RoIAlign (forward) (roi_element says which).
template <class T>
DETFUZZ_HD T roi_align_element(std::int64_t index, const RoiShape& s, const T* input, const T* rois,
                               double spatial_scale, std::int64_t sampling_ratio, bool aligned) {
  using A = acc_of<T>;
  const auto [r, plane, ph, pw] = roi_element(index, s, input, rois);
  if (!plane) return Scalar<T>::store(A(0));
  const A scale = static_cast<A>(spatial_scale), offset = aligned ? A(0.5) : A(0);
  const A start_w = Scalar<T>::load(r[1]) * scale - offset, start_h = Scalar<T>::load(r[2]) * scale - offset;
  A roi_w = Scalar<T>::load(r[3]) * scale - offset - start_w, roi_h = Scalar<T>::load(r[4]) * scale - offset - start_h;
  if (!aligned) {  // legacy: a RoI is at least one pixel
    roi_w = max_of(roi_w, A(1));
    roi_h = max_of(roi_h, A(1));
  }
  const A bin_h = roi_h / static_cast<A>(s.pooled_height), bin_w = roi_w / static_cast<A>(s.pooled_width);
  const std::int64_t grid_h = sampling_ratio > 0 ? sampling_ratio : static_cast<std::int64_t>(ceil_of(bin_h));
  const std::int64_t grid_w = sampling_ratio > 0 ? sampling_ratio : static_cast<std::int64_t>(ceil_of(bin_w));
  const A count = static_cast<A>(max_of<std::int64_t>(grid_h * grid_w, 1));
  A sum = 0;
  for (std::int64_t iy = 0; iy < grid_h; ++iy) {
    const A y = start_h + static_cast<A>(ph) * bin_h + (static_cast<A>(iy) + A(0.5)) * bin_h / static_cast<A>(grid_h);
    for (std::int64_t ix = 0; ix < grid_w; ++ix) {
      const A x = start_w + static_cast<A>(pw) * bin_w + (static_cast<A>(ix) + A(0.5)) * bin_w / static_cast<A>(grid_w);
      sum += bilinear<A>(plane, s.height, s.width, y, x);
    }
  }
  return Scalar<T>::store(sum / count);
}

// Output element `index` of RoIPool (forward): the bin's maximum and its argmax (h * W + w
// in the map, -1 for an empty bin, whose value is 0).
template <class T>
DETFUZZ_HD T roi_pool_element(std::int64_t index, const RoiShape& s, const T* input, const T* rois,
                              double spatial_scale, std::int32_t* argmax) {
  using A = acc_of<T>;
  *argmax = -1;
  const auto [r, plane, ph, pw] = roi_element(index, s, input, rois);
  if (!plane) return Scalar<T>::store(A(0));
  const A scale = static_cast<A>(spatial_scale);
  const std::int64_t start_w = static_cast<std::int64_t>(round_half_away(Scalar<T>::load(r[1]) * scale));
  const std::int64_t start_h = static_cast<std::int64_t>(round_half_away(Scalar<T>::load(r[2]) * scale));
  const std::int64_t end_w = static_cast<std::int64_t>(round_half_away(Scalar<T>::load(r[3]) * scale));
  const std::int64_t end_h = static_cast<std::int64_t>(round_half_away(Scalar<T>::load(r[4]) * scale));
  const A bin_h = static_cast<A>(max_of<std::int64_t>(end_h - start_h + 1, 1)) / static_cast<A>(s.pooled_height);
  const A bin_w = static_cast<A>(max_of<std::int64_t>(end_w - start_w + 1, 1)) / static_cast<A>(s.pooled_width);
  auto clamp = [](std::int64_t v, std::int64_t hi) { return min_of(max_of(v, std::int64_t(0)), hi); };
  const std::int64_t h0 = clamp(static_cast<std::int64_t>(floor_of(static_cast<A>(ph) * bin_h)) + start_h, s.height);
  const std::int64_t h1 = clamp(static_cast<std::int64_t>(ceil_of(static_cast<A>(ph + 1) * bin_h)) + start_h, s.height);
  const std::int64_t w0 = clamp(static_cast<std::int64_t>(floor_of(static_cast<A>(pw) * bin_w)) + start_w, s.width);
  const std::int64_t w1 = clamp(static_cast<std::int64_t>(ceil_of(static_cast<A>(pw + 1) * bin_w)) + start_w, s.width);
  if (h1 <= h0 || w1 <= w0) return Scalar<T>::store(A(0));
  A best = Scalar<T>::load(plane[h0 * s.width + w0]);
  std::int32_t best_index = static_cast<std::int32_t>(h0 * s.width + w0);
  for (std::int64_t h = h0; h < h1; ++h)
    for (std::int64_t w = w0; w < w1; ++w) {
      const A v = Scalar<T>::load(plane[h * s.width + w]);
      if (v > best) {
        best = v;
        best_index = static_cast<std::int32_t>(h * s.width + w);
      }
    }
  *argmax = best_index;
  return Scalar<T>::store(best);
}

// Smooth L1 (beta > 0) or L1 (beta == 0, or `l1`) of one element, as torch 1.13 defines it.
template <class T>
DETFUZZ_HD acc_of<T> smooth_l1_element(T input, T target, double beta, bool l1) {
  using A = acc_of<T>;
  const A z = abs_of(Scalar<T>::load(input) - Scalar<T>::load(target));
  const A b = static_cast<A>(beta);
  if (l1 || !(b > A(0))) return z;
  return z < b ? A(0.5) * z * z / b : z - A(0.5) * b;
}

}  // inline namespace DETFUZZ_NATIVE_ARITHMETIC
}  // namespace detfuzz::native
