// torchvision::roi_align(Tensor input, Tensor rois, float spatial_scale, int pooled_height,
//   int pooled_width, int sampling_ratio, bool aligned) -> Tensor
// torchvision::roi_pool(Tensor input, Tensor rois, float spatial_scale, int pooled_height,
//   int pooled_width) -> (Tensor, Tensor)
// torchvision::ps_roi_align(Tensor input, Tensor rois, float spatial_scale, int pooled_height,
//   int pooled_width, int sampling_ratio) -> (Tensor, Tensor)
// torchvision::ps_roi_pool(Tensor input, Tensor rois, float spatial_scale, int pooled_height,
//   int pooled_width) -> (Tensor, Tensor)
// torchvision::_roi_align_backward(Tensor grad, Tensor rois, float spatial_scale,
//   int pooled_height, int pooled_width, int batch_size, int channels, int height, int width,
//   int sampling_ratio, bool aligned) -> Tensor
// torchvision::_ps_roi_align_backward(Tensor grad, Tensor rois, Tensor channel_mapping,
//   float spatial_scale, int pooled_height, int pooled_width, int sampling_ratio, int batch_size,
//   int channels, int height, int width) -> Tensor   (sampling_ratio before the sizes, unlike
//   _roi_align_backward's; SymInt for int in 0.26)
// torchvision::_roi_pool_backward(Tensor grad, Tensor rois, Tensor argmax, float spatial_scale,
//   int pooled_height, int pooled_width, int batch_size, int channels, int height, int width)
//   -> Tensor
// torchvision::_ps_roi_pool_backward(Tensor grad, Tensor rois, Tensor channel_mapping,
//   float spatial_scale, int pooled_height, int pooled_width, int batch_size, int channels,
//   int height, int width) -> Tensor   (SymInt for int in 0.26)
// all called boxed through the dispatcher.
#include "dispatch.h"
#include "kernels/tensor_convert.h"
#include "model/error.h"

namespace detfuzz::kernels {

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

namespace {

// The forward output's gradient as the backward takes it: [K, C_out, PH, PW].
template <class Forward>
at::Tensor grad_tensor(const GradientOf<Forward>& p, std::int64_t channels_out, DType dtype, Device device) {
  const Forward& f = p.forward;
  return feature_tensor({static_cast<std::int64_t>(f.rois.size()), channels_out, f.pooled_height, f.pooled_width, p.grad},
                        dtype, device);
}

// What a position-sensitive forward returns beside its output, int32 [K, C_out, PH, PW]:
// element (k, c, ph, pw) read input channel c * bins + ph * PW + pw.
at::Tensor channel_mapping(std::size_t rois, std::int64_t channels_out, std::int64_t pooled_height,
                           std::int64_t pooled_width, Device device) {
  return at::arange(channels_out * pooled_height * pooled_width,
                    at::TensorOptions().dtype(at::kInt).device(device == Device::cuda ? at::kCUDA : at::kCPU))
      .reshape({1, channels_out, pooled_height, pooled_width})
      .repeat({static_cast<std::int64_t>(rois), 1, 1, 1});
}

// torchvision 0.14.1 to 0.26.0 csrc/ops/cpu/roi_align_kernel.cpp roi_align_backward_kernel_impl
// (and ps_roi_align_kernel.cpp's) compute `T g1 = grad_output_this_bin * w1 / count` and
// `add(offset_grad_input + ..., g1)` into grad_input of type T: for Half every term and every
// partial sum is fp16 (cuda/: atomicAdd on T).
const Arithmetic kBackwardInT{{"*"}, "torchvision 0.26.0 csrc/ops/cpu/roi_align_kernel.cpp: T g1 = grad * w1 / count, added into T grad_input"};

}  // namespace

Target<RoiAlignBackwardProblem> torchvision_roi_align_backward_target(const KernelConfig& config) {
  Target<RoiAlignBackwardProblem> target = torchvision_target<RoiAlignBackwardProblem>(
      config, "torchvision::_roi_align_backward",
      "torchvision::_roi_align_backward from the loaded torchvision op library (boxed)",
      [](const RoiAlignBackwardProblem& p, DType dtype, Device device) {
        const RoiAlignProblem& f = p.forward;
        return std::vector<c10::IValue>{grad_tensor(p, f.input.channels, dtype, device), rois_tensor(f.rois, dtype, device),
                                        f.spatial_scale, f.pooled_height, f.pooled_width, f.input.batch,
                                        f.input.channels, f.input.height, f.input.width, f.sampling_ratio, f.aligned};
      });
  target.arithmetic = kBackwardInT;
  return target;
}

Target<RoiAlignBackwardProblem> torchvision_ps_roi_align_backward_target(const KernelConfig& config) {
  Target<RoiAlignBackwardProblem> target = torchvision_target<RoiAlignBackwardProblem>(
      config, "torchvision::_ps_roi_align_backward",
      "torchvision::_ps_roi_align_backward from the loaded torchvision op library (boxed)",
      [](const RoiAlignBackwardProblem& p, DType dtype, Device device) {
        const RoiAlignProblem& f = p.forward;
        const std::int64_t channels_out = f.input.channels / (f.pooled_height * f.pooled_width);
        return std::vector<c10::IValue>{grad_tensor(p, channels_out, dtype, device), rois_tensor(f.rois, dtype, device),
                                        channel_mapping(f.rois.size(), channels_out, f.pooled_height, f.pooled_width, device),
                                        f.spatial_scale, f.pooled_height, f.pooled_width, f.sampling_ratio,
                                        f.input.batch, f.input.channels, f.input.height, f.input.width};
      });
  target.arithmetic = kBackwardInT;
  target.arithmetic.source = "torchvision 0.26.0 csrc/ops/cpu/ps_roi_align_kernel.cpp: T g1 = grad * w1 / count, added into T grad_input";
  return target;
}

Target<RoiPoolBackwardProblem> torchvision_roi_pool_backward_target(const KernelConfig& config) {
  Target<RoiPoolBackwardProblem> target = torchvision_target<RoiPoolBackwardProblem>(
      config, "torchvision::_roi_pool_backward",
      "torchvision::_roi_pool_backward from the loaded torchvision op library (boxed)",
      [](const RoiPoolBackwardProblem& p, DType dtype, Device device) {
        const RoiPoolProblem& f = p.forward;
        const auto k = static_cast<std::int64_t>(f.rois.size());
        const FeatureMap grad{k, f.input.channels, f.pooled_height, f.pooled_width, p.grad};
        // The forward's argmax output is int32 [K, C, PH, PW].
        std::vector<std::int32_t> argmax(p.argmax.begin(), p.argmax.end());
        const at::Tensor routing =
            at::from_blob(argmax.data(), {k, f.input.channels, f.pooled_height, f.pooled_width}, at::kInt)
                .clone()
                .to(device == Device::cuda ? at::kCUDA : at::kCPU);
        return std::vector<c10::IValue>{feature_tensor(grad, dtype, device), rois_tensor(f.rois, dtype, device), routing,
                                        f.spatial_scale, f.pooled_height, f.pooled_width, f.input.batch,
                                        f.input.channels, f.input.height, f.input.width};
      });
  // torchvision 0.26.0 csrc/ops/cpu/roi_pool_kernel.cpp roi_pool_backward_kernel_impl:
  // `add(grad_input_offset + argmax, static_cast<T>(grad_output_offset[...]))` into T.
  target.arithmetic = {{"*"}, "torchvision 0.26.0 csrc/ops/cpu/roi_pool_kernel.cpp: grad added at argmax into T grad_input"};
  return target;
}

Target<PsRoiPoolBackwardProblem> torchvision_ps_roi_pool_backward_target(const KernelConfig& config) {
  Target<PsRoiPoolBackwardProblem> target = torchvision_target<PsRoiPoolBackwardProblem>(
      config, "torchvision::_ps_roi_pool_backward",
      "torchvision::_ps_roi_pool_backward from the loaded torchvision op library (boxed)",
      [](const PsRoiPoolBackwardProblem& p, DType dtype, Device device) {
        const RoiPoolProblem& f = p.forward;
        const std::int64_t channels_out = f.input.channels / (f.pooled_height * f.pooled_width);
        return std::vector<c10::IValue>{grad_tensor(p, channels_out, dtype, device), rois_tensor(f.rois, dtype, device),
                                        channel_mapping(f.rois.size(), channels_out, f.pooled_height, f.pooled_width, device),
                                        f.spatial_scale, f.pooled_height, f.pooled_width, f.input.batch,
                                        f.input.channels, f.input.height, f.input.width};
      });
  // torchvision 0.26.0 csrc/ops/cpu/ps_roi_pool_kernel.cpp ps_roi_pool_backward_kernel_impl:
  // `T diff_val = grad_output[index] / bin_area; add(grad_input_offset + ..., diff_val)` into T.
  target.arithmetic = {{"*"}, "torchvision 0.26.0 csrc/ops/cpu/ps_roi_pool_kernel.cpp: T diff_val = grad / bin_area, "
                              "added into T grad_input"};
  return target;
}

}  // namespace detfuzz::kernels
