#include "tensor_convert.h"

#include <ATen/Context.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <torch/csrc/api/include/torch/version.h>

#include <string>

#include "model/error.h"

namespace detfuzz::kernels {

at::ScalarType scalar_type(DType dtype) {
  switch (dtype) {
    case DType::fp16: return at::kHalf;
    case DType::bf16: return at::kBFloat16;
    case DType::fp32: return at::kFloat;
    case DType::fp64: return at::kDouble;
    case DType::int64: return at::kLong;
    case DType::int32: return at::kInt;
    case DType::uint8: return at::kByte;
    case DType::boolean: return at::kBool;
    case DType::unknown: break;
  }
  throw Error(ErrorKind::internal, "scalar_type: no ATen type for dtype 'unknown'");
}

at::Device torch_device(Device device) {
  return device == Device::cpu ? at::Device(at::kCPU) : at::Device(at::kCUDA);
}

namespace {

std::string dtype_label(at::ScalarType type) {
  for (DType dtype : {DType::fp16, DType::bf16, DType::fp32, DType::fp64, DType::int64,
                      DType::int32, DType::uint8, DType::boolean})
    if (scalar_type(dtype) == type) return std::string(dtype_name(dtype));
  return c10::toString(type);
}

}  // namespace

LibtorchCuda libtorch_cuda() {
  LibtorchCuda cuda;
  try {
    const at::CUDAHooksInterface& hooks = at::detail::getCUDAHooks();
    cuda.built = hooks.hasCUDART();
    if (cuda.built) {
      const long version = hooks.versionCUDART();  // 13000 for 13.0
      cuda.runtime_version = std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
      cuda.devices = hooks.hasCUDA() ? hooks.getNumGPUs() : 0;
    }
  } catch (const std::exception&) {
    // A CUDA build whose driver cannot be initialised sees no device; the build stays known.
    cuda.devices = 0;
  }
  return cuda;
}

std::string describe(const LibtorchCuda& cuda) {
  if (!cuda.built) return "CPU-only build (no CUDA device can be used)";
  return "CUDA " + cuda.runtime_version + " build, " +
         (cuda.devices > 0 ? std::to_string(cuda.devices) + " GPU(s) visible" : std::string("no CUDA device"));
}

Availability aten_availability(Device device) {
  if (device != Device::cuda) return {};
  static const LibtorchCuda cuda = libtorch_cuda();
  if (!cuda.built) return {false, "no CUDA device: the LibTorch in use (" TORCH_VERSION ") is a CPU-only build"};
  if (cuda.devices == 0)
    return {false, "no CUDA device: LibTorch " TORCH_VERSION " is a CUDA " + cuda.runtime_version +
                       " build, but this machine has no GPU it can use"};
  return {};
}

at::Tensor boxes_tensor(const std::vector<Box>& boxes, DType dtype, Device device) {
  std::vector<double> flat;
  flat.reserve(boxes.size() * 4);
  for (const Box& box : boxes) flat.insert(flat.end(), {box.x1, box.y1, box.x2, box.y2});
  return values_tensor(flat, dtype, device).reshape({static_cast<int64_t>(boxes.size()), 4});
}

at::Tensor values_tensor(const std::vector<double>& values, DType dtype, Device device) {
  // The values are already representable in `dtype`, so this conversion is exact.
  at::Tensor host = at::empty({static_cast<int64_t>(values.size())}, at::kDouble);
  std::copy(values.begin(), values.end(), host.data_ptr<double>());
  return host.to(scalar_type(dtype)).to(torch_device(device));
}

at::Tensor feature_tensor(const FeatureMap& map, DType dtype, Device device) {
  return values_tensor(map.values, dtype, device).reshape({map.batch, map.channels, map.height, map.width});
}

at::Tensor rois_tensor(const std::vector<Roi>& rois, DType dtype, Device device) {
  std::vector<double> flat;
  flat.reserve(rois.size() * 5);
  for (const Roi& r : rois) flat.insert(flat.end(), {r.batch_index, r.x1, r.y1, r.x2, r.y2});
  return values_tensor(flat, dtype, device).reshape({static_cast<int64_t>(rois.size()), 5});
}

HostTensor to_host(const at::Tensor& tensor) {
  HostTensor host;
  host.shape.assign(tensor.sizes().begin(), tensor.sizes().end());
  host.dtype = dtype_label(tensor.scalar_type());
  host.device = tensor.device().str();
  at::Tensor values = tensor.detach().to(at::kCPU).to(at::kDouble).contiguous();
  host.values.assign(values.data_ptr<double>(), values.data_ptr<double>() + values.numel());
  return host;
}

void rethrow_if_unsupported(const std::exception& error) {
  std::string message = error.what();
  if (message.find("not implemented for '") == std::string::npos) return;
  throw Error(ErrorKind::unsupported, message.substr(0, message.find('\n')));
}

}  // namespace detfuzz::kernels
