// Detection losses as users call them: torch.nn.functional smooth_l1_loss / l1_loss
// (the linked ATen, whatever dtype support it has: 1.13 or 2.x), and torchvision 0.14.1 (= 0.26.0)
// models/detection/roi_heads.py fastrcnn_loss written with the same ATen calls:
//   classification_loss = F.cross_entropy(class_logits, labels)
//   box_loss = F.smooth_l1_loss(box_regression[pos, labels_pos], regression_targets[pos],
//                               beta=1/9, reduction="sum") / labels.numel()
#include <ATen/core/Reduction.h>
#include <torch/csrc/api/include/torch/version.h>

#include "kernels/factories.h"
#include "kernels/tensor_convert.h"

namespace detfuzz::kernels {
namespace {

std::int64_t reduction(RegressionLossProblem::Reduction r) {
  switch (r) {
    case RegressionLossProblem::Reduction::none: return at::Reduction::None;
    case RegressionLossProblem::Reduction::sum: return at::Reduction::Sum;
    case RegressionLossProblem::Reduction::mean: break;
  }
  return at::Reduction::Mean;
}

at::Tensor fastrcnn_box_loss(const at::Tensor& box_regression, const at::Tensor& labels,
                             const at::Tensor& regression_targets, BoxLossNormalizer normalizer) {
  at::Tensor sampled_pos_inds_subset = at::where(labels > 0)[0];
  at::Tensor labels_pos = labels.index_select(0, sampled_pos_inds_subset);
  const std::int64_t n = box_regression.size(0);
  at::Tensor per_class = box_regression.reshape({n, box_regression.size(-1) / 4, 4});
  at::Tensor box_loss = at::smooth_l1_loss(per_class.index({sampled_pos_inds_subset, labels_pos}),
                                           regression_targets.index_select(0, sampled_pos_inds_subset),
                                           at::Reduction::Sum, 1.0 / 9);
  const std::int64_t normalizer_count =
      normalizer == BoxLossNormalizer::sampled_proposals ? labels.numel() : sampled_pos_inds_subset.numel();
  return box_loss / normalizer_count;
}

}  // namespace

Target<RegressionLossProblem> aten_regression_loss_target() {
  Target<RegressionLossProblem> target;
  target.name = "torch";
  target.description = "at::smooth_l1_loss / at::l1_loss of the LibTorch in use (torch.nn.functional)";
  target.availability = aten_availability;
  target.run = [](const RegressionLossProblem& p, DType dtype, Device device) {
    return translating_unsupported([&] {
      at::Tensor input = values_tensor(p.input, dtype, device), target_values = values_tensor(p.target, dtype, device);
      at::Tensor loss = p.loss == RegressionLossProblem::Loss::l1
                            ? at::l1_loss(input, target_values, reduction(p.reduction))
                            : at::smooth_l1_loss(input, target_values, reduction(p.reduction), p.beta);
      return std::vector<HostTensor>{to_host(loss)};
    });
  };
  return target;
}

// The gradient autograd gives d sum(loss) / d input: torch.nn.functional.smooth_l1_loss as
// the linked torch's Python writes it (from torch 2.1 on, beta == 0 calls l1_loss:
// pytorch#97022, the fix of #96813), then loss.sum().backward() ("none") or backward().
Target<RegressionLossProblem> aten_regression_loss_backward_target() {
  Target<RegressionLossProblem> target;
  target.name = "torch";
  target.description =
      "LibTorch autograd of torch.nn.functional.smooth_l1_loss / l1_loss (the linked torch's Python: beta 0 is "
      "l1_loss from 2.1 on)";
  target.availability = aten_availability;
  target.run = [](const RegressionLossProblem& p, DType dtype, Device device) {
    return translating_unsupported([&] {
      at::Tensor input = values_tensor(p.input, dtype, device).requires_grad_(true);
      const at::Tensor target_values = values_tensor(p.target, dtype, device);
      constexpr bool beta_zero_is_l1 = TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1);
      const bool l1 = p.loss == RegressionLossProblem::Loss::l1 || (beta_zero_is_l1 && p.beta == 0);
      at::Tensor loss = l1 ? at::l1_loss(input, target_values, reduction(p.reduction))
                           : at::smooth_l1_loss(input, target_values, reduction(p.reduction), p.beta);
      loss.sum().backward();
      const at::Tensor grad = input.grad();
      return std::vector<HostTensor>{to_host(grad.defined() ? grad : at::zeros_like(input))};
    });
  };
  return target;
}

Target<FastRcnnLossProblem> torchvision_fast_rcnn_loss_target(BoxLossNormalizer normalizer) {
  Target<FastRcnnLossProblem> target;
  target.name = "torchvision";
  target.description = "ATen port of torchvision models/detection/roi_heads.py fastrcnn_loss (the same in 0.14.1 and 0.26.0)";
  target.availability = aten_availability;
  target.run = [normalizer](const FastRcnnLossProblem& p, DType dtype, Device device) {
    return translating_unsupported([&] {
      const auto n = static_cast<std::int64_t>(p.labels.size());
      at::Tensor logits = values_tensor(p.class_logits, dtype, device).reshape({n, p.classes});
      at::Tensor labels =
          values_tensor(std::vector<double>(p.labels.begin(), p.labels.end()), DType::int64, device);
      at::Tensor regression = values_tensor(p.box_regression, dtype, device).reshape({n, 4 * p.classes});
      at::Tensor targets = values_tensor(p.regression_targets, dtype, device).reshape({n, 4});
      at::Tensor classification_loss = at::cross_entropy_loss(logits, labels);
      return std::vector<HostTensor>{to_host(classification_loss), to_host(fastrcnn_box_loss(regression, labels, targets, normalizer))};
    });
  };
  return target;
}

}  // namespace detfuzz::kernels
