#include "fuzz/ops/op_harness.h"

#include <cmath>

namespace detfuzz::fuzz {

double largest_magnitude(const nlohmann::json& value) {
  if (value.is_number()) {
    const double x = std::fabs(value.get<double>());
    return std::isfinite(x) ? x : 0.0;
  }
  double largest = 0;
  if (value.is_array() || value.is_object())
    for (const auto& element : value) largest = std::max(largest, largest_magnitude(element));
  return largest;
}

const OpHarness* Registry::find(const std::string& name) const {
  for (const auto& op : ops)
    if (op->name() == name) return op.get();
  return nullptr;
}

Registry default_registry(const kernels::KernelConfig& config) {
  kernels::check_bindings(config);  // a bad --load/--bind: exit 2 before anything runs
  Registry registry;
  registry.ops.push_back(make_nms_harness(kernels::nms_targets(config)));
  registry.ops.push_back(make_batched_nms_harness(kernels::batched_nms_targets(config)));
  registry.ops.push_back(make_box_iou_harness(kernels::box_iou_targets(config)));
  registry.ops.push_back(make_box_area_harness(kernels::box_area_targets(config)));
  registry.ops.push_back(make_generalized_box_iou_harness(kernels::generalized_box_iou_targets(config)));
  registry.ops.push_back(make_giou_loss_harness(kernels::giou_loss_targets(config)));
  registry.ops.push_back(make_box_coder_harness(kernels::box_coder_targets(config)));
  registry.ops.push_back(make_regression_loss_harness(kernels::regression_loss_targets(config)));
  registry.ops.push_back(make_fast_rcnn_loss_harness(kernels::fast_rcnn_loss_targets(config)));
  registry.ops.push_back(make_matcher_harness(kernels::matcher_targets(config)));
  registry.ops.push_back(make_roi_align_harness(kernels::roi_align_targets(config)));
  registry.ops.push_back(make_roi_pool_harness(kernels::roi_pool_targets(config)));
  return registry;
}

}  // namespace detfuzz::fuzz
