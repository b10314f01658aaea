// torchvision 0.14.1 models/detection/_utils.py Matcher.__call__ and
// set_low_quality_matches_, written with the same ATen calls; thresholds are Python floats
// compared with a tensor of the quality's dtype, as there.
#include "kernels/factories.h"
#include "kernels/tensor_convert.h"
#include "model/error.h"

namespace detfuzz::kernels {
namespace {

at::Tensor match(const at::Tensor& match_quality_matrix, double high, double low, bool allow_low_quality_matches,
                 LowQualityAxis axis) {
  if (match_quality_matrix.numel() == 0)
    throw std::invalid_argument(match_quality_matrix.size(0) == 0
                                    ? "No ground-truth boxes available for one of the images during training"
                                    : "No proposal boxes available for one of the images during training");
  auto [matched_vals, matches] = match_quality_matrix.max(0);
  at::Tensor all_matches = matches.clone();
  at::Tensor below_low_threshold = matched_vals < low;
  at::Tensor between_thresholds = (matched_vals >= low).logical_and(matched_vals < high);
  matches.masked_fill_(below_low_threshold, -1);
  matches.masked_fill_(between_thresholds, -2);
  if (allow_low_quality_matches) {
    const std::int64_t gt_axis = axis == LowQualityAxis::per_ground_truth ? 1 : 0;
    at::Tensor highest_quality_foreach_gt = std::get<0>(match_quality_matrix.max(gt_axis));
    at::Tensor pred_inds_to_update =
        at::where(match_quality_matrix == highest_quality_foreach_gt.unsqueeze(gt_axis))[1];
    matches.index_put_({pred_inds_to_update}, all_matches.index_select(0, pred_inds_to_update));
  }
  return matches;
}

}  // namespace

Target<MatcherProblem> torchvision_matcher_target(LowQualityAxis axis) {
  Target<MatcherProblem> target;
  target.name = "torchvision";
  target.description = "ATen port of torchvision 0.14.1 models/detection/_utils.py Matcher";
  target.availability = aten_availability;
  target.run = [axis](const MatcherProblem& p, DType dtype, Device device) {
    return translating_unsupported([&] {
      at::Tensor quality = values_tensor(p.quality, dtype, device).reshape({p.ground_truths, p.predictions});
      return std::vector<HostTensor>{to_host(match(quality, p.high, p.low, p.allow_low_quality_matches, axis))};
    });
  };
  return target;
}

}  // namespace detfuzz::kernels
