// Running detfuzz's own kernels over their grid: on the host (emulation: the same element
// functions, the same grid, in order) or on a CUDA device (cuda_launch.cu, built when nvcc is
// found). Both take and return host arrays; the CUDA path moves them with cudaMalloc/cudaMemcpy.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/native/elements.cuh"

namespace detfuzz::native {

enum class Backend { host_emulation, cuda };

// The launchers, declared once for each way the arithmetic is compiled:
//   nms_masks  [n, ceil(n / 64)] words for boxes [n, 4] already in score order
//   box_iou    pairwise IoU [n, m] in the accumulate type
//   roi_align, roi_pool (with argmax)  forward, [rois, channels, pooled h, pooled w]
//   smooth_l1  per-element losses in the accumulate type (the reduction, sequential in
//              element order, is the caller's, the same for both backends)
#define DETFUZZ_NATIVE_LAUNCHERS                                                                                 \
  template <class T>                                                                                             \
  std::vector<std::uint64_t> nms_masks(Backend backend, const std::vector<T>& sorted_boxes, std::int64_t n,     \
                                       double threshold);                                                        \
  template <class T>                                                                                             \
  std::vector<acc_of<T>> box_iou(Backend backend, const std::vector<T>& boxes1, const std::vector<T>& boxes2);  \
  template <class T>                                                                                             \
  std::vector<T> roi_align(Backend backend, const RoiShape& shape, const std::vector<T>& input,                 \
                           const std::vector<T>& rois, double spatial_scale, std::int64_t sampling_ratio,        \
                           bool aligned);                                                                        \
  template <class T>                                                                                             \
  std::vector<T> roi_pool(Backend backend, const RoiShape& shape, const std::vector<T>& input,                  \
                          const std::vector<T>& rois, double spatial_scale, std::vector<std::int32_t>& argmax); \
  template <class T>                                                                                             \
  std::vector<acc_of<T>> smooth_l1(Backend backend, const std::vector<T>& input, const std::vector<T>& target,  \
                                   double beta, bool l1);                                                        \
  /* Whether the CUDA backend was built and sees a GPU; otherwise why not, in words. */                          \
  bool cuda_available(std::string* reason);

inline namespace DETFUZZ_NATIVE_ARITHMETIC {
DETFUZZ_NATIVE_LAUNCHERS
}  // inline namespace DETFUZZ_NATIVE_ARITHMETIC

#if defined(DETFUZZ_HOST_FMA_EMULATION)
// host_launch.cpp compiled once more with -mfma -ffp-contract=fast (kernels/CMakeLists.txt):
// the host emulation with the device's FMA contraction; its cuda backend is never built.
namespace fma_contracted {
DETFUZZ_NATIVE_LAUNCHERS
}  // namespace fma_contracted
#endif

}  // namespace detfuzz::native
