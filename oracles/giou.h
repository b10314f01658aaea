// Reference generalized IoU in double with running error bounds, in torchvision 0.14.1's
// operation order: ops/boxes.py generalized_box_iou (pairwise, intersection widths
// upcast like box_iou) and ops/giou_loss.py generalized_box_iou_loss (paired, eps in both
// divisions, mean of nothing is 0).
#pragma once

#include <vector>

#include "model/problems.h"
#include "running_error.h"

namespace detfuzz::oracles {

// [boxes1 x boxes2] row-major; undefined where the union or the enclosing box is empty.
std::vector<OracleValue> generalized_box_iou(const BoxIouProblem& problem);

// reduction none: one loss per pair; sum / mean: one value.
std::vector<OracleValue> giou_loss(const GiouLossProblem& problem);

}  // namespace detfuzz::oracles
