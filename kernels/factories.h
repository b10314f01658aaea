// Internal to kernels/ (torch-free): the target factories each op's adapter defines beside
// its port (one op = one stem per folder), and the single switches that the mutant
// catalog (kernels/mutants/) flips in them. A switch at its default is the library's
// behaviour; the mutant is the port with that one line changed.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "kernels/target.h"

namespace detfuzz::kernels {

Target<NmsProblem> torchvision_nms_target(const KernelConfig& config);

// The boxes.numel() above which torchvision's batched_nms of `release` takes one nms per
// class (_batched_nms_vanilla) instead of the coordinate trick, on `device`.
std::int64_t batched_nms_vanilla_above(const TorchvisionRelease& release, Device device);
Target<BoxIouProblem> aten_box_iou_target();
Target<BoxAreaProblem> aten_box_area_target();
Target<BoxCoderProblem> aten_box_coder_target();
Target<RegressionLossProblem> aten_regression_loss_target();
Target<RegressionLossProblem> aten_regression_loss_backward_target();

// torchvision's fastrcnn_loss divides the box loss by labels.numel() (every sampled
// proposal), which is never 0 when there is a proposal; the unguarded alternative divides
// by the number of positives.
enum class BoxLossNormalizer { sampled_proposals, positives_unguarded };
Target<FastRcnnLossProblem> torchvision_fast_rcnn_loss_target(
    BoxLossNormalizer normalizer = BoxLossNormalizer::sampled_proposals);

// set_low_quality_matches_ takes each ground truth's best prediction (max over dim 1);
// swapped takes each prediction's best ground truth (max over dim 0) instead.
enum class LowQualityAxis { per_ground_truth, swapped };
Target<MatcherProblem> torchvision_matcher_target(LowQualityAxis axis = LowQualityAxis::per_ground_truth);

Target<BoxIouProblem> torchvision_generalized_box_iou_target();
Target<GiouLossProblem> torchvision_giou_loss_target();
// `with_penalty` false: the gradient of the IoU loss alone (a mutant's deviation).
Target<GiouLossProblem> torchvision_giou_loss_backward_target(bool with_penalty = true);
std::vector<Target<BatchedNmsProblem>> aten_batched_nms_targets(const KernelConfig& config);
Target<RoiAlignProblem> torchvision_roi_align_target(const KernelConfig& config);
Target<RoiPoolProblem> torchvision_roi_pool_target(const KernelConfig& config);
Target<RoiAlignProblem> torchvision_ps_roi_align_target(const KernelConfig& config);
Target<RoiPoolProblem> torchvision_ps_roi_pool_target(const KernelConfig& config);
Target<RoiAlignBackwardProblem> torchvision_roi_align_backward_target(const KernelConfig& config);
Target<RoiAlignBackwardProblem> torchvision_ps_roi_align_backward_target(const KernelConfig& config);
Target<RoiPoolBackwardProblem> torchvision_roi_pool_backward_target(const KernelConfig& config);
Target<PsRoiPoolBackwardProblem> torchvision_ps_roi_pool_backward_target(const KernelConfig& config);
Target<DeformConv2dProblem> torchvision_deform_conv2d_target(const KernelConfig& config);

// detfuzz's own kernels (kernels/native/), named "native": host emulation on cpu, the CUDA
// kernels on cuda.
// The reduction ORs each kept box's mask words into the removed set from its own 64-box
// block on; from_next_block starts one block late (suppressions within a block are lost).
enum class NativeNmsReduction { from_own_block, from_next_block };
Target<NmsProblem> native_nms_target(NativeNmsReduction reduction = NativeNmsReduction::from_own_block);
Target<BoxIouProblem> native_box_iou_target();
Target<RoiAlignProblem> native_roi_align_target();
Target<RoiPoolProblem> native_roi_pool_target();
Target<RegressionLossProblem> native_regression_loss_target();
// "native:fma": the same host emulation compiled with FMA contraction (x86-64 with -mfma;
// empty where that build is not made).
std::vector<Target<NmsProblem>> native_fma_nms_targets();
std::vector<Target<BoxIouProblem>> native_fma_box_iou_targets();
std::vector<Target<RoiAlignProblem>> native_fma_roi_align_targets();
std::vector<Target<RoiPoolProblem>> native_fma_roi_pool_targets();
std::vector<Target<RegressionLossProblem>> native_fma_regression_loss_targets();

// The mutants of each family (kernels/mutants/<family>_mutants.cpp), named "mutant:<name>",
// with the hidden correct twins that are not library targets ("twin:<op>").
std::vector<Target<NmsProblem>> nms_mutants();
std::vector<Target<BatchedNmsProblem>> batched_nms_mutants(const KernelConfig& config);
std::vector<Target<BoxIouProblem>> box_iou_mutants();
std::vector<Target<BoxCoderProblem>> box_coder_mutants();
std::vector<Target<FastRcnnLossProblem>> fast_rcnn_loss_mutants();
std::vector<Target<GiouLossProblem>> giou_loss_mutants();
std::vector<Target<GiouLossProblem>> giou_loss_backward_mutants();
std::vector<Target<RegressionLossProblem>> regression_loss_backward_mutants();
std::vector<Target<MatcherProblem>> matcher_mutants();
std::vector<Target<RoiAlignProblem>> roi_align_mutants(const KernelConfig& config);
std::vector<Target<RoiPoolProblem>> roi_pool_mutants(const KernelConfig& config);
std::vector<Target<RoiAlignProblem>> ps_roi_align_mutants();
std::vector<Target<RoiPoolProblem>> ps_roi_pool_mutants();
// The twin and mutants of roi_align_backward, or of ps_roi_align_backward.
std::vector<Target<RoiAlignBackwardProblem>> roi_align_backward_family_mutants(bool position_sensitive);
std::vector<Target<RoiPoolBackwardProblem>> roi_pool_backward_mutants();
std::vector<Target<PsRoiPoolBackwardProblem>> ps_roi_pool_backward_mutants();
std::vector<Target<DeformConv2dProblem>> deform_conv2d_mutants();

// The --bind targets of `family` (kernels/plugins/bindings.cpp), resolved and checked
// against the family's contract; instantiated for the problems of families with a contract.
template <class Problem>
std::vector<Target<Problem>> bound_targets(const KernelConfig& config, const std::string& family);

// `target` under another name and description: a port built with one switch flipped.
template <class Problem>
Target<Problem> renamed(Target<Problem> target, std::string name, std::string description) {
  target.name = std::move(name);
  target.description = std::move(description);
  return target;
}

// A copy of `base` under `name` whose run goes through `deviation` (which may rewrite the
// problem, the outputs, or both): the mutants that are a library target plus one change at
// its boundary.
template <class Problem>
Target<Problem> deviating(Target<Problem> base, std::string name, std::string description,
                          std::function<std::vector<HostTensor>(const Target<Problem>& base, const Problem&, DType, Device)>
                              deviation) {
  Target<Problem> target = renamed(base, std::move(name), std::move(description));
  target.run = [base = std::move(base), deviation = std::move(deviation)](const Problem& p, DType dtype, Device device) {
    return deviation(base, p, dtype, device);
  };
  return target;
}

// `twin` run on a copy of the problem that `rewrite` changed: a library op called with an
// argument lost on the way (named "mutant:<name>").
template <class Problem>
Target<Problem> rewriting(Target<Problem> twin, const std::string& name, std::string description,
                          std::function<void(Problem&)> rewrite) {
  return deviating<Problem>(std::move(twin), "mutant:" + name, std::move(description),
                            [rewrite = std::move(rewrite)](const Target<Problem>& base, const Problem& p, DType dtype,
                                                           Device device) {
                              Problem changed = p;
                              rewrite(changed);
                              return base.run(changed, dtype, device);
                            });
}

}  // namespace detfuzz::kernels
