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
  if (device == Device::cuda) {
    if (!at::hasCUDA())
      return {false, "the LibTorch in use has no CUDA support (CPU-only build) or sees no GPU"};
    if (!op->hasKernelForDispatchKey(c10::DispatchKey::CUDA))
      return {false, qualified_name + " has no CUDA kernel in the loaded library"};
  }
  return {};
}

}  // namespace detfuzz::kernels
