#include "kernels/mutants/catalog.h"

namespace detfuzz::kernels {
namespace {

const std::vector<DType> kAll{DType::fp16, DType::bf16, DType::fp32, DType::fp64};
const std::vector<DType> kWide{DType::fp32, DType::fp64};

}  // namespace

// The dtypes are those the mutant's deviation shows in and its twin is correct in; the
// library twins (torchvision, aten) have known upstream findings in fp16/bf16
// (corpus/cases), so their mutants are measured in fp32 and fp64, and roi_pool's in fp32
// only (its fp64 kernel starts the max at -FLT_MAX: corpus/cases/roi_pool-fp64-mismatch-*).
const std::vector<MutantSpec>& mutant_catalog() {
  static const std::vector<MutantSpec> catalog{
      {"mutant:nms_greater_equal", "nms", "twin:nms", kAll, "NMS suppressing at IoU == threshold (>= instead of >)"},
      {"mutant:nms_assumes_sorted", "nms", "twin:nms", kAll, "NMS that assumes its input is sorted by score"},
      {"mutant:nms_fp16_areas", "nms", "twin:nms", kAll, "NMS computing box areas in fp16 (overflow for large boxes)"},
      {"mutant:nms_raises_on_empty", "nms", "twin:nms", kAll, "empty input (0 boxes) raising instead of an empty keep"},
      {"mutant:nms_crash_7x3", "nms", "twin:nms", {DType::fp32}, "a kernel that segfaults on one input shape"},
      {"mutant:nms_hang_5x9", "nms", "twin:nms", {DType::fp32}, "a kernel that never returns on one input"},
      {"mutant:native_nms_reduction_skips_own_block", "nms", "native", kAll,
       "bitmask NMS whose reduction starts one 64-box block late (suppressions within a block lost)"},
      {"mutant:batched_nms_split_score_buffer", "batched_nms", "twin:batched_nms", {DType::fp32},
       "mmcv's split path writing fp32 kept scores into an fp16 buffer (Half/Float index_put crash under AMP)",
       10000},
      {"mutant:batched_nms_fp16_offsets", "batched_nms", "twin:batched_nms", kWide,
       "batched NMS class offsets computed in fp16"},
      {"mutant:box_iou_legacy_plus_one", "box_iou", "twin:box_iou", kAll,
       "the legacy +1 pixel convention in the areas only"},
      {"mutant:box_iou_empty_shape", "box_iou", "aten", kWide, "empty input returning a wrong shape"},
      {"mutant:box_iou_fp64_output", "box_iou", "aten", {DType::fp32},
       "an output silently promoted to float64"},
      {"mutant:box_decode_unclamped", "box_coder", "torchvision", kWide, "box decode without the dw/dh clamp"},
      {"mutant:giou_loss_without_eps", "giou_loss", "torchvision", kWide, "GIoU loss without eps (NaN on degenerate boxes)"},
      {"mutant:giou_loss_backward_without_eps", "giou_loss_backward", "torchvision", kWide,
       "GIoU loss gradient without eps (NaN on degenerate boxes)"},
      {"mutant:giou_loss_backward_iou_only", "giou_loss_backward", "torchvision", kWide,
       "GIoU loss gradient without the enclosing-box penalty (disjoint boxes get no gradient)"},
      {"mutant:regression_loss_backward_mean_as_sum", "regression_loss_backward", "torch", kWide,
       "loss gradient of a mean reduction taken as the sum's (N times too large)"},
      {"mutant:smooth_l1_backward_zero_beta_nan", "regression_loss_backward", "torch", kWide,
       "smooth L1 gradient with beta 0 as torch < 2.1's CUDA kernel: NaN at a zero residual (pytorch#96813)"},
      {"mutant:fast_rcnn_loss_unguarded", "fast_rcnn_loss", "torchvision", kWide,
       "detection loss normalized by the number of positives without a guard (NaN with no objects)"},
      {"mutant:matcher_swapped_low_quality_axis", "matcher", "torchvision", kWide,
       "anchor matcher with its two argmax axes mixed up"},
      {"mutant:roi_align_ignores_spatial_scale", "roi_align", "torchvision", kWide, "RoIAlign ignoring spatial_scale"},
      {"mutant:roi_align_ignores_aligned", "roi_align", "torchvision", kWide, "RoIAlign ignoring the aligned flag"},
      {"mutant:roi_pool_ignores_spatial_scale", "roi_pool", "torchvision", {DType::fp32}, "RoIPool ignoring spatial_scale"},
      {"mutant:ps_roi_align_ignores_spatial_scale", "ps_roi_align", "twin:ps_roi_align", kAll,
       "PSRoIAlign ignoring spatial_scale"},
      {"mutant:ps_roi_align_channel_off_by_one", "ps_roi_align", "twin:ps_roi_align", kAll,
       "PSRoIAlign reading the next input channel for each bin"},
      {"mutant:ps_roi_pool_ignores_spatial_scale", "ps_roi_pool", "twin:ps_roi_pool", kAll,
       "PSRoIPool ignoring spatial_scale"},
      {"mutant:ps_roi_pool_channel_off_by_one", "ps_roi_pool", "twin:ps_roi_pool", kAll,
       "PSRoIPool reading the next input channel for each bin"},
      {"mutant:ps_roi_pool_clips_before_last_pixel", "ps_roi_pool", "twin:ps_roi_pool", kAll,
       "PSRoIPool dropping the map's last row and column (torchvision's forward)"},
      {"mutant:roi_align_backward_drops_corner", "roi_align_backward", "twin:roi_align_backward", kAll,
       "RoIAlign backward that drops one bilinear corner's gradient"},
      {"mutant:roi_align_backward_ignores_spatial_scale", "roi_align_backward", "twin:roi_align_backward", kAll,
       "RoIAlign backward ignoring spatial_scale (the gradient lands on the wrong pixels)"},
      {"mutant:ps_roi_align_backward_channel_off_by_one", "ps_roi_align_backward", "twin:ps_roi_align_backward",
       kAll, "PSRoIAlign backward scattering into the next input channel"},
      {"mutant:roi_pool_backward_assigns", "roi_pool_backward", "twin:roi_pool_backward", kAll,
       "RoIPool backward assigning instead of adding (bins sharing an argmax lose gradient)"},
      {"mutant:roi_pool_backward_channel_off_by_one", "roi_pool_backward", "twin:roi_pool_backward", kAll,
       "RoIPool backward adding into the next channel"},
      {"mutant:ps_roi_pool_backward_channel_off_by_one", "ps_roi_pool_backward", "twin:ps_roi_pool_backward", kAll,
       "PSRoIPool backward adding each bin's share into the next input channel"},
      {"mutant:ps_roi_pool_backward_clips_before_last_pixel", "ps_roi_pool_backward", "twin:ps_roi_pool_backward",
       kAll, "PSRoIPool backward leaving the map's last row and column without gradient (torchvision's forward clip)"},
      {"mutant:ps_roi_align_backward_drops_corner", "ps_roi_align_backward", "twin:ps_roi_align_backward", kAll,
       "PSRoIAlign backward that drops one bilinear corner's gradient"},
      {"mutant:deform_conv2d_swaps_offset_xy", "deform_conv2d", "twin:deform_conv2d", kAll,
       "deform_conv2d reading each tap's (dy, dx) offset pair as (dx, dy)"},
      {"mutant:deform_conv2d_ignores_mask", "deform_conv2d", "twin:deform_conv2d", kAll,
       "deform_conv2d weighing every sample 1 whatever the mask (DCNv1 where v2 was asked)"},
  };
  return catalog;
}

}  // namespace detfuzz::kernels
