// RapidCheck generators of loss inputs: regression values on dyadic grids, arbitrary and
// near beta (where smooth L1 switches branches); Fast R-CNN heads with 0..all positives,
// logits from plain to far past exp's range, background-only images.
#pragma once

#include <rapidcheck.h>

#include "fuzz/gen/boxes.h"
#include "model/problems.h"

namespace detfuzz::gen {

rc::Gen<RegressionLossProblem> regression_loss_problem(const BoxGenOptions& options);
rc::Gen<FastRcnnLossProblem> fast_rcnn_loss_problem(const BoxGenOptions& options);

}  // namespace detfuzz::gen
