#include "fuzz/gen/hostile.h"

#include <cmath>
#include <limits>

#include "fuzz/gen/common.h"

namespace detfuzz::gen {
namespace {

// The values that break kernels: NaN, infinities, the smallest subnormal, the extremes.
rc::Gen<double> hostile_number(DType dtype) {
  const FloatFormat& format = float_format(dtype);
  const double subnormal = std::ldexp(1.0, format.min_normal_exponent - format.precision_bits + 1);
  return rc::gen::element(std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
                          -std::numeric_limits<double>::infinity(), subnormal, -subnormal, format.max_finite,
                          -format.max_finite);
}

// Up to three edits, each (which element, which field, a hostile value, or an inversion).
struct Edit {
  std::size_t element, field;
  double value;
  bool invert;
};

rc::Gen<std::vector<Edit>> edits(DType dtype) {
  auto edit = rc::gen::map(rc::gen::tuple(in_range<std::size_t>(0, 1 << 16), in_range<std::size_t>(0, 5),
                                          hostile_number(dtype), rc::gen::element(false, false, true)),
                           [](const std::tuple<std::size_t, std::size_t, double, bool>& t) {
                             auto [element, field, value, invert] = t;
                             return Edit{element, field, value, invert};
                           });
  return rc::gen::mapcat(in_range(1, 4), [edit](int n) {
    return rc::gen::container<std::vector<Edit>>(static_cast<std::size_t>(n), edit);
  });
}

void apply(std::vector<Box>& boxes, const Edit& e) {
  if (boxes.empty()) return;
  Box& b = boxes[e.element % boxes.size()];
  if (e.invert) {
    std::swap(b.x1, b.x2);
    return;
  }
  double Box::*fields[4] = {&Box::x1, &Box::y1, &Box::x2, &Box::y2};
  b.*fields[e.field % 4] = e.value;
}

}  // namespace

bool hostile_value(double value) { return !std::isfinite(value); }

bool hostile_box(const Box& b) {
  return hostile_value(b.x1) || hostile_value(b.y1) || hostile_value(b.x2) || hostile_value(b.y2) || b.x1 > b.x2 ||
         b.y1 > b.y2;
}

bool hostile_roi(const Roi& r) { return hostile_box({r.x1, r.y1, r.x2, r.y2}); }

bool valid_batch_index(const Roi& roi, std::int64_t batch) {
  return std::isfinite(roi.batch_index) && roi.batch_index >= 0 && roi.batch_index < static_cast<double>(batch) &&
         std::floor(roi.batch_index) == roi.batch_index;
}

namespace {

// Problems made of boxes with one score each (nms, batched_nms).
template <class Problem>
rc::Gen<Problem> hostile_scored_boxes(rc::Gen<Problem> valid, DType dtype) {
  return rc::gen::map(rc::gen::pair(valid, edits(dtype)), [](std::pair<Problem, std::vector<Edit>> p) {
    for (const Edit& e : p.second) {
      if (e.field == 4 && !p.first.scores.empty()) p.first.scores[e.element % p.first.scores.size()] = e.value;
      else apply(p.first.boxes, e);
    }
    return p.first;
  });
}

}  // namespace

rc::Gen<NmsProblem> hostile(rc::Gen<NmsProblem> valid, DType dtype) { return hostile_scored_boxes(valid, dtype); }

rc::Gen<BatchedNmsProblem> hostile(rc::Gen<BatchedNmsProblem> valid, DType dtype) {
  return hostile_scored_boxes(valid, dtype);
}

rc::Gen<BoxCoderProblem> hostile(rc::Gen<BoxCoderProblem> valid, DType dtype) {
  return rc::gen::map(rc::gen::pair(valid, edits(dtype)), [](std::pair<BoxCoderProblem, std::vector<Edit>> p) {
    BoxCoderProblem& problem = p.first;
    for (const Edit& e : p.second) {
      if (e.field == 4 && !problem.deltas.empty()) problem.deltas[e.element % problem.deltas.size()][e.element % 4] = e.value;
      else if (e.field == 4) apply(problem.references, e);
      else apply(problem.boxes, e);
    }
    return problem;
  });
}

rc::Gen<RegressionLossProblem> hostile(rc::Gen<RegressionLossProblem> valid, DType dtype) {
  return rc::gen::map(rc::gen::pair(valid, edits(dtype)), [](std::pair<RegressionLossProblem, std::vector<Edit>> p) {
    auto& values = p.second.empty() || p.second.front().field % 2 ? p.first.input : p.first.target;
    for (const Edit& e : p.second)
      if (!values.empty()) values[e.element % values.size()] = e.value;
    return p.first;
  });
}

rc::Gen<FastRcnnLossProblem> hostile(rc::Gen<FastRcnnLossProblem> valid, DType dtype) {
  return rc::gen::map(rc::gen::pair(valid, edits(dtype)), [](std::pair<FastRcnnLossProblem, std::vector<Edit>> p) {
    for (const Edit& e : p.second) {
      auto& values = e.field % 2 ? p.first.class_logits : p.first.box_regression;
      if (!values.empty()) values[e.element % values.size()] = e.value;
    }
    return p.first;
  });
}

rc::Gen<GiouLossProblem> hostile(rc::Gen<GiouLossProblem> valid, DType dtype) {
  return rc::gen::map(rc::gen::pair(valid, edits(dtype)), [](std::pair<GiouLossProblem, std::vector<Edit>> p) {
    for (const Edit& e : p.second) apply(e.element % 2 ? p.first.boxes1 : p.first.boxes2, e);
    return p.first;
  });
}

rc::Gen<BoxAreaProblem> hostile(rc::Gen<BoxAreaProblem> valid, DType dtype) {
  return rc::gen::map(rc::gen::pair(valid, edits(dtype)), [](std::pair<BoxAreaProblem, std::vector<Edit>> p) {
    for (const Edit& e : p.second) apply(p.first.boxes, e);
    return p.first;
  });
}

rc::Gen<BoxIouProblem> hostile(rc::Gen<BoxIouProblem> valid, DType dtype) {
  return rc::gen::map(rc::gen::pair(valid, edits(dtype)), [](std::pair<BoxIouProblem, std::vector<Edit>> p) {
    for (const Edit& e : p.second) apply(e.element % 2 ? p.first.boxes1 : p.first.boxes2, e);
    return p.first;
  });
}

namespace {

// The values a hostile edit of a RoI problem may replace: the map's, or a backward's gradient.
std::vector<double>& editable_values(RoiAlignProblem& p) { return p.input.values; }
std::vector<double>& editable_values(RoiPoolProblem& p) { return p.input.values; }
template <class Forward>
std::vector<double>& editable_values(GradientOf<Forward>& p) { return p.grad; }
std::vector<double>& editable_values(RoiPoolBackwardProblem& p) { return p.grad; }
template <class Problem>
Problem& roi_part(Problem& p) { return p; }
template <class Forward>
Forward& roi_part(GradientOf<Forward>& p) { return p.forward; }
RoiPoolProblem& roi_part(RoiPoolBackwardProblem& p) { return p.forward; }

template <class Problem>
rc::Gen<Problem> hostile_rois(rc::Gen<Problem> valid, DType dtype) {
  return rc::gen::map(rc::gen::pair(valid, edits(dtype)), [](std::pair<Problem, std::vector<Edit>> p) {
    Problem& problem = p.first;
    std::vector<double>& values = editable_values(problem);
    auto& rois = roi_part(problem).rois;
    for (const Edit& e : p.second) {
      if (e.field == 4) {  // a value itself, or a batch index out of range
        if (!values.empty() && e.invert)
          values[e.element % values.size()] = e.value;
        else if (!rois.empty())
          rois[e.element % rois.size()].batch_index =
              static_cast<double>(roi_part(problem).input.batch + static_cast<std::int64_t>(e.element % 3));
        continue;
      }
      std::vector<Box> boxes;
      for (const Roi& r : rois) boxes.push_back({r.x1, r.y1, r.x2, r.y2});
      apply(boxes, e);
      for (std::size_t i = 0; i < boxes.size(); ++i)
        rois[i] = {rois[i].batch_index, boxes[i].x1, boxes[i].y1, boxes[i].x2, boxes[i].y2};
    }
    return problem;
  });
}

}  // namespace

rc::Gen<RoiAlignProblem> hostile(rc::Gen<RoiAlignProblem> valid, DType dtype) { return hostile_rois(valid, dtype); }
rc::Gen<RoiPoolProblem> hostile(rc::Gen<RoiPoolProblem> valid, DType dtype) { return hostile_rois(valid, dtype); }
rc::Gen<RoiAlignBackwardProblem> hostile(rc::Gen<RoiAlignBackwardProblem> valid, DType dtype) {
  return hostile_rois(valid, dtype);
}
rc::Gen<RoiPoolBackwardProblem> hostile(rc::Gen<RoiPoolBackwardProblem> valid, DType dtype) {
  return hostile_rois(valid, dtype);
}
rc::Gen<PsRoiPoolBackwardProblem> hostile(rc::Gen<PsRoiPoolBackwardProblem> valid, DType dtype) {
  return hostile_rois(valid, dtype);
}

}  // namespace detfuzz::gen

namespace detfuzz::gen {

// deform_conv2d: hostile numbers into the map, the offsets (NaN positions reach the kernel's
// int casts) or the mask; field 0-1 the map, 2-3 the offsets, 4 the mask (the map without one).
rc::Gen<DeformConv2dProblem> hostile(rc::Gen<DeformConv2dProblem> valid, DType dtype) {
  return rc::gen::map(rc::gen::pair(valid, edits(dtype)), [](std::pair<DeformConv2dProblem, std::vector<Edit>> p) {
    DeformConv2dProblem& problem = p.first;
    for (const Edit& e : p.second) {
      std::vector<double>& values = e.field < 2 ? problem.input : e.field < 4 || problem.mask.empty() ? problem.offset : problem.mask;
      if (!values.empty()) values[e.element % values.size()] = e.value;
    }
    return problem;
  });
}

}  // namespace detfuzz::gen
