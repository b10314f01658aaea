// Reference class-aware NMS: greedy NMS (oracles/nms.h) run on each class alone, the kept
// boxes merged by decreasing score (ties by index), then cut to max_num. This is what
// torchvision 0.14.1 ops.batched_nms and mmcv 1.7 ops.batched_nms promise; their strategies
// (coordinate offsets, per-class loops, split_thr) are how they get there, never part of
// the expectation.
#pragma once

#include <cstdint>
#include <vector>

#include "model/problems.h"

namespace detfuzz::oracles {

// The boxes NMS compares with each other: one group per class (one group in all when
// class_agnostic), each with the indices of its members in the original problem.
struct NmsGroup {
  std::vector<std::int64_t> members;  // increasing
  NmsProblem problem;                 // members' boxes and scores, same threshold
};
std::vector<NmsGroup> nms_groups(const BatchedNmsProblem& problem);

std::vector<std::int64_t> batched_nms(const BatchedNmsProblem& problem);

// The class offsets of the coordinate trick as a kernel computes them in `dtype`
// (torchvision boxes.py _batched_nms_coordinate_trick, mmcv batched_nms):
// offset(c) = dtype(c) * (max coordinate + 1), each step rounded, and the shifted boxes
// box + offset rounded again. A finding whose kept set matches NMS over these boxes is
// explained by the trick, not by the NMS kernel.
std::vector<Box> offset_boxes(const BatchedNmsProblem& problem, DType dtype);

}  // namespace detfuzz::oracles
