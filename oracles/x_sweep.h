// Pruning for the pairwise loops of NMS and its replay: boxes sorted by x1, so that the
// boxes whose x extent can overlap a given box are found by two binary searches. Only
// pairs that overlap with positive width can have a positive IoU, so a loop over these
// candidates decides exactly what a loop over every box decides whenever disjoint pairs
// are decided without looking (continuous convention, threshold >= 0).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "model/problems.h"

namespace detfuzz::oracles {

class XSweep {
 public:
  // `members`: indices into `boxes` to index. Every coordinate must be finite.
  XSweep(const std::vector<Box>& boxes, std::vector<std::int64_t> members) : members_(std::move(members)) {
    std::sort(members_.begin(), members_.end(), [&](std::int64_t a, std::int64_t b) {
      return boxes[static_cast<std::size_t>(a)].x1 < boxes[static_cast<std::size_t>(b)].x1;
    });
    for (std::int64_t m : members_) {
      const Box& box = boxes[static_cast<std::size_t>(m)];
      x1s_.push_back(box.x1);
      max_width_ = std::max(max_width_, box.x2 - box.x1);
    }
    // Rounded up, so that no candidate is lost to the rounding of the search bound.
    max_width_ = std::nextafter(max_width_, INFINITY);
  }

  // Calls visit(index) for every indexed box whose x extent may overlap `box`'s (and some
  // that do not: callers still check).
  template <class Visit>
  void for_each_candidate(const Box& box, Visit&& visit) const {
    const double low = std::nextafter(box.x1 - max_width_, -INFINITY);
    auto first = std::upper_bound(x1s_.begin(), x1s_.end(), low);
    auto last = std::lower_bound(first, x1s_.end(), box.x2);
    for (auto it = first; it != last; ++it) visit(members_[static_cast<std::size_t>(it - x1s_.begin())]);
  }

  static bool all_finite(const std::vector<Box>& boxes) {
    return std::all_of(boxes.begin(), boxes.end(), [](const Box& b) {
      return std::isfinite(b.x1) && std::isfinite(b.y1) && std::isfinite(b.x2) && std::isfinite(b.y2);
    });
  }

 private:
  std::vector<std::int64_t> members_;
  std::vector<double> x1s_;
  double max_width_ = 0;
};

}  // namespace detfuzz::oracles
