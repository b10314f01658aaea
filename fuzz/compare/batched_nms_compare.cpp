#include "fuzz/compare/batched_nms_compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "corpus/case_json.h"
#include "fuzz/compare/contract.h"
#include "fuzz/compare/nms_replay.h"
#include "oracles/batched_nms.h"

namespace detfuzz::compare {
namespace {

// Boxes a max_num cut may have removed: not kept, and scored no higher than the last kept
// box (equal scores may fall on either side of the cut).
std::vector<bool> cut_by_max_num(const BatchedNmsProblem& problem, const std::vector<std::int64_t>& keep) {
  std::vector<bool> may_be_missing(problem.boxes.size(), false);
  if (problem.max_num <= 0 || keep.size() < static_cast<std::size_t>(problem.max_num) || keep.empty())
    return may_be_missing;
  double lowest_kept = INFINITY;
  for (std::int64_t k : keep) lowest_kept = std::min(lowest_kept, problem.scores[static_cast<std::size_t>(k)]);
  for (std::size_t i = 0; i < problem.boxes.size(); ++i) may_be_missing[i] = problem.scores[i] <= lowest_kept;
  return may_be_missing;
}

// Does the trick's NMS over offset boxes let two classes overlap? Per class, the x extent of
// its shifted boxes; classes are separated when those extents are disjoint (touching is
// IoU 0).
bool classes_overlap(const BatchedNmsProblem& problem, const std::vector<Box>& shifted) {
  std::vector<std::pair<double, double>> extents;  // per class present, sorted by class
  std::vector<std::int64_t> order(problem.boxes.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<std::int64_t>(i);
  std::sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) {
    return problem.classes[static_cast<std::size_t>(a)] < problem.classes[static_cast<std::size_t>(b)];
  });
  std::int64_t current = -1;
  for (std::int64_t i : order) {
    const Box& b = shifted[static_cast<std::size_t>(i)];
    if (extents.empty() || problem.classes[static_cast<std::size_t>(i)] != current) {
      extents.push_back({b.x1, b.x2});
      current = problem.classes[static_cast<std::size_t>(i)];
    } else {
      extents.back() = {std::min(extents.back().first, b.x1), std::max(extents.back().second, b.x2)};
    }
  }
  std::sort(extents.begin(), extents.end());
  for (std::size_t i = 1; i < extents.size(); ++i)
    if (!(extents[i].first >= extents[i - 1].second) || std::isnan(extents[i].first)) return true;
  return false;
}

std::optional<Verdict> check_dets(const BatchedNmsProblem& problem, const std::vector<std::int64_t>& keep,
                                  const HostTensor& dets, DType dtype, Device device) {
  const DType score_dtype = problem.score_dtype.value_or(dtype);
  // cat([boxes, scores]) promotes: fp32 boxes with fp16 scores give fp32 dets.
  const DType promoted = float_format(score_dtype).precision_bits > float_format(dtype).precision_bits ? score_dtype : dtype;
  OutputContract contract{"dets", {static_cast<std::int64_t>(keep.size()), 5}, std::string(dtype_name(promoted)), device};
  if (auto breach = check_contract(dets, contract)) return breach;
  for (std::size_t r = 0; r < keep.size(); ++r) {
    const Box& b = problem.boxes[static_cast<std::size_t>(keep[r])];
    const double expected[5] = {b.x1, b.y1, b.x2, b.y2, problem.scores[static_cast<std::size_t>(keep[r])]};
    for (std::size_t c = 0; c < 5; ++c) {
      const double got = dets.values[r * 5 + c];
      if (got == expected[c] || (std::isnan(got) && std::isnan(expected[c]))) continue;
      return Verdict{FindingKind::mismatch, "dets",
                     fmt::format("dets[{}, {}] is {}, but row {} must hold box {} and its score: {}", r, c, got, r,
                                 keep[r], expected[c]),
                     {{"row", r}, {"column", c}, {"got", corpus::json_double(got)},
                      {"expected", corpus::json_double(expected[c])}, {"box", keep[r]}}};
    }
  }
  return std::nullopt;
}

}  // namespace

Judgement judge_batched_nms_output(const BatchedNmsProblem& problem, const std::vector<HostTensor>& outputs,
                                   DType dtype, Device device) {
  Judgement judgement;
  const HostTensor& output = outputs.front();
  if (auto breach = check_contract(output, {"keep", {-1}, "int64", device})) {
    judgement.verdicts.push_back(*breach);
    return judgement;
  }
  const std::vector<std::int64_t> keep(output.values.begin(), output.values.end());
  if (problem.max_num > 0 && keep.size() > static_cast<std::size_t>(problem.max_num)) {
    judgement.verdicts.push_back({FindingKind::mismatch, "max_num",
                                  fmt::format("{} boxes kept, more than max_num = {}", keep.size(), problem.max_num),
                                  {{"kernel_kept", keep.size()}, {"max_num", problem.max_num}}});
    return judgement;
  }

  const std::vector<bool> may_be_missing = cut_by_max_num(problem, keep);
  const std::vector<std::int64_t> one_class(problem.boxes.size(), 0);
  const std::vector<std::int64_t>* classes = problem.class_agnostic ? &one_class : &problem.classes;
  const NmsProblem all{problem.boxes, problem.scores, problem.iou_threshold};
  auto replay = [&](DType compute, bool lenient, const NmsProblem& boxes, const std::vector<std::int64_t>* groups) {
    DecisionPolicy policy{compute, lenient};
    policy.classes = groups;
    policy.may_be_missing = &may_be_missing;
    return replay_nms(boxes, keep, policy);
  };

  const DType strict = accumulate_type(dtype);
  const ReplayResult exact = replay(strict, false, all, classes);
  FindingKind kind = FindingKind::mismatch;
  std::string property = "oracle";
  std::string message = exact.explanation;
  if (exact.consistent) {
    if (exact.order_only) {
      kind = FindingKind::order;
      property = "order";
    } else {
      if (outputs.size() > 1)
        if (auto verdict = check_dets(problem, keep, outputs[1], dtype, device)) judgement.verdicts.push_back(*verdict);
      return judgement;
    }
  } else if (replay(strict, true, all, classes).consistent) {
    // Range before precision, as for NMS (nms_replay.cpp): bf16's bound excuses an fp32 overflow too.
    kind = FindingKind::overflow;
    message += " (consistent once out-of-range intermediates may go either way)";
  } else if (replay(dtype, false, all, classes).consistent) {
    kind = FindingKind::precision;
    message += fmt::format(" (consistent with {} arithmetic)", dtype_name(dtype));
  } else if (!problem.class_agnostic) {
    const std::vector<Box> shifted = oracles::offset_boxes(problem, dtype);
    const NmsProblem offset_problem{shifted, problem.scores, problem.iou_threshold};
    if (replay(dtype, true, offset_problem, &one_class).consistent) {
      const bool finite = std::all_of(shifted.begin(), shifted.end(), [](const Box& b) {
        return std::isfinite(b.x1) && std::isfinite(b.y1) && std::isfinite(b.x2) && std::isfinite(b.y2);
      });
      if (classes_overlap(problem, shifted)) {
        property = "class_separation";
        message = "boxes of different classes suppressed each other: the class offsets (max coordinate + 1) x class, "
                  "computed in " + std::string(dtype_name(dtype)) + ", do not separate the classes (" + exact.explanation + ")";
      } else {
        kind = finite ? FindingKind::precision : FindingKind::overflow;
        property = "coordinate_offset";
        message = finite ? "the kept set is NMS over class-offset boxes rounded to " + std::string(dtype_name(dtype)) +
                               ", not per-class NMS: the offsets cost the coordinates their precision (" +
                               exact.explanation + ")"
                         : "class offsets overflow " + std::string(dtype_name(dtype)) + " (" + exact.explanation + ")";
      }
    }
  }
  Verdict verdict{kind, property, message,
                  {{"decision", exact.trace},
                   {"kernel_keep", first_indices(keep)},
                   {"oracle_keep", first_indices(oracles::batched_nms(problem))},
                   {"kernel_kept", keep.size()},
                   {"boxes", problem.boxes.size()}}};
  judgement.verdicts.push_back(std::move(verdict));
  return judgement;
}

}  // namespace detfuzz::compare
