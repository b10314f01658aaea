#include "giou.h"

#include <cmath>

#include "box_iou.h"

namespace detfuzz::oracles {
namespace {

// A pair's tracker takes in the range flags of the steps its boxes took (tracked_box).
OracleValue pairwise(const TrackedBox& a, const TrackedBox& b) {
  ErrorTracker t;
  t.join_ranges(a.in_range);
  t.join_ranges(b.in_range);
  auto clamped = [&](Tracked width) {
    if (width.value < 0) width = t.input(0.0);  // exact inputs: the sign is right in every format
    return width;
  };
  const Tracked inter = t.mul(clamped(t.sub(t.min(a.x2, b.x2), t.max(a.x1, b.x1))),
                              clamped(t.sub(t.min(a.y2, b.y2), t.max(a.y1, b.y1))));
  const Tracked union_area = t.sub(t.add(a.area, b.area), inter);
  const Tracked enclosing = t.mul(clamped(t.sub(t.max(a.x2, b.x2), t.min(a.x1, b.x1))),
                                  clamped(t.sub(t.max(a.y2, b.y2), t.min(a.y1, b.y1))));
  if (union_area.value == 0 || enclosing.value == 0) return t.result(t.input(NAN), true);
  const Tracked iou = t.div(inter, union_area);
  return t.result(t.sub(iou, t.div(t.sub(enclosing, union_area), enclosing)));
}

Tracked loss_term(ErrorTracker& t, const TrackedBox& a, const TrackedBox& b, const Tracked& eps) {
  t.join_ranges(a.in_range);
  t.join_ranges(b.in_range);
  const Tracked xk1 = t.max(a.x1, b.x1), yk1 = t.max(a.y1, b.y1);
  const Tracked xk2 = t.min(a.x2, b.x2), yk2 = t.min(a.y2, b.y2);
  const bool overlap = yk2.value > yk1.value && xk2.value > xk1.value;
  const Tracked inter = overlap ? t.mul(t.sub(xk2, xk1), t.sub(yk2, yk1)) : t.input(0.0);
  const Tracked union_area = t.sub(t.add(a.area, b.area), inter);
  const Tracked iou = t.div(inter, t.add(union_area, eps));
  const Tracked enclosing = t.mul(t.sub(t.max(a.x2, b.x2), t.min(a.x1, b.x1)), t.sub(t.max(a.y2, b.y2), t.min(a.y1, b.y1)));
  const Tracked miou = t.sub(iou, t.div(t.sub(enclosing, union_area), t.add(enclosing, eps)));
  return t.sub(t.input(1.0), miou);
}

}  // namespace

std::vector<OracleValue> generalized_box_iou(const BoxIouProblem& p) {
  std::vector<OracleValue> out;
  out.reserve(p.boxes1.size() * p.boxes2.size());
  const std::vector<TrackedBox> tracked2 = tracked_boxes(p.boxes2);
  for (const Box& a : p.boxes1) {
    const TrackedBox tracked_a = tracked_box(a);
    for (const TrackedBox& b : tracked2) out.push_back(pairwise(tracked_a, b));
  }
  return out;
}

std::vector<OracleValue> giou_loss(const GiouLossProblem& p) {
  std::vector<OracleValue> out;
  if (p.reduction == RegressionLossProblem::Reduction::none) {
    for (std::size_t i = 0; i < p.boxes1.size(); ++i) {
      ErrorTracker t;
      out.push_back(t.result(loss_term(t, tracked_box(p.boxes1[i]), tracked_box(p.boxes2[i]), t.input(p.eps))));
    }
    return out;
  }
  ErrorTracker t;
  std::vector<Tracked> terms;
  for (std::size_t i = 0; i < p.boxes1.size(); ++i)
    terms.push_back(loss_term(t, tracked_box(p.boxes1[i]), tracked_box(p.boxes2[i]), t.input(p.eps)));
  Tracked total = t.reduction_sum(terms);
  // torchvision: loss.mean() if loss.numel() > 0 else 0.0 * loss.sum()
  if (p.reduction == RegressionLossProblem::Reduction::mean && !p.boxes1.empty())
    total = t.div(total, t.input(static_cast<double>(p.boxes1.size())));
  out.push_back(t.result(total));
  return out;
}

}  // namespace detfuzz::oracles
