// The CUDA launchers of kernels/native: plain cudaMalloc/cudaMemcpy around one kernel per op
// (LibTorch here is CPU-only), grid-stride loops over the same element functions the host
// emulation runs. NMS follows torchvision 0.14.1 csrc/ops/cuda/nms_kernel.cu: a
// (column block, row block) grid of 64-thread blocks, the column block's boxes in shared
// memory, one 64-bit mask word per thread; the sequential reduction is the caller's (host).
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/native/elements.cuh"

namespace detfuzz::native::cuda {
namespace {

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(status));
}

template <class T>
struct DeviceBuffer {
  T* data = nullptr;
  std::size_t count = 0;
  explicit DeviceBuffer(std::size_t n) : count(n) {
    if (n) check(cudaMalloc(&data, n * sizeof(T)), "cudaMalloc");
  }
  DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) {
    if (count) check(cudaMemcpy(data, host.data(), count * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy to device");
  }
  ~DeviceBuffer() { cudaFree(data); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  std::vector<T> to_host() const {
    std::vector<T> host(count);
    if (count) check(cudaMemcpy(host.data(), data, count * sizeof(T), cudaMemcpyDeviceToHost), "cudaMemcpy to host");
    return host;
  }
};

constexpr int kThreads = 256;

unsigned blocks_for(std::int64_t work) {
  const std::int64_t blocks = (work + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 4096 ? (blocks > 0 ? blocks : 1) : 4096);
}

void finish(const char* kernel) {
  check(cudaGetLastError(), kernel);
  check(cudaDeviceSynchronize(), kernel);
}

template <class T>
__global__ void nms_kernel(const T* boxes, std::int64_t n, double threshold, std::uint64_t* masks) {
  const std::int64_t row_block = blockIdx.y, column_block = blockIdx.x;
  const std::int64_t column_blocks = (n + kNmsBlock - 1) / kNmsBlock;
  const std::int64_t row_size = min_of<std::int64_t>(n - row_block * kNmsBlock, kNmsBlock);
  const std::int64_t column_size = min_of<std::int64_t>(n - column_block * kNmsBlock, kNmsBlock);
  __shared__ T block_boxes[kNmsBlock * 4];
  if (threadIdx.x < column_size)
    for (int k = 0; k < 4; ++k)
      block_boxes[threadIdx.x * 4 + k] = boxes[(column_block * kNmsBlock + threadIdx.x) * 4 + k];
  __syncthreads();
  if (threadIdx.x >= row_size) return;
  const std::int64_t row = row_block * kNmsBlock + threadIdx.x;
  masks[row * column_blocks + column_block] =
      nms_mask_word(boxes + row * 4, row, block_boxes, column_block * kNmsBlock, column_size, threshold);
}

template <class T>
__global__ void box_iou_kernel(const T* a, const T* b, std::int64_t n, std::int64_t m, acc_of<T>* out) {
  for (std::int64_t index = blockIdx.x * blockDim.x + threadIdx.x; index < n * m;
       index += static_cast<std::int64_t>(blockDim.x) * gridDim.x)
    out[index] = box_iou_element(a + index / m * 4, b + index % m * 4);
}

template <class T>
__global__ void roi_align_kernel(RoiShape shape, const T* input, const T* rois, double spatial_scale,
                                 std::int64_t sampling_ratio, bool aligned, T* out) {
  for (std::int64_t index = blockIdx.x * blockDim.x + threadIdx.x; index < shape.outputs();
       index += static_cast<std::int64_t>(blockDim.x) * gridDim.x)
    out[index] = roi_align_element(index, shape, input, rois, spatial_scale, sampling_ratio, aligned);
}

template <class T>
__global__ void roi_pool_kernel(RoiShape shape, const T* input, const T* rois, double spatial_scale, T* out,
                                std::int32_t* argmax) {
  for (std::int64_t index = blockIdx.x * blockDim.x + threadIdx.x; index < shape.outputs();
       index += static_cast<std::int64_t>(blockDim.x) * gridDim.x)
    out[index] = roi_pool_element(index, shape, input, rois, spatial_scale, argmax + index);
}

template <class T>
__global__ void smooth_l1_kernel(const T* input, const T* target, std::int64_t n, double beta, bool l1,
                                 acc_of<T>* out) {
  for (std::int64_t index = blockIdx.x * blockDim.x + threadIdx.x; index < n;
       index += static_cast<std::int64_t>(blockDim.x) * gridDim.x)
    out[index] = smooth_l1_element(input[index], target[index], beta, l1);
}

}  // namespace

bool available(std::string* reason) {
  int devices = 0;
  const cudaError_t status = cudaGetDeviceCount(&devices);
  if (status != cudaSuccess || devices == 0) {
    if (reason)
      *reason = status != cudaSuccess ? std::string("no CUDA device (cudaGetDeviceCount: ") + cudaGetErrorString(status) + ")"
                                      : std::string("no CUDA device (cudaGetDeviceCount = 0)");
    return false;
  }
  return true;
}

template <class T>
std::vector<std::uint64_t> nms_masks(const std::vector<T>& sorted_boxes, std::int64_t n, double threshold) {
  const std::int64_t column_blocks = (n + kNmsBlock - 1) / kNmsBlock;
  if (n == 0) return {};
  DeviceBuffer<T> boxes(sorted_boxes);
  DeviceBuffer<std::uint64_t> masks(static_cast<std::size_t>(n * column_blocks));
  nms_kernel<<<dim3(static_cast<unsigned>(column_blocks), static_cast<unsigned>(column_blocks)), kNmsBlock>>>(
      boxes.data, n, threshold, masks.data);
  finish("nms_kernel");
  return masks.to_host();
}

template <class T>
std::vector<acc_of<T>> box_iou(const std::vector<T>& boxes1, const std::vector<T>& boxes2) {
  const std::int64_t n = boxes1.size() / 4, m = boxes2.size() / 4;
  if (n * m == 0) return {};
  DeviceBuffer<T> a(boxes1), b(boxes2);
  DeviceBuffer<acc_of<T>> out(static_cast<std::size_t>(n * m));
  box_iou_kernel<<<blocks_for(n * m), kThreads>>>(a.data, b.data, n, m, out.data);
  finish("box_iou_kernel");
  return out.to_host();
}

template <class T>
std::vector<T> roi_align(const RoiShape& shape, const std::vector<T>& input, const std::vector<T>& rois,
                         double spatial_scale, std::int64_t sampling_ratio, bool aligned) {
  if (shape.outputs() == 0) return {};
  DeviceBuffer<T> map(input), boxes(rois), out(static_cast<std::size_t>(shape.outputs()));
  roi_align_kernel<<<blocks_for(shape.outputs()), kThreads>>>(shape, map.data, boxes.data, spatial_scale,
                                                               sampling_ratio, aligned, out.data);
  finish("roi_align_kernel");
  return out.to_host();
}

template <class T>
std::vector<T> roi_pool(const RoiShape& shape, const std::vector<T>& input, const std::vector<T>& rois,
                        double spatial_scale, std::vector<std::int32_t>& argmax) {
  argmax.clear();
  if (shape.outputs() == 0) return {};
  DeviceBuffer<T> map(input), boxes(rois), out(static_cast<std::size_t>(shape.outputs()));
  DeviceBuffer<std::int32_t> arg(static_cast<std::size_t>(shape.outputs()));
  roi_pool_kernel<<<blocks_for(shape.outputs()), kThreads>>>(shape, map.data, boxes.data, spatial_scale, out.data,
                                                              arg.data);
  finish("roi_pool_kernel");
  argmax = arg.to_host();
  return out.to_host();
}

template <class T>
std::vector<acc_of<T>> smooth_l1(const std::vector<T>& input, const std::vector<T>& target, double beta, bool l1) {
  const std::int64_t n = input.size();
  if (n == 0) return {};
  DeviceBuffer<T> x(input), y(target);
  DeviceBuffer<acc_of<T>> out(static_cast<std::size_t>(n));
  smooth_l1_kernel<<<blocks_for(n), kThreads>>>(x.data, y.data, n, beta, l1, out.data);
  finish("smooth_l1_kernel");
  return out.to_host();
}

#define DETFUZZ_NATIVE_CUDA_INSTANTIATE(T)                                                                         \
  template std::vector<std::uint64_t> nms_masks<T>(const std::vector<T>&, std::int64_t, double);                  \
  template std::vector<acc_of<T>> box_iou<T>(const std::vector<T>&, const std::vector<T>&);                        \
  template std::vector<T> roi_align<T>(const RoiShape&, const std::vector<T>&, const std::vector<T>&, double,      \
                                       std::int64_t, bool);                                                        \
  template std::vector<T> roi_pool<T>(const RoiShape&, const std::vector<T>&, const std::vector<T>&, double,       \
                                      std::vector<std::int32_t>&);                                                 \
  template std::vector<acc_of<T>> smooth_l1<T>(const std::vector<T>&, const std::vector<T>&, double, bool);
DETFUZZ_NATIVE_CUDA_INSTANTIATE(half_t)
DETFUZZ_NATIVE_CUDA_INSTANTIATE(bfloat16_t)
DETFUZZ_NATIVE_CUDA_INSTANTIATE(float)
DETFUZZ_NATIVE_CUDA_INSTANTIATE(double)
#undef DETFUZZ_NATIVE_CUDA_INSTANTIATE

}  // namespace detfuzz::native::cuda
