// What the pairwise box ops (box_iou, generalized_box_iou) share beyond the oracle: the
// coordinate differences torchvision's Python takes in the input dtype before _upcast,
// named so that a dtype_overflow finding says which one left the dtype's range.
#pragma once

#include "fuzz/compare/continuous.h"
#include "kernels/target.h"
#include "model/problems.h"

namespace detfuzz::fuzz {

// Stage names, as a target's Arithmetic::storage_stages lists them.
inline constexpr const char* kIntersectionExtent = "rb - lt";  // _box_inter_union
inline constexpr const char* kEnclosingExtent = "rbi - lti";   // generalized_box_iou

// For element k = i * |boxes2| + j: the first of the pair's intersection (and, with
// `enclosing`, enclosing-box) extents that the target computes in `dtype` and that rounds
// to infinity there. A negative extent that overflows is harmless (clamped to 0) and not named.
// torchvision documents its box ops' boxes as "(x1, y1, x2, y2) format with 0 <= x1 < x2 and
// 0 <= y1 < y2" (0.14.1 ops/boxes.py nms, batched_nms, box_area, box_iou,
// generalized_box_iou; ops/giou_loss.py). detfuzz holds kernels to its non-negative,
// finite, non-inverted part and keeps zero-size boxes (x1 == x2) inside: the library's code
// handles them on purpose (eps in the losses, clamp(min=0) of the extents), and degenerate
// boxes are where NaN bugs live. Nothing when every box of `boxes` keeps it; else which one
// breaks it, named `set_name`[i].
std::optional<std::string> box_contract_breach(const std::vector<Box>& boxes, const char* set_name);

compare::OverflowExplainer pair_extent_explainer(const BoxIouProblem& problem, const kernels::Arithmetic& arithmetic,
                                                 DType dtype, bool enclosing);

}  // namespace detfuzz::fuzz
