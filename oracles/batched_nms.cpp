#include "batched_nms.h"

#include <algorithm>
#include <map>

#include <cmath>

#include "nms.h"

namespace detfuzz::oracles {

std::vector<NmsGroup> nms_groups(const BatchedNmsProblem& problem) {
  std::map<std::int64_t, NmsGroup> by_class;
  for (std::size_t i = 0; i < problem.boxes.size(); ++i) {
    NmsGroup& group = by_class[problem.class_agnostic ? 0 : problem.classes[i]];
    group.members.push_back(static_cast<std::int64_t>(i));
    group.problem.boxes.push_back(problem.boxes[i]);
    group.problem.scores.push_back(problem.scores[i]);
    group.problem.iou_threshold = problem.iou_threshold;
  }
  std::vector<NmsGroup> groups;
  for (auto& entry : by_class) groups.push_back(std::move(entry.second));
  return groups;
}

std::vector<std::int64_t> batched_nms(const BatchedNmsProblem& problem) {
  std::vector<std::int64_t> keep;
  for (const NmsGroup& group : nms_groups(problem))
    for (std::int64_t local : nms(group.problem).keep) keep.push_back(group.members[static_cast<std::size_t>(local)]);
  std::stable_sort(keep.begin(), keep.end(), [&](std::int64_t a, std::int64_t b) {
    return problem.scores[static_cast<std::size_t>(a)] > problem.scores[static_cast<std::size_t>(b)] ||
           (problem.scores[static_cast<std::size_t>(a)] == problem.scores[static_cast<std::size_t>(b)] && a < b);
  });
  if (problem.max_num > 0 && keep.size() > static_cast<std::size_t>(problem.max_num))
    keep.resize(static_cast<std::size_t>(problem.max_num));
  return keep;
}

std::vector<Box> offset_boxes(const BatchedNmsProblem& problem, DType dtype) {
  double max_coordinate = -INFINITY;
  for (const Box& b : problem.boxes) max_coordinate = std::max({max_coordinate, b.x1, b.y1, b.x2, b.y2});
  const double step = round_to(dtype, max_coordinate + 1);
  std::vector<Box> shifted;
  shifted.reserve(problem.boxes.size());
  for (std::size_t i = 0; i < problem.boxes.size(); ++i) {
    const double offset = round_to(dtype, round_to(dtype, static_cast<double>(problem.classes[i])) * step);
    const Box& b = problem.boxes[i];
    shifted.push_back({round_to(dtype, b.x1 + offset), round_to(dtype, b.y1 + offset),
                       round_to(dtype, b.x2 + offset), round_to(dtype, b.y2 + offset)});
  }
  return shifted;
}

}  // namespace detfuzz::oracles
