#include "box_iou.h"

#include <algorithm>
#include <limits>

#include "model/error.h"
#include "running_error.h"

namespace detfuzz::oracles {

double IouTerms::bound(DType compute) const { return error_bound[format_index(compute)]; }
bool IouTerms::range_ok(DType compute) const { return in_range[format_index(compute)]; }

TrackedBox tracked_box(const Box& b, BoxConvention convention) {
  ErrorTracker t;
  TrackedBox box;
  box.convention = convention;
  box.x1 = t.input(b.x1);
  box.y1 = t.input(b.y1);
  box.x2 = t.input(b.x2);
  box.y2 = t.input(b.y2);
  auto extent = [&](const Tracked& lo, const Tracked& hi) {
    Tracked width = t.sub(hi, lo);
    return convention == BoxConvention::legacy_plus_one ? t.add(width, t.input(1.0)) : width;
  };
  box.area = t.mul(extent(box.x1, box.x2), extent(box.y1, box.y2));
  box.in_range = t.in_range();
  return box;
}

std::vector<TrackedBox> tracked_boxes(const std::vector<Box>& boxes, BoxConvention convention) {
  std::vector<TrackedBox> tracked;
  tracked.reserve(boxes.size());
  for (const Box& b : boxes) tracked.push_back(tracked_box(b, convention));
  return tracked;
}

IouTerms iou_terms(const Box& a, const Box& b, BoxConvention convention) {
  return tracked_iou_terms(tracked_box(a, convention), tracked_box(b, convention));
}

IouTerms tracked_iou_terms(const TrackedBox& a, const TrackedBox& b) {
  if (a.convention != b.convention)
    throw Error(ErrorKind::internal, "tracked_iou_terms: the two boxes were tracked with different conventions");
  ErrorTracker t;
  t.join_ranges(a.in_range);
  t.join_ranges(b.in_range);
  const bool legacy = a.convention == BoxConvention::legacy_plus_one;
  const Tracked one = t.input(1.0);
  const Tracked &ax1 = a.x1, &ay1 = a.y1, &ax2 = a.x2, &ay2 = a.y2;
  const Tracked &bx1 = b.x1, &by1 = b.y1, &bx2 = b.x2, &by2 = b.y2;
  const Tracked &area_a = a.area, &area_b = b.area;

  auto overlap = [&](const Tracked& lo_a, const Tracked& hi_a, const Tracked& lo_b, const Tracked& hi_b) {
    Tracked lo = t.max(lo_a, lo_b);
    Tracked hi = t.min(hi_a, hi_b);
    Tracked width = t.sub(hi, lo);
    if (legacy) width = t.add(width, one);
    if (width.value < 0) {
      width.value = 0;
      // hi - lo of exact inputs has its sign in every format (it rounds to 0 only when
      // hi == lo), so a clamped continuous width is exactly 0 everywhere. The legacy +1
      // can round across 0, so there the clamp keeps the error of the unclamped width.
      if (!legacy) width.error = {};
    }
    return width;
  };
  const Tracked inter = t.mul(overlap(ax1, ax2, bx1, bx2), overlap(ay1, ay2, by1, by2));
  const Tracked union_area = t.sub(t.add(area_a, area_b), inter);

  IouTerms terms;
  if (union_area.value == 0) {
    terms.undefined = true;
    terms.value = std::numeric_limits<double>::quiet_NaN();
    terms.in_range = t.in_range();
    return terms;
  }
  const Tracked iou = t.div(inter, union_area);
  terms.value = iou.value;
  terms.error_bound = iou.error;
  terms.in_range = t.in_range();
  return terms;
}

std::vector<OracleValue> box_area(const std::vector<Box>& boxes) {
  std::vector<OracleValue> areas;
  for (const Box& b : boxes) {
    ErrorTracker t;
    areas.push_back(t.result(t.mul(t.sub(t.input(b.x2), t.input(b.x1)), t.sub(t.input(b.y2), t.input(b.y1)))));
  }
  return areas;
}

bool disjoint(const Box& a, const Box& b) {
  return std::min(a.x2, b.x2) <= std::max(a.x1, b.x1) ||
         std::min(a.y2, b.y2) <= std::max(a.y1, b.y1);
}

std::vector<IouTerms> box_iou(const std::vector<Box>& boxes1, const std::vector<Box>& boxes2,
                              BoxConvention convention) {
  std::vector<IouTerms> matrix;
  matrix.reserve(boxes1.size() * boxes2.size());
  const std::vector<TrackedBox> tracked2 = tracked_boxes(boxes2, convention);
  for (const Box& a : boxes1) {
    const TrackedBox tracked_a = tracked_box(a, convention);
    for (const TrackedBox& b : tracked2) matrix.push_back(tracked_iou_terms(tracked_a, b));
  }
  return matrix;
}

}  // namespace detfuzz::oracles
