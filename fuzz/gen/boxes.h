// RapidCheck generators of box sets and of the problems built from them. Every value is
// rounded to the case's dtype (round-to-nearest-even) before anyone sees it, and every
// generator shrinks toward fewer boxes, smaller integers and plainer scores.
#pragma once

#include <rapidcheck.h>

#include <string>
#include <vector>

#include "model/dtype.h"
#include "model/problems.h"

namespace detfuzz::gen {

struct BoxGenOptions {
  DType dtype = DType::fp32;
  int max_boxes = 64;    // cap on the boxes of one set (and on each side of box_iou)
  bool hostile = false;  // add NaN, infinities, inverted boxes, bad batch indices (gen/hostile.h)
  // Inside torchvision's documented box domain (0 <= x1 <= x2, 0 <= y1 <= y2): set by the
  // problem generators of ops that document it, unless `hostile` asks for inputs outside.
  bool nonnegative = false;
};

// `options` for an op that documents non-negative boxes: inside that contract unless hostile.
BoxGenOptions within_box_contract(BoxGenOptions options);

// The distributions a box set is drawn from; a set concatenates one to three of them.
enum class Scenario {
  uniform,          // uniform boxes at one scale from 1 to the dtype's range
  grid,             // integer / half-integer / quarter grids: exact arithmetic
  clustered,        // jittered copies around a few centres: dense overlaps
  near_threshold,   // pairs at IoU = focus +- a few ulp of the dtype
  exact_threshold,  // integer pairs whose IoU is exactly the (rational) focus
  duplicates,       // identical boxes
  degenerate,       // zero width and/or height, points
  far_from_origin,  // small boxes at large offsets (coordinates at the dtype's spacing)
  spanning,         // boxes across -max..+max: widths beyond the dtype's range
  extreme,          // coordinates up to 2^70 (not fp16): areas beyond fp32's range
};
std::string scenario_name(Scenario scenario);

// `focus` is the IoU the near/exact-threshold scenarios aim at (the NMS threshold).
rc::Gen<std::vector<Box>> box_set(const BoxGenOptions& options, double focus);

// One box set's worth of scores: distinct, few levels (ties), all equal.
rc::Gen<std::vector<double>> scores(DType dtype, std::size_t count);

// Common thresholds first (dyadic ones make exact ties decidable), then arbitrary ones.
rc::Gen<double> iou_threshold();

rc::Gen<NmsProblem> nms_problem(const BoxGenOptions& options);
rc::Gen<BoxIouProblem> box_iou_problem(const BoxGenOptions& options);
rc::Gen<BoxAreaProblem> box_area_problem(const BoxGenOptions& options);
// batched_nms: ordinary sets plus sets of exactly the strategy-switch counts (below), class
// ids 1..1,000, negative coordinates, scores in another dtype (autocast), mmcv's options.
rc::Gen<BatchedNmsProblem> batched_nms_problem(const BoxGenOptions& options);
const std::vector<int>& batched_nms_switch_counts();
// box_coder: decode (deltas at, around and past the clip; weights (1,1,1,1) and
// (10,10,5,5)) and encode (references shifted, scaled, of zero size).
rc::Gen<BoxCoderProblem> box_coder_problem(const BoxGenOptions& options);
// giou_loss: pairs from two box sets (degenerate ones included), every reduction.
rc::Gen<GiouLossProblem> giou_loss_problem(const BoxGenOptions& options);

Box round_box(DType dtype, const Box& box);

}  // namespace detfuzz::gen
