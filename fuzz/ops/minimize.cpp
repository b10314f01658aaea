#include "fuzz/ops/minimize.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace detfuzz::fuzz {
namespace {

// Binary digits after the point: 0 for integers, 1 for halves, 4 for 0.0625, ~50 for 0.1.
int fraction_bits(double value) {
  int bits = 0;
  while (value != std::floor(value) && bits < 1100) {
    value = std::ldexp(value, 1);
    ++bits;
  }
  return bits;
}

// People read 3 faster than 2.75 and 2.75 faster than 2.7: fewer fraction bits first, then a
// smaller magnitude. A strict order, so minimization terminates.
bool simpler(double candidate, double value) {
  const int candidate_bits = fraction_bits(candidate), value_bits = fraction_bits(value);
  if (candidate_bits != value_bits) return candidate_bits < value_bits;
  return std::fabs(candidate) < std::fabs(value);
}

}  // namespace

std::vector<std::pair<std::size_t, std::size_t>> removal_ranges(std::size_t n) {
  std::vector<std::pair<std::size_t, std::size_t>> ranges;
  // Every range becomes a copy of the case: a large one is cut in at most 64 pieces until
  // it is small enough to go element by element.
  const std::size_t smallest_chunk = n > kMaxElementsToSimplify ? n / 64 : 1;
  for (std::size_t chunk = n / 2 > 0 ? n / 2 : n; chunk >= smallest_chunk && chunk > 0; chunk /= 2)
    for (std::size_t begin = 0; begin < n; begin += chunk)
      ranges.emplace_back(begin, std::min(n, begin + chunk));
  return ranges;
}

std::vector<double> simpler_values(double value, DType dtype) {
  std::vector<double> candidates;
  if (!std::isfinite(value)) return candidates;
  auto consider = [&](double candidate) {
    candidate = round_to(dtype, candidate);
    if (std::isfinite(candidate) && simpler(candidate, value) &&
        std::find(candidates.begin(), candidates.end(), candidate) == candidates.end())
      candidates.push_back(candidate);
  };
  consider(0.0);
  consider(std::trunc(value));
  consider(std::nearbyint(value));
  // A tiny fraction (2^-10) whose failure needs it nonzero has no simpler value toward
  // zero: the integer away from zero has no fraction digits.
  consider(value > 0 ? std::ceil(value) : std::floor(value));
  if (value != 0) {
    const double power = std::copysign(std::ldexp(1.0, std::ilogb(value)), value);
    consider(power);
    consider(power / 2);
  }
  return candidates;
}

std::vector<std::vector<Box>> simpler_boxes(const std::vector<Box>& boxes, DType dtype) {
  std::vector<std::vector<Box>> candidates;
  double min_x = std::numeric_limits<double>::infinity(), min_y = min_x;
  for (const Box& b : boxes) {
    min_x = std::min(min_x, b.x1);
    min_y = std::min(min_y, b.y1);
  }
  if (!boxes.empty() && (min_x != 0 || min_y != 0)) {
    std::vector<Box> moved = boxes;
    bool exact = true;
    for (Box& b : moved) {
      b = {b.x1 - min_x, b.y1 - min_y, b.x2 - min_x, b.y2 - min_y};
      for (double v : {b.x1, b.y1, b.x2, b.y2}) exact = exact && representable(dtype, v);
    }
    if (exact) candidates.push_back(std::move(moved));
  }
  if (boxes.size() > kMaxElementsToSimplify) return candidates;
  for (std::size_t i = 0; i < boxes.size(); ++i)
    for (int coordinate = 0; coordinate < 4; ++coordinate) {
      double Box::*field = coordinate == 0 ? &Box::x1 : coordinate == 1 ? &Box::y1
                         : coordinate == 2 ? &Box::x2 : &Box::y2;
      for (double value : simpler_values(boxes[i].*field, dtype)) {
        std::vector<Box> candidate = boxes;
        candidate[i].*field = value;
        const Box& b = candidate[i];
        if (b.x1 <= b.x2 && b.y1 <= b.y2) candidates.push_back(std::move(candidate));
      }
    }
  return candidates;
}

std::vector<BoxIouProblem> smaller_box_pairs(const BoxIouProblem& p, DType dtype) {
  std::vector<BoxIouProblem> smaller;
  for (auto range : removal_ranges(p.boxes1.size())) smaller.push_back({without(p.boxes1, range), p.boxes2});
  for (auto range : removal_ranges(p.boxes2.size())) smaller.push_back({p.boxes1, without(p.boxes2, range)});
  for (auto& boxes : simpler_boxes(p.boxes1, dtype)) smaller.push_back({boxes, p.boxes2});
  for (auto& boxes : simpler_boxes(p.boxes2, dtype)) smaller.push_back({p.boxes1, boxes});
  return smaller;
}

}  // namespace detfuzz::fuzz
