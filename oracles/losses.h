// Reference detection losses in double with running error bounds (running_error.h), in
// the operation order of PyTorch 1.13 (aten/src/ATen/native/Loss.cpp smooth_l1 / l1,
// log_softmax + nll_loss) and torchvision 0.14.1 (models/detection/roi_heads.py
// fastrcnn_loss).
#pragma once

#include <vector>

#include "model/problems.h"
#include "running_error.h"

namespace detfuzz::oracles {

// One expected loss value. Smooth L1 branches on |x - y| < beta; where rounding in a format
// may take the other branch, `low`/`high` span both branch values for that format.
struct LossValue {
  OracleValue value;
  std::array<double, kFloatDTypes.size()> low{}, high{};
};

// reduction none: one value per element; sum / mean: one value (mean of nothing: undefined).
std::vector<LossValue> regression_loss(const RegressionLossProblem& problem);

// {classification_loss, box_loss}.
std::vector<LossValue> fast_rcnn_loss(const FastRcnnLossProblem& problem);

}  // namespace detfuzz::oracles
