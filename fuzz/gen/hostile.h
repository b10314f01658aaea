// Hostile inputs (`run --hostile`): valid cases with a few values replaced by NaN, +-Inf,
// subnormals or the dtype's extremes, boxes inverted, RoI batch indices out of range. What
// a kernel owes them is no crash, no hang, and a clean error or an output that is NaN or
// garbage only where the input made it so (the ops' judges decide that from the input).
#pragma once

#include <rapidcheck.h>

#include "fuzz/gen/boxes.h"
#include "model/problems.h"

namespace detfuzz::gen {

rc::Gen<NmsProblem> hostile(rc::Gen<NmsProblem> valid, DType dtype);
rc::Gen<BatchedNmsProblem> hostile(rc::Gen<BatchedNmsProblem> valid, DType dtype);
rc::Gen<BoxIouProblem> hostile(rc::Gen<BoxIouProblem> valid, DType dtype);
rc::Gen<BoxAreaProblem> hostile(rc::Gen<BoxAreaProblem> valid, DType dtype);
rc::Gen<BoxCoderProblem> hostile(rc::Gen<BoxCoderProblem> valid, DType dtype);
rc::Gen<RegressionLossProblem> hostile(rc::Gen<RegressionLossProblem> valid, DType dtype);
rc::Gen<FastRcnnLossProblem> hostile(rc::Gen<FastRcnnLossProblem> valid, DType dtype);
rc::Gen<GiouLossProblem> hostile(rc::Gen<GiouLossProblem> valid, DType dtype);
rc::Gen<MatcherProblem> hostile(rc::Gen<MatcherProblem> valid, DType dtype);  // in gen/matcher.cpp
rc::Gen<RoiAlignProblem> hostile(rc::Gen<RoiAlignProblem> valid, DType dtype);
rc::Gen<RoiPoolProblem> hostile(rc::Gen<RoiPoolProblem> valid, DType dtype);
// Hostile RoIs as the forward's, and NaN / Inf / extremes in the gradient.
rc::Gen<RoiAlignBackwardProblem> hostile(rc::Gen<RoiAlignBackwardProblem> valid, DType dtype);
rc::Gen<RoiPoolBackwardProblem> hostile(rc::Gen<RoiPoolBackwardProblem> valid, DType dtype);
rc::Gen<PsRoiPoolBackwardProblem> hostile(rc::Gen<PsRoiPoolBackwardProblem> valid, DType dtype);
// NaN / Inf / extremes in the map, the offsets and the mask.
rc::Gen<DeformConv2dProblem> hostile(rc::Gen<DeformConv2dProblem> valid, DType dtype);

// What makes a value or a box hostile (and its results unconstrained).
bool hostile_value(double value);  // NaN or infinite
bool hostile_box(const Box& box);  // a hostile coordinate, or inverted
// A RoI with a hostile coordinate, or inverted; `batch` images in the map.
bool hostile_roi(const Roi& roi);
bool valid_batch_index(const Roi& roi, std::int64_t batch);

}  // namespace detfuzz::gen
