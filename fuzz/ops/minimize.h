// The domain minimizer's moves, shared by every op: delete elements (ddmin order), and
// replace values by simpler ones. Each op lists its candidates with these; the harness
// accepts a candidate only when the failure keeps its signature.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

#include "model/dtype.h"
#include "model/problems.h"

namespace detfuzz::fuzz {

// Past this many elements a case is shrunk by deletions only: each value candidate copies
// the whole case, so value simplification of n elements costs O(n^2) memory.
inline constexpr std::size_t kMaxElementsToSimplify = 256;

// Half-open ranges to delete from a sequence of `n`: halves, quarters, ..., single elements
// (for n > kMaxElementsToSimplify: down to 64ths).
std::vector<std::pair<std::size_t, std::size_t>> removal_ranges(std::size_t n);

template <class T>
std::vector<T> without(const std::vector<T>& items, std::pair<std::size_t, std::size_t> range) {
  std::vector<T> kept(items.begin(), items.begin() + static_cast<std::ptrdiff_t>(range.first));
  kept.insert(kept.end(), items.begin() + static_cast<std::ptrdiff_t>(range.second), items.end());
  return kept;
}

// Values strictly simpler than `value` (fewer binary fraction digits, then a smaller
// magnitude), representable in `dtype`: 0, the integer toward zero, the nearest integer,
// the integer away from zero, the power of two below, half of it. Strictly simpler means
// minimization ends.
std::vector<double> simpler_values(double value, DType dtype);

// Box lists with one coordinate made simpler (keeping x1 <= x2, y1 <= y2), and the whole
// list moved so its smallest coordinates are 0.
std::vector<std::vector<Box>> simpler_boxes(const std::vector<Box>& boxes, DType dtype);

// Smaller two-set problems (box_iou, generalized_box_iou): deletions from either set, then
// plainer boxes in either.
std::vector<BoxIouProblem> smaller_box_pairs(const BoxIouProblem& problem, DType dtype);

}  // namespace detfuzz::fuzz
