#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <torch/csrc/api/include/torch/version.h>

#include "kernels/factories.h"
#include "kernels/run_policy.h"
#include "kernels/tensor_convert.h"
#include "kernels/torchvision/dispatch.h"

namespace detfuzz::kernels {

namespace {

// Each family lists the library's targets first, then detfuzz's own, then the planted ones
// (listed, fuzzed only by name).
template <class Problem>
std::vector<Target<Problem>> appended(std::vector<Target<Problem>> targets, std::vector<Target<Problem>> more) {
  for (auto& target : more) targets.push_back(std::move(target));
  return targets;
}

// Then the user's own (--bind), fuzzed by default like the library's.
template <class Problem>
std::vector<Target<Problem>> with_bound(const KernelConfig& config, OpId family, std::vector<Target<Problem>> targets) {
  return appended(std::move(targets), bound_targets<Problem>(config, op_name(family)));
}

}  // namespace

std::vector<Target<NmsProblem>> nms_targets(const KernelConfig& config) {
  return with_bound(config, OpId::nms, appended(appended({torchvision_nms_target(config), native_nms_target()}, native_fma_nms_targets()), nms_mutants()));
}

std::vector<Target<BatchedNmsProblem>> batched_nms_targets(const KernelConfig& config) {
  return with_bound(config, OpId::batched_nms, appended(aten_batched_nms_targets(config), batched_nms_mutants(config)));
}

std::vector<Target<BoxIouProblem>> box_iou_targets(const KernelConfig& config) {
  return with_bound(config, OpId::box_iou, appended(appended({aten_box_iou_target(), native_box_iou_target()}, native_fma_box_iou_targets()), box_iou_mutants()));
}

std::vector<Target<BoxAreaProblem>> box_area_targets(const KernelConfig& config) {
  return with_bound<BoxAreaProblem>(config, OpId::box_area, {aten_box_area_target()});
}

std::vector<Target<BoxCoderProblem>> box_coder_targets(const KernelConfig& config) {
  return with_bound(config, OpId::box_coder, appended({aten_box_coder_target()}, box_coder_mutants()));
}

std::vector<Target<RegressionLossProblem>> regression_loss_targets(const KernelConfig&) {
  return appended({aten_regression_loss_target(), native_regression_loss_target()},
                     native_fma_regression_loss_targets());
}

std::vector<Target<FastRcnnLossProblem>> fast_rcnn_loss_targets(const KernelConfig&) {
  return appended({torchvision_fast_rcnn_loss_target()}, fast_rcnn_loss_mutants());
}

std::vector<Target<MatcherProblem>> matcher_targets(const KernelConfig&) {
  return appended({torchvision_matcher_target()}, matcher_mutants());
}

std::vector<Target<BoxIouProblem>> generalized_box_iou_targets(const KernelConfig& config) {
  return with_bound<BoxIouProblem>(config, OpId::generalized_box_iou, {torchvision_generalized_box_iou_target()});
}

std::vector<Target<GiouLossProblem>> giou_loss_targets(const KernelConfig& config) {
  return with_bound(config, OpId::giou_loss, appended({torchvision_giou_loss_target()}, giou_loss_mutants()));
}

std::vector<Target<RoiAlignProblem>> roi_align_targets(const KernelConfig& config) {
  return with_bound(config, OpId::roi_align, appended(appended({torchvision_roi_align_target(config), native_roi_align_target()}, native_fma_roi_align_targets()), roi_align_mutants(config)));
}

std::vector<Target<RoiPoolProblem>> roi_pool_targets(const KernelConfig& config) {
  return with_bound(config, OpId::roi_pool, appended(appended({torchvision_roi_pool_target(config), native_roi_pool_target()}, native_fma_roi_pool_targets()), roi_pool_mutants(config)));
}

std::vector<Target<RoiAlignProblem>> ps_roi_align_targets(const KernelConfig& config) {
  return appended({torchvision_ps_roi_align_target(config)}, ps_roi_align_mutants());
}

std::vector<Target<RoiAlignBackwardProblem>> roi_align_backward_targets(const KernelConfig& config) {
  return appended({torchvision_roi_align_backward_target(config)}, roi_align_backward_family_mutants(false));
}

std::vector<Target<RoiAlignBackwardProblem>> ps_roi_align_backward_targets(const KernelConfig& config) {
  return appended({torchvision_ps_roi_align_backward_target(config)}, roi_align_backward_family_mutants(true));
}

std::vector<Target<RoiPoolBackwardProblem>> roi_pool_backward_targets(const KernelConfig& config) {
  return appended({torchvision_roi_pool_backward_target(config)}, roi_pool_backward_mutants());
}

std::vector<Target<RegressionLossProblem>> regression_loss_backward_targets(const KernelConfig&) {
  return appended({aten_regression_loss_backward_target()}, regression_loss_backward_mutants());
}

std::vector<Target<GiouLossProblem>> giou_loss_backward_targets(const KernelConfig&) {
  return appended({torchvision_giou_loss_backward_target()}, giou_loss_backward_mutants());
}

std::vector<Target<PsRoiPoolBackwardProblem>> ps_roi_pool_backward_targets(const KernelConfig& config) {
  return appended({torchvision_ps_roi_pool_backward_target(config)}, ps_roi_pool_backward_mutants());
}

std::vector<Target<DeformConv2dProblem>> deform_conv2d_targets(const KernelConfig& config) {
  return appended({torchvision_deform_conv2d_target(config)}, deform_conv2d_mutants());
}

std::vector<Target<RoiPoolProblem>> ps_roi_pool_targets(const KernelConfig& config) {
  return with_bound(config, OpId::ps_roi_pool, appended({torchvision_ps_roi_pool_target(config)}, ps_roi_pool_mutants()));
}

std::vector<std::pair<std::string, std::string>> environment(const KernelConfig& config) {
  const LibraryStatus& torchvision = load_torchvision(config);
  std::vector<std::pair<std::string, std::string>> facts;
  facts.emplace_back("torch", TORCH_VERSION);
  facts.emplace_back("torch_cuda", describe(libtorch_cuda()));
  facts.emplace_back("torchvision", torchvision.loaded ? torchvision.version : "unavailable");
  facts.emplace_back("torchvision_lib", torchvision.loaded ? torchvision.path : torchvision.error);
  if (torchvision.loaded) facts.emplace_back("torchvision_cuda", torchvision_cuda_build());
  if (!torchvision.preloaded.empty()) {
    std::string preloaded;
    for (const auto& path : torchvision.preloaded) preloaded += (preloaded.empty() ? "" : ", ") + path;
    facts.emplace_back("torchvision_preloaded", preloaded + " (symbols only, for the library's link to libtorch_python)");
  }
  std::string plugins, bindings;
  for (const auto& path : config.plugin_libraries) plugins += (plugins.empty() ? "" : ", ") + path;
  for (const auto& binding : config.bindings) bindings += (bindings.empty() ? "" : ", ") + binding;
  if (!plugins.empty()) facts.emplace_back("plugin_libraries", plugins);
  if (!bindings.empty()) facts.emplace_back("bindings", bindings);
  const Availability cuda = aten_availability(Device::cuda);
  facts.emplace_back("cuda", cuda.available ? "available" : cuda.reason);
  facts.emplace_back("torch_intra_op_threads", std::to_string(at::get_num_threads()));
  facts.emplace_back("kernel_runs", repeats_description(config));
  facts.emplace_back("deterministic_algorithms", config.deterministic ? "on (--deterministic)" : "off");
  return facts;
}

void set_single_threaded() {
  at::set_num_threads(1);
  at::set_num_interop_threads(1);
}

}  // namespace detfuzz::kernels
