#include "nms.h"

#include "x_sweep.h"

#include <algorithm>
#include <numeric>
#include <optional>

namespace detfuzz::oracles {
namespace {

// Each box tracked on its first pair and kept: a kept box meets every candidate it may
// suppress, and tracking its inputs and area again for each was half of a pair's cost.
class LazyTrackedBoxes {
 public:
  LazyTrackedBoxes(const std::vector<Box>& boxes, BoxConvention convention)
      : boxes_(boxes), convention_(convention), tracked_(boxes.size()) {}
  const TrackedBox& operator[](std::int64_t i) {
    auto& slot = tracked_[static_cast<std::size_t>(i)];
    if (!slot) slot = tracked_box(boxes_[static_cast<std::size_t>(i)], convention_);
    return *slot;
  }

 private:
  const std::vector<Box>& boxes_;
  BoxConvention convention_;
  std::vector<std::optional<TrackedBox>> tracked_;
};

}  // namespace

std::vector<std::int64_t> score_order(const std::vector<double>& scores) {
  std::vector<std::int64_t> order(scores.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::int64_t a, std::int64_t b) { return scores[a] > scores[b]; });
  return order;
}

NmsReference nms_quadratic(const NmsProblem& problem, BoxConvention convention) {
  const auto& boxes = problem.boxes;
  const std::vector<std::int64_t> order = score_order(problem.scores);
  std::vector<bool> suppressed(boxes.size(), false);
  // A disjoint pair has IoU 0 (or 0/0), which never exceeds a non-negative threshold.
  const bool skip_disjoint =
      convention == BoxConvention::continuous && problem.iou_threshold >= 0;

  LazyTrackedBoxes tracked(boxes, convention);
  NmsReference reference;
  for (std::size_t oi = 0; oi < order.size(); ++oi) {
    const std::int64_t i = order[oi];
    if (suppressed[i]) continue;
    reference.keep.push_back(i);
    for (std::size_t oj = oi + 1; oj < order.size(); ++oj) {
      const std::int64_t j = order[oj];
      if (suppressed[j]) continue;
      if (skip_disjoint && disjoint(boxes[i], boxes[j])) continue;
      const IouTerms terms = tracked_iou_terms(tracked[i], tracked[j]);
      // An undefined IoU (0/0) compares false, as it does in every IEEE kernel.
      if (terms.value > problem.iou_threshold) {
        suppressed[j] = true;
        reference.suppressions.push_back({i, j, terms.value});
      }
    }
  }
  return reference;
}

NmsReference nms(const NmsProblem& problem, BoxConvention convention) {
  if (convention != BoxConvention::continuous || !(problem.iou_threshold >= 0) || !XSweep::all_finite(problem.boxes))
    return nms_quadratic(problem, convention);
  // The same visits as nms_quadratic, each kept box looking only at the boxes it can overlap.
  const auto& boxes = problem.boxes;
  const std::vector<std::int64_t> order = score_order(problem.scores);
  std::vector<std::size_t> rank(boxes.size());
  for (std::size_t r = 0; r < order.size(); ++r) rank[static_cast<std::size_t>(order[r])] = r;
  const XSweep sweep(boxes, order);
  std::vector<bool> suppressed(boxes.size(), false);
  LazyTrackedBoxes tracked(boxes, convention);
  NmsReference reference;
  for (std::int64_t i : order) {
    if (suppressed[i]) continue;
    reference.keep.push_back(i);
    sweep.for_each_candidate(boxes[i], [&](std::int64_t j) {
      if (rank[j] <= rank[i] || suppressed[j] || disjoint(boxes[i], boxes[j])) return;
      const IouTerms terms = tracked_iou_terms(tracked[i], tracked[j]);
      if (terms.value > problem.iou_threshold) {
        suppressed[j] = true;
        reference.suppressions.push_back({i, j, terms.value});
      }
    });
  }
  return reference;
}

}  // namespace detfuzz::oracles
