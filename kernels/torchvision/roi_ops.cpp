// torchvision::roi_align(Tensor input, Tensor rois, float spatial_scale, int pooled_height,
//   int pooled_width, int sampling_ratio, bool aligned) -> Tensor
// torchvision::roi_pool(Tensor input, Tensor rois, float spatial_scale, int pooled_height,
//   int pooled_width) -> (Tensor, Tensor)
// torchvision::ps_roi_align(Tensor input, Tensor rois, float spatial_scale, int pooled_height,
//   int pooled_width, int sampling_ratio) -> (Tensor, Tensor)
// torchvision::ps_roi_pool(Tensor input, Tensor rois, float spatial_scale, int pooled_height,
//   int pooled_width) -> (Tensor, Tensor)
// all called boxed through the dispatcher.
#include "dispatch.h"
#include "kernels/tensor_convert.h"
#include "model/error.h"

namespace detfuzz::kernels {
namespace {

c10::OperatorHandle loaded_op(const KernelConfig& config, const std::string& name) {
  const LibraryStatus& library = load_torchvision(config);
  if (!library.loaded) throw Error(ErrorKind::unavailable, library.error);
  auto op = find_op(name);
  if (!op) throw Error(ErrorKind::unavailable, name + " is not registered by " + library.path);
  return *op;
}

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

}  // namespace

Target<RoiAlignProblem> torchvision_roi_align_target(const KernelConfig& config) {
  Target<RoiAlignProblem> target = torchvision_target<RoiAlignProblem>(
      config, "torchvision::roi_align", "torchvision::roi_align from the loaded torchvision op library (boxed)",
      [](const RoiAlignProblem& p, DType dtype, Device device) {
        return std::vector<c10::IValue>{feature_tensor(p.input, dtype, device), rois_tensor(p.rois, dtype, device),
                                        p.spatial_scale, p.pooled_height, p.pooled_width, p.sampling_ratio,
                                        p.aligned};
      });
  // torchvision 0.14.1 csrc/ops/cpu/roi_align_kernel.cpp roi_align_forward_kernel_impl<T>
  // (and cuda/roi_align_kernel.cu) declare `T output_val = 0.` and accumulate the samples in
  // T: for Half, the sum before `/= count` is fp16.
  target.arithmetic = {{"*"}, "torchvision 0.14.1 csrc/ops/cpu/roi_align_kernel.cpp: T output_val accumulates in T"};
  return target;
}

Target<RoiPoolProblem> torchvision_roi_pool_target(const KernelConfig& config) {
  return torchvision_target<RoiPoolProblem>(
      config, "torchvision::roi_pool", "torchvision::roi_pool from the loaded torchvision op library (boxed)",
      [](const RoiPoolProblem& p, DType dtype, Device device) {
        return std::vector<c10::IValue>{feature_tensor(p.input, dtype, device), rois_tensor(p.rois, dtype, device),
                                        p.spatial_scale, p.pooled_height, p.pooled_width};
      });
}

Target<RoiAlignProblem> torchvision_ps_roi_align_target(const KernelConfig& config) {
  Target<RoiAlignProblem> target = torchvision_target<RoiAlignProblem>(
      config, "torchvision::ps_roi_align", "torchvision::ps_roi_align from the loaded torchvision op library (boxed)",
      [](const RoiAlignProblem& p, DType dtype, Device device) {
        return std::vector<c10::IValue>{feature_tensor(p.input, dtype, device), rois_tensor(p.rois, dtype, device),
                                        p.spatial_scale, p.pooled_height, p.pooled_width, p.sampling_ratio};
      });
  // torchvision 0.14.1 csrc/ops/cpu/ps_roi_align_kernel.cpp (Half dispatched on the CPU) and
  // cuda/ps_roi_align_kernel.cu declare `T out_sum = 0` and sum the samples in T.
  target.arithmetic = {{"*"}, "torchvision 0.14.1 csrc/ops/cpu/ps_roi_align_kernel.cpp: T out_sum accumulates in T"};
  return target;
}

Target<RoiPoolProblem> torchvision_ps_roi_pool_target(const KernelConfig& config) {
  Target<RoiPoolProblem> target = torchvision_target<RoiPoolProblem>(
      config, "torchvision::ps_roi_pool", "torchvision::ps_roi_pool from the loaded torchvision op library (boxed)",
      [](const RoiPoolProblem& p, DType dtype, Device device) {
        return std::vector<c10::IValue>{feature_tensor(p.input, dtype, device), rois_tensor(p.rois, dtype, device),
                                        p.spatial_scale, p.pooled_height, p.pooled_width};
      });
  // torchvision 0.14.1 csrc/ops/cpu/ps_roi_pool_kernel.cpp (Half dispatched on the CPU too)
  // and cuda/ps_roi_pool_kernel.cu declare `T out_sum = 0` and sum the bin in T.
  target.arithmetic = {{"*"}, "torchvision 0.14.1 csrc/ops/cpu/ps_roi_pool_kernel.cpp: T out_sum accumulates in T"};
  return target;
}

}  // namespace detfuzz::kernels
