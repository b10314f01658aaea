// Internal: calling registered ops boxed through the c10 dispatcher. Boxed calls take and
// return IValues, so one code path serves torch 1.13 and 2.x (whose schemas say SymInt where
// 1.13 says int) and any plugin op with the same schema.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <string>
#include <vector>

#include "kernels/target.h"

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

}  // namespace detfuzz::kernels
