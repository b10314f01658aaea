// Batched NMS mutants. Their twin (twin:batched_nms) is torchvision 0.14.1's
// _batched_nms_vanilla (one nms per class, correct in every dtype torchvision::nms accepts)
// run on boxes and scores promoted to their common dtype, as AMP-safe code does (plain
// torchvision::nms rejects mixed dtypes); each mutant is that with one deviation:
//
//   batched_nms_split_score_buffer  mmcv 1.7's split path (mmcv/ops/nms.py batched_nms, from
//                                   split_thr = 10,000 boxes on): the kept scores are written
//                                   into `scores.new_zeros(...)`, a buffer in the scores'
//                                   dtype, from dets whose dtype is the promotion of boxes and
//                                   scores. Under AMP (fp32 boxes, fp16 scores) that is
//                                   "Index put requires the source and destination dtypes
//                                   match, got Half for the destination and Float for the
//                                   source" — only above the threshold, only in mixed dtype
//   batched_nms_fp16_offsets        the coordinate trick (boxes shifted to start at 0,
//                                   offset by class x (max coordinate + 1)) with the offsets
//                                   computed in fp16, as a box-dtype offset does for fp16
//                                   boxes: past 65,504 they are inf, the boxes NaN, and the
//                                   classes' boxes stop suppressing each other
#include "kernels/aten/batched_nms.h"
#include "kernels/factories.h"

namespace detfuzz::kernels {
namespace {

constexpr std::int64_t kSplitThreshold = 10000;  // boxes, mmcv's split_thr

at::Tensor promoted_vanilla(const at::Tensor& boxes, const at::Tensor& scores, const at::Tensor& idxs,
                            double iou_threshold) {
  const at::ScalarType common = at::promote_types(boxes.scalar_type(), scores.scalar_type());
  return vanilla(boxes.to(common), scores.to(common), idxs, iou_threshold);
}

at::Tensor split_score_buffer(const at::Tensor& boxes, const at::Tensor& scores, const at::Tensor& idxs,
                              double iou_threshold) {
  if (boxes.size(0) < kSplitThreshold) return promoted_vanilla(boxes, scores, idxs, iou_threshold);
  const at::ScalarType common = at::promote_types(boxes.scalar_type(), scores.scalar_type());
  at::Tensor total_mask = at::zeros(scores.sizes(), scores.options().dtype(at::kBool));
  at::Tensor scores_after_nms = at::zeros(scores.sizes(), scores.options());  // scores.new_zeros: the deviation
  at::Tensor classes = std::get<0>(at::_unique(idxs));
  for (std::int64_t c = 0; c < classes.numel(); ++c) {
    at::Tensor mask = (idxs == classes[c]).nonzero().view(-1);
    at::Tensor class_boxes = boxes.index_select(0, mask), class_scores = scores.index_select(0, mask);
    at::Tensor kept = nms(class_boxes.to(common), class_scores.to(common), iou_threshold);
    // mmcv's nms returns dets = cat(boxes, scores): the common dtype.
    at::Tensor dets = at::cat({class_boxes.index_select(0, kept), class_scores.index_select(0, kept).reshape({-1, 1})}, 1);
    total_mask.index_put_({mask.index_select(0, kept)}, true);
    scores_after_nms.index_put_({mask.index_select(0, kept)}, dets.select(1, 4));
  }
  at::Tensor keep = total_mask.nonzero().view(-1);
  return keep.index_select(0, std::get<1>(scores_after_nms.index_select(0, keep).sort(0, true)));
}

at::Tensor fp16_offsets(const at::Tensor& boxes, const at::Tensor& scores, const at::Tensor& idxs,
                        double iou_threshold) {
  if (boxes.numel() == 0) return at::empty({0}, boxes.options().dtype(at::kLong));
  at::Tensor shifted = boxes.to(at::kDouble) - boxes.min().to(at::kDouble);
  at::Tensor offsets = idxs.to(at::kDouble) * (shifted.max() + 1);
  offsets = offsets.to(at::kHalf).to(at::kDouble);  // the deviation
  return nms(shifted + offsets.unsqueeze(1), scores.to(at::kDouble), iou_threshold);
}

}  // namespace

std::vector<Target<BatchedNmsProblem>> batched_nms_mutants(const KernelConfig& config) {
  return {
      torchvision_style_target(config, "twin:batched_nms",
                               "correct twin of the batched NMS mutants: torchvision 0.14.1 _batched_nms_vanilla on "
                               "boxes and scores promoted to their common dtype",
                               promoted_vanilla),
      torchvision_style_target(config, "mutant:batched_nms_split_score_buffer",
                               "per-class NMS that, from 10,000 boxes on, writes kept scores of the boxes' and "
                               "scores' common dtype into a buffer of the scores' dtype (mmcv 1.7's split path)",
                               split_score_buffer),
      torchvision_style_target(config, "mutant:batched_nms_fp16_offsets",
                               "coordinate-trick batched NMS whose class offsets are computed in fp16",
                               fp16_offsets),
  };
}

}  // namespace detfuzz::kernels
