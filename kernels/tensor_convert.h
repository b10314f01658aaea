// Internal to kernels/: the only place where detfuzz values become ATen tensors and back.
#pragma once

#include <ATen/ATen.h>

#include <vector>

#include "model/dtype.h"
#include "kernels/target.h"
#include "model/problems.h"

namespace detfuzz::kernels {

at::ScalarType scalar_type(DType dtype);
at::Device torch_device(Device device);
at::Tensor boxes_tensor(const std::vector<Box>& boxes, DType dtype, Device device);
at::Tensor values_tensor(const std::vector<double>& values, DType dtype, Device device);
at::Tensor feature_tensor(const FeatureMap& map, DType dtype, Device device);  // [N, C, H, W]
at::Tensor rois_tensor(const std::vector<Roi>& rois, DType dtype, Device device);  // [K, 5]
HostTensor to_host(const at::Tensor& tensor);

// Runs `body`, translating ATen's "not implemented for 'Half'" dispatch failures into
// detfuzz::Error{unsupported}: a missing kernel is a property of the library, not a bug
// the fuzzer found.
void rethrow_if_unsupported(const std::exception& error);

// What the LibTorch in use knows of CUDA: whether it is a CUDA build (and of which CUDA
// runtime, e.g. "13.0") and how many GPUs it sees. Never throws.
struct LibtorchCuda {
  bool built = false;
  std::string runtime_version;  // empty for a CPU-only build
  int devices = 0;
};
LibtorchCuda libtorch_cuda();

// "CUDA 13.0 build" or "CPU-only build", then the devices seen: for list and the environment.
std::string describe(const LibtorchCuda& cuda);

// Where an ATen port can run: the CPU, and CUDA when this LibTorch has it and sees a GPU.
// Without one the reason starts "no CUDA device" and says which half is missing.
Availability aten_availability(Device device);

template <class Body>
auto translating_unsupported(Body&& body) -> decltype(body()) {
  try {
    return body();
  } catch (const std::exception& error) {
    rethrow_if_unsupported(error);
    throw;
  }
}

}  // namespace detfuzz::kernels
