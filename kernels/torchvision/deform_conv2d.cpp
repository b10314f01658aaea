// torchvision::deform_conv2d(Tensor input, Tensor weight, Tensor offset, Tensor mask,
//   Tensor bias, int stride_h, int stride_w, int pad_h, int pad_w, int dilation_h,
//   int dilation_w, int groups, int offset_groups, bool use_mask) -> Tensor
// (0.14.1 and 0.26.0, SymInt for int in 0.26), called boxed through the dispatcher.
#include "dispatch.h"

namespace detfuzz::kernels {

Target<DeformConv2dProblem> torchvision_deform_conv2d_target(const KernelConfig& config) {
  Target<DeformConv2dProblem> target = torchvision_target<DeformConv2dProblem>(
      config, "torchvision::deform_conv2d",
      "torchvision::deform_conv2d from the loaded torchvision op library (boxed)",
      [](const DeformConv2dProblem& p, DType dtype, Device device) {
        const std::int64_t taps = p.kernel_h * p.kernel_w, oh = p.out_height(), ow = p.out_width();
        auto tensor = [&](const std::vector<double>& values, std::vector<std::int64_t> shape) {
          return values_tensor(values, dtype, device).reshape(shape);
        };
        // torchvision/ops/deform_conv.py passes zeros [N, 1] for mask=None (use_mask false).
        const at::Tensor mask = p.use_mask ? tensor(p.mask, {p.batch, p.offset_groups * taps, oh, ow})
                                           : tensor(std::vector<double>(static_cast<std::size_t>(p.batch), 0.0), {p.batch, 1});
        return std::vector<c10::IValue>{tensor(p.input, {p.batch, p.in_channels, p.height, p.width}),
                                        tensor(p.weight, {p.out_channels, p.groups > 0 ? p.in_channels / p.groups : 0,
                                                          p.kernel_h, p.kernel_w}),
                                        tensor(p.offset, {p.batch, 2 * p.offset_groups * taps, oh, ow}),
                                        mask,
                                        tensor(p.bias, {p.out_channels}),
                                        p.stride_h, p.stride_w, p.pad_h, p.pad_w, p.dilation_h, p.dilation_w,
                                        p.groups, p.offset_groups, p.use_mask};
      });
  // torchvision 0.26.0 csrc/ops/cpu/deform_conv2d_kernel.cpp: deformable_im2col_kernel<scalar_t>
  // computes positions, bilinear weights and samples in scalar_t into a scalar_t `columns`,
  // and out_buf (the sum before `+ bias`) is a tensor of the input's dtype.
  target.arithmetic = {{"*"}, "torchvision 0.26.0 csrc/ops/cpu/deform_conv2d_kernel.cpp: columns and out_buf in scalar_t"};
  return target;
}

}  // namespace detfuzz::kernels
