#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <torch/csrc/api/include/torch/version.h>

#include "kernels/target.h"

namespace detfuzz::kernels {

// Defined beside each op's adapter (one op = one stem per folder).
Target<NmsProblem> torchvision_nms_target(const KernelConfig& config);
Target<BoxIouProblem> aten_box_iou_target();
Target<BoxAreaProblem> aten_box_area_target();
Target<BoxCoderProblem> aten_box_coder_target();
Target<RegressionLossProblem> aten_regression_loss_target();
Target<FastRcnnLossProblem> torchvision_fast_rcnn_loss_target();
Target<MatcherProblem> torchvision_matcher_target();
Target<BoxIouProblem> torchvision_generalized_box_iou_target();
Target<GiouLossProblem> torchvision_giou_loss_target();
std::vector<Target<BatchedNmsProblem>> aten_batched_nms_targets(const KernelConfig& config);
Target<RoiAlignProblem> torchvision_roi_align_target(const KernelConfig& config);
Target<RoiPoolProblem> torchvision_roi_pool_target(const KernelConfig& config);

std::vector<Target<NmsProblem>> nms_targets(const KernelConfig& config) {
  std::vector<Target<NmsProblem>> targets{torchvision_nms_target(config)};
  for (auto& mutant : nms_mutants()) targets.push_back(std::move(mutant));
  return targets;
}

std::vector<Target<BatchedNmsProblem>> batched_nms_targets(const KernelConfig& config) {
  return aten_batched_nms_targets(config);
}

std::vector<Target<BoxIouProblem>> box_iou_targets(const KernelConfig&) {
  return {aten_box_iou_target()};
}

std::vector<Target<BoxAreaProblem>> box_area_targets(const KernelConfig&) { return {aten_box_area_target()}; }

std::vector<Target<BoxCoderProblem>> box_coder_targets(const KernelConfig&) { return {aten_box_coder_target()}; }

std::vector<Target<RegressionLossProblem>> regression_loss_targets(const KernelConfig&) {
  return {aten_regression_loss_target()};
}

std::vector<Target<FastRcnnLossProblem>> fast_rcnn_loss_targets(const KernelConfig&) {
  return {torchvision_fast_rcnn_loss_target()};
}

std::vector<Target<MatcherProblem>> matcher_targets(const KernelConfig&) { return {torchvision_matcher_target()}; }

std::vector<Target<BoxIouProblem>> generalized_box_iou_targets(const KernelConfig&) {
  return {torchvision_generalized_box_iou_target()};
}

std::vector<Target<GiouLossProblem>> giou_loss_targets(const KernelConfig&) { return {torchvision_giou_loss_target()}; }

std::vector<Target<RoiAlignProblem>> roi_align_targets(const KernelConfig& config) {
  return {torchvision_roi_align_target(config)};
}

std::vector<Target<RoiPoolProblem>> roi_pool_targets(const KernelConfig& config) {
  return {torchvision_roi_pool_target(config)};
}

std::vector<std::pair<std::string, std::string>> environment(const KernelConfig& config) {
  const LibraryStatus& torchvision = load_torchvision(config);
  std::vector<std::pair<std::string, std::string>> facts;
  facts.emplace_back("torch", TORCH_VERSION);
  facts.emplace_back("torchvision", torchvision.loaded ? torchvision.version : "unavailable");
  facts.emplace_back("torchvision_lib", torchvision.loaded ? torchvision.path : torchvision.error);
  facts.emplace_back("cuda", at::hasCUDA() ? "available" : "unavailable (CPU-only LibTorch or no GPU)");
  facts.emplace_back("torch_intra_op_threads", std::to_string(at::get_num_threads()));
  return facts;
}

void set_single_threaded() {
  at::set_num_threads(1);
  at::set_num_interop_threads(1);
}

}  // namespace detfuzz::kernels
