// Reference IoU in double. Mirrors the arithmetic of torchvision 0.14.1
// (torchvision/ops/boxes.py `_box_inter_union`, csrc/ops/cpu/nms_kernel.cpp): widths as
// x2 - x1, intersection widths clamped at 0, union = (area1 + area2) - inter, then one
// division. That canonical order is shared by torchvision's CUDA devIoU, mmcv and
// detectron2, so the running error bound below describes what those kernels can do.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "model/dtype.h"
#include "model/problems.h"
#include "running_error.h"

namespace detfuzz::oracles {

// Everything a comparator needs to judge one IoU a kernel computed.
struct IouTerms {
  double value = 0;        // the IoU (NaN when undefined)
  bool undefined = false;  // both boxes have zero area: 0/0 has no true value
  // Per float format (kFloatDTypes order): first-order bound on |IoU rounded through that
  // format - true IoU| for the canonical evaluation order; 0 when every step is exact.
  std::array<double, kFloatDTypes.size()> error_bound{};
  // Per format: every intermediate (coordinates, widths, areas, union) lies within its
  // normal range; otherwise a non-finite or wildly wrong result is a range hazard.
  std::array<bool, kFloatDTypes.size()> in_range{};

  double bound(DType compute) const;
  bool range_ok(DType compute) const;
};

// Second-order terms and equivalent reorderings (a kernel computing the quotient through a
// reciprocal, or (a1 - inter) + a2) stay within twice the first-order bound.
inline constexpr double kIouBoundSafety = 2.0;

IouTerms iou_terms(const Box& a, const Box& b,
                   BoxConvention convention = BoxConvention::continuous);

// A box as the pairwise oracles read it: its coordinates as inputs and its area, tracked, with
// the range flags of those steps. Made once per box, the pairs of a matrix share it: the
// same values, bounds and flags as each pair computing them (n + m areas instead of 2nm).
struct TrackedBox {
  Tracked x1, y1, x2, y2, area;
  std::array<bool, kFloatDTypes.size()> in_range{};
  BoxConvention convention = BoxConvention::continuous;
};

TrackedBox tracked_box(const Box& b, BoxConvention convention = BoxConvention::continuous);
std::vector<TrackedBox> tracked_boxes(const std::vector<Box>& boxes,
                                      BoxConvention convention = BoxConvention::continuous);
// Both boxes made with the same convention.
IouTerms tracked_iou_terms(const TrackedBox& a, const TrackedBox& b);

// (x2 - x1) * (y2 - y1) per box, with its error bound per format (box_area).
std::vector<OracleValue> box_area(const std::vector<Box>& boxes);

// Continuous convention: true when the boxes' intersection is empty or a line, so their
// IoU is exactly 0 (or undefined) in every format. A cheap pre-check for quadratic loops.
bool disjoint(const Box& a, const Box& b);

// The pairwise [boxes1.size() x boxes2.size()] matrix, row-major.
std::vector<IouTerms> box_iou(const std::vector<Box>& boxes1, const std::vector<Box>& boxes2,
                              BoxConvention convention = BoxConvention::continuous);

}  // namespace detfuzz::oracles
