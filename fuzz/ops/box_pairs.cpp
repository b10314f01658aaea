#include "fuzz/ops/box_pairs.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace detfuzz::fuzz {

std::optional<std::string> box_contract_breach(const std::vector<Box>& boxes, const char* set_name) {
  for (std::size_t i = 0; i < boxes.size(); ++i) {
    const Box& b = boxes[i];
    const bool inside = b.x1 >= 0 && b.y1 >= 0 && b.x1 <= b.x2 && b.y1 <= b.y2 && std::isfinite(b.x2) &&
                        std::isfinite(b.y2);  // NaN fails every comparison above
    if (!inside)
      return fmt::format("{}[{}] = [{}, {}, {}, {}] is not a box with 0 <= x1 <= x2, 0 <= y1 <= y2, finite "
                         "(torchvision 0.14.1 ops/boxes.py documents 0 <= x1 < x2 and 0 <= y1 < y2)",
                         set_name, i, b.x1, b.y1, b.x2, b.y2);
  }
  return std::nullopt;
}

compare::OverflowExplainer pair_extent_explainer(const BoxIouProblem& problem, const kernels::Arithmetic& arithmetic,
                                                 DType dtype, bool enclosing) {
  struct Stage {
    const char* name;
    const char* what;
    bool enclosing;
  };
  static constexpr Stage kStages[] = {{kIntersectionExtent, "intersection", false},
                                      {kEnclosingExtent, "enclosing box", true}};
  return [&problem, &arithmetic, dtype, enclosing](std::size_t k) -> std::optional<compare::StageOverflow> {
    if (problem.boxes2.empty()) return std::nullopt;
    const Box& a = problem.boxes1[k / problem.boxes2.size()];
    const Box& b = problem.boxes2[k % problem.boxes2.size()];
    for (const Stage& stage : kStages) {
      if (stage.enclosing && !enclosing) continue;
      if (!arithmetic.in_storage(stage.name)) continue;
      // Differences of two values of one format are exact in double.
      auto extent = [&](double lo_a, double hi_a, double lo_b, double hi_b) {
        return stage.enclosing ? std::max(hi_a, hi_b) - std::min(lo_a, lo_b)
                               : std::min(hi_a, hi_b) - std::max(lo_a, lo_b);
      };
      const double width = extent(a.x1, a.x2, b.x1, b.x2), height = extent(a.y1, a.y2, b.y1, b.y2);
      for (auto [value, axis] : {std::pair{width, "width"}, std::pair{height, "height"}})
        if (value > 0 && std::isinf(round_to(dtype, value)))
          return compare::StageOverflow{fmt::format("{} ({} {})", stage.name, stage.what, axis), value, value,
                                        dtype, arithmetic.source};
    }
    return std::nullopt;
  };
}

}  // namespace detfuzz::fuzz
