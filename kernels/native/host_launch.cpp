// Host emulation of kernels/native: every element function runs over the same grid as on the
// device, one "thread" after another. What differs from the GPU is only what the compiler may
// do to the arithmetic (nvcc contracts a * b + c into an FMA; see kernels/CMakeLists.txt).
#include "kernels/native/launch.h"

#include <algorithm>
#include <stdexcept>

namespace detfuzz::native {

namespace cuda {
// Defined in cuda_launch.cu when the CUDA backend is built.
template <class T>
std::vector<std::uint64_t> nms_masks(const std::vector<T>&, std::int64_t, double);
template <class T>
std::vector<acc_of<T>> box_iou(const std::vector<T>&, const std::vector<T>&);
template <class T>
std::vector<T> roi_align(const RoiShape&, const std::vector<T>&, const std::vector<T>&, double, std::int64_t, bool);
template <class T>
std::vector<T> roi_pool(const RoiShape&, const std::vector<T>&, const std::vector<T>&, double, std::vector<std::int32_t>&);
template <class T>
std::vector<acc_of<T>> smooth_l1(const std::vector<T>&, const std::vector<T>&, double, bool);
bool available(std::string* reason);
}  // namespace cuda

inline namespace DETFUZZ_NATIVE_ARITHMETIC {
namespace {

#if defined(DETFUZZ_WITH_CUDA)
constexpr bool kCudaBuilt = true;
#else
constexpr bool kCudaBuilt = false;
#endif

void require_cuda() {
  std::string reason;
  if (!cuda_available(&reason)) throw std::runtime_error("the CUDA backend is unavailable: " + reason);
}

}  // namespace

bool cuda_available(std::string* reason) {
  if constexpr (!kCudaBuilt) {
    if (reason) *reason = "no CUDA device: this detfuzz was built without its CUDA kernels (no nvcc found, or -DDETFUZZ_CUDA=OFF)";
    return false;
  } else {
    return cuda::available(reason);
  }
}

template <class T>
std::vector<std::uint64_t> nms_masks(Backend backend, const std::vector<T>& sorted_boxes, std::int64_t n,
                                     double threshold) {
  if (backend == Backend::cuda) {
    require_cuda();
    if constexpr (kCudaBuilt) return cuda::nms_masks(sorted_boxes, n, threshold);
  }
  const std::int64_t column_blocks = (n + kNmsBlock - 1) / kNmsBlock;
  std::vector<std::uint64_t> masks(static_cast<std::size_t>(n * column_blocks));
  // The device grid: (column block, row block) blocks of 64 threads, a thread per row.
  for (std::int64_t row_block = 0; row_block < column_blocks; ++row_block)
    for (std::int64_t column_block = 0; column_block < column_blocks; ++column_block)
      for (std::int64_t t = 0; t < kNmsBlock; ++t) {
        const std::int64_t row = row_block * kNmsBlock + t;
        if (row >= n) break;
        const std::int64_t first_column = column_block * kNmsBlock;
        masks[row * column_blocks + column_block] =
            nms_mask_word(sorted_boxes.data() + row * 4, row, sorted_boxes.data() + first_column * 4, first_column,
                          std::min<std::int64_t>(n - first_column, kNmsBlock), threshold);
      }
  return masks;
}

template <class T>
std::vector<acc_of<T>> box_iou(Backend backend, const std::vector<T>& boxes1, const std::vector<T>& boxes2) {
  if (backend == Backend::cuda) {
    require_cuda();
    if constexpr (kCudaBuilt) return cuda::box_iou(boxes1, boxes2);
  }
  const std::size_t n = boxes1.size() / 4, m = boxes2.size() / 4;
  std::vector<acc_of<T>> iou(n * m);
  for (std::size_t index = 0; index < n * m; ++index)
    iou[index] = box_iou_element(boxes1.data() + index / m * 4, boxes2.data() + index % m * 4);
  return iou;
}

template <class T>
std::vector<T> roi_align(Backend backend, const RoiShape& shape, const std::vector<T>& input, const std::vector<T>& rois,
                         double spatial_scale, std::int64_t sampling_ratio, bool aligned) {
  if (backend == Backend::cuda) {
    require_cuda();
    if constexpr (kCudaBuilt) return cuda::roi_align(shape, input, rois, spatial_scale, sampling_ratio, aligned);
  }
  std::vector<T> output(static_cast<std::size_t>(shape.outputs()));
  for (std::int64_t index = 0; index < shape.outputs(); ++index)
    output[index] = roi_align_element(index, shape, input.data(), rois.data(), spatial_scale, sampling_ratio, aligned);
  return output;
}

template <class T>
std::vector<T> roi_pool(Backend backend, const RoiShape& shape, const std::vector<T>& input, const std::vector<T>& rois,
                        double spatial_scale, std::vector<std::int32_t>& argmax) {
  if (backend == Backend::cuda) {
    require_cuda();
    if constexpr (kCudaBuilt) return cuda::roi_pool(shape, input, rois, spatial_scale, argmax);
  }
  std::vector<T> output(static_cast<std::size_t>(shape.outputs()));
  argmax.assign(output.size(), -1);
  for (std::int64_t index = 0; index < shape.outputs(); ++index)
    output[index] = roi_pool_element(index, shape, input.data(), rois.data(), spatial_scale, &argmax[index]);
  return output;
}

template <class T>
std::vector<acc_of<T>> smooth_l1(Backend backend, const std::vector<T>& input, const std::vector<T>& target,
                                 double beta, bool l1) {
  if (backend == Backend::cuda) {
    require_cuda();
    if constexpr (kCudaBuilt) return cuda::smooth_l1(input, target, beta, l1);
  }
  std::vector<acc_of<T>> losses(input.size());
  for (std::size_t i = 0; i < input.size(); ++i) losses[i] = smooth_l1_element(input[i], target[i], beta, l1);
  return losses;
}

#define DETFUZZ_NATIVE_INSTANTIATE(T)                                                                                 \
  template std::vector<std::uint64_t> nms_masks<T>(Backend, const std::vector<T>&, std::int64_t, double);             \
  template std::vector<acc_of<T>> box_iou<T>(Backend, const std::vector<T>&, const std::vector<T>&);                  \
  template std::vector<T> roi_align<T>(Backend, const RoiShape&, const std::vector<T>&, const std::vector<T>&, double, \
                                       std::int64_t, bool);                                                           \
  template std::vector<T> roi_pool<T>(Backend, const RoiShape&, const std::vector<T>&, const std::vector<T>&, double,  \
                                      std::vector<std::int32_t>&);                                                    \
  template std::vector<acc_of<T>> smooth_l1<T>(Backend, const std::vector<T>&, const std::vector<T>&, double, bool);
DETFUZZ_NATIVE_INSTANTIATE(half_t)
DETFUZZ_NATIVE_INSTANTIATE(bfloat16_t)
DETFUZZ_NATIVE_INSTANTIATE(float)
DETFUZZ_NATIVE_INSTANTIATE(double)
#undef DETFUZZ_NATIVE_INSTANTIATE

}  // inline namespace DETFUZZ_NATIVE_ARITHMETIC
}  // namespace detfuzz::native
