// Reference greedy NMS in double with torchvision's semantics (torchvision 0.14.1,
// csrc/ops/cpu/nms_kernel.cpp): visit boxes by decreasing score, keep a box unless a kept
// box overlaps it with IoU > iou_threshold (strictly), return kept indices in visiting
// order. Equal scores are visited in index order here; torchvision's sort is not stable,
// so the comparator accepts any order among them.
#pragma once

#include <cstdint>
#include <vector>

#include "box_iou.h"
#include "model/problems.h"

namespace detfuzz::oracles {

// One decision of the reference run that removed a box: the trace a report prints.
struct NmsSuppression {
  std::int64_t kept = 0;
  std::int64_t suppressed = 0;
  double iou = 0;
};

struct NmsReference {
  std::vector<std::int64_t> keep;
  std::vector<NmsSuppression> suppressions;
};

// Indices sorted by decreasing score, ties by increasing index.
std::vector<std::int64_t> score_order(const std::vector<double>& scores);

// Pairs that cannot overlap are skipped with an x-sorted sweep (x_sweep.h) where that is
// exact; nms_quadratic is the plain double loop it is tested against.
NmsReference nms(const NmsProblem& problem,
                 BoxConvention convention = BoxConvention::continuous);
NmsReference nms_quadratic(const NmsProblem& problem, BoxConvention convention = BoxConvention::continuous);

}  // namespace detfuzz::oracles
