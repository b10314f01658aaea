#include "dispatch.h"

#include <ATen/Context.h>

#include "kernels/tensor_convert.h"

namespace detfuzz::kernels {

std::optional<c10::OperatorHandle> find_op(const std::string& qualified_name) {
  auto separator = qualified_name.find("::");
  if (separator == std::string::npos) return std::nullopt;
  auto handle = c10::Dispatcher::singleton().findSchema({qualified_name, ""});
  if (!handle) return std::nullopt;
  return *handle;
}

std::vector<c10::IValue> call_boxed(const c10::OperatorHandle& op, std::vector<c10::IValue> args) {
  torch::jit::Stack stack(std::move(args));
  translating_unsupported([&] {
    op.callBoxed(&stack);
    return 0;
  });
  return stack;
}

Availability op_availability(const std::string& qualified_name, Device device) {
  auto op = find_op(qualified_name);
  if (!op) return {false, qualified_name + " is not registered by any loaded library"};
  if (device != Device::cuda) return {};
  if (Availability libtorch = aten_availability(device); !libtorch.available) return libtorch;
  if (!op->hasKernelForDispatchKey(c10::DispatchKey::CUDA))
    return {false, qualified_name + " has no CUDA kernel in the loaded library (a CPU-only build of it)"};
  return {};
}

std::string torchvision_cuda_build() {
  auto op = find_op("torchvision::_cuda_version");
  if (!op) return "unknown (torchvision::_cuda_version is not registered)";
  try {
    const std::int64_t version = call_boxed(*op, {}).at(0).toInt();
    if (version < 0) return "CPU-only build";
    return "CUDA " + std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10) + " build";
  } catch (const std::exception& error) {
    return std::string("unknown (torchvision::_cuda_version failed: ") + error.what() + ")";
  }
}

}  // namespace detfuzz::kernels
