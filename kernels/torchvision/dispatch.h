// Internal: calling registered ops boxed through the c10 dispatcher. Boxed calls take and
// return IValues, so one code path serves torch 1.13 and 2.x (whose schemas say SymInt where
// 1.13 says int) and any plugin op with the same schema.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <functional>
#include <string>
#include <vector>

#include "kernels/target.h"
#include "kernels/tensor_convert.h"
#include "model/error.h"

namespace detfuzz::kernels {

// The handle of `qualified_name` ("torchvision::nms"), or nullopt when nothing registers it.
std::optional<c10::OperatorHandle> find_op(const std::string& qualified_name);

// Calls the op boxed and returns its outputs; unsupported-dtype failures become
// detfuzz::Error{unsupported}.
std::vector<c10::IValue> call_boxed(const c10::OperatorHandle& op, std::vector<c10::IValue> args);

// Availability of a dispatcher op on a device: registered at all, and with a kernel for the
// device's dispatch key.
Availability op_availability(const std::string& qualified_name, Device device);

// The loaded torchvision's own word on its CUDA build (torchvision::_cuda_version: -1 for a
// CPU-only build, 13000 for CUDA 13.0): "CUDA 13.0 build" or "CPU-only build".
std::string torchvision_cuda_build();

// The handle of a torchvision op, loading the library first; Error{unavailable} saying what
// is missing.
inline c10::OperatorHandle loaded_op(const KernelConfig& config, const std::string& name) {
  const LibraryStatus& library = load_torchvision(config);
  if (!library.loaded) throw Error(ErrorKind::unavailable, library.error);
  auto op = find_op(name);
  if (!op) throw Error(ErrorKind::unavailable, name + " is not registered by " + library.path);
  return *op;
}

// A target that calls the torchvision op `op_name` boxed with `arguments(problem, dtype,
// device)` and brings every output back to the host.
template <class Problem>
Target<Problem> torchvision_target(const KernelConfig& config, const std::string& op_name,
                                   const std::string& description,
                                   std::function<std::vector<c10::IValue>(const Problem&, DType, Device)> arguments) {
  Target<Problem> target;
  target.name = "torchvision";
  target.description = description;
  target.availability = [config, op_name](Device device) -> Availability {
    const LibraryStatus& library = load_torchvision(config);
    if (!library.loaded) return {false, library.error};
    return op_availability(op_name, device);
  };
  target.run = [config, op_name, arguments](const Problem& problem, DType dtype, Device device) {
    auto outputs = call_boxed(loaded_op(config, op_name), arguments(problem, dtype, device));
    std::vector<HostTensor> host;
    for (const auto& output : outputs) host.push_back(to_host(output.toTensor()));
    return host;
  };
  return target;
}

}  // namespace detfuzz::kernels
