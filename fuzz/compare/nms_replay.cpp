#include "fuzz/compare/nms_replay.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "corpus/case_json.h"
#include "oracles/box_iou.h"
#include "oracles/nms.h"
#include "oracles/x_sweep.h"

namespace detfuzz::compare {
namespace {

struct DecisionInfo {
  Decision decision = Decision::keep;
  double iou = 0;
  double tolerance = 0;
};

bool zero_area(const Box& box) { return box.x1 == box.x2 || box.y1 == box.y2; }

// The oracle's IoU without error tracking, in the same operation order (so the same double).
double plain_iou(const Box& a, const Box& b) {
  double area_a = (a.x2 - a.x1) * (a.y2 - a.y1), area_b = (b.x2 - b.x1) * (b.y2 - b.y1);
  double w = std::max(0.0, std::min(a.x2, b.x2) - std::max(a.x1, b.x1));
  double h = std::max(0.0, std::min(a.y2, b.y2) - std::max(a.y1, b.y1));
  double inter = w * h;
  return inter / ((area_a + area_b) - inter);
}

DecisionInfo decide_with_evidence(const Box& kept, const Box& candidate, double threshold,
                                  const DecisionPolicy& policy, bool need_evidence = false) {
  const bool continuous = policy.convention == BoxConvention::continuous;
  if (continuous && threshold >= 0 && oracles::disjoint(kept, candidate)) {
    // IoU is exactly 0, or 0/0 when both boxes have no area (undefined: either way).
    bool undefined = zero_area(kept) && zero_area(candidate);
    return {undefined ? Decision::either : Decision::keep, undefined ? NAN : 0.0, 0.0};
  }
  if (continuous && policy.shortcut && !need_evidence && !policy.lenient_out_of_range) {
    const double iou = plain_iou(kept, candidate);
    const double margin =
        64 * float_format(policy.compute).unit_roundoff + half_ulp(policy.compute, threshold);
    if (std::isfinite(iou) && std::fabs(iou - threshold) > margin)
      return {iou > threshold ? Decision::suppress : Decision::keep, iou, margin};
  }
  const oracles::IouTerms terms = oracles::iou_terms(kept, candidate, policy.convention);
  if (terms.undefined) return {Decision::either, terms.value, 0.0};
  if (policy.lenient_out_of_range && !terms.range_ok(policy.compute))
    return {Decision::either, terms.value, INFINITY};
  // A kernel may compare against the threshold rounded to its compute type.
  double threshold_rounding =
      representable(policy.compute, threshold) ? 0.0 : half_ulp(policy.compute, threshold);
  double tolerance = oracles::kIouBoundSafety *
                         (terms.bound(policy.compute) + terms.bound(DType::fp64)) +
                     threshold_rounding;
  Decision sure = terms.value > threshold ? Decision::suppress : Decision::keep;
  // tolerance 0: every step is exact in the compute type, so the comparison is decided.
  if (tolerance == 0 || std::fabs(terms.value - threshold) > tolerance)
    return {sure, terms.value, tolerance};
  return {Decision::either, terms.value, tolerance};
}

nlohmann::json box_json(const NmsProblem& problem, std::int64_t index) {
  const Box& b = problem.boxes[index];
  return {{"index", index},
          {"box", {b.x1, b.y1, b.x2, b.y2}},
          {"score", problem.scores[index]}};
}

nlohmann::json decision_json(const NmsProblem& problem, std::int64_t kept, std::int64_t candidate,
                             const DecisionInfo& info, const char* expected) {
  return {{"kept", box_json(problem, kept)},
          {"candidate", box_json(problem, candidate)},
          {"iou", corpus::json_double(info.iou)},
          {"threshold", problem.iou_threshold},
          {"tolerance", corpus::json_double(info.tolerance)},
          {"expected", expected}};
}

// Every box is of class 0 without class-aware NMS.
std::int64_t class_of(const DecisionPolicy& policy, std::int64_t box) {
  return policy.classes ? (*policy.classes)[static_cast<std::size_t>(box)] : 0;
}

bool same_class(const DecisionPolicy& policy, std::int64_t a, std::int64_t b) {
  return class_of(policy, a) == class_of(policy, b);
}

}  // namespace

std::vector<std::int64_t> first_indices(const std::vector<std::int64_t>& indices, std::size_t count) {
  return {indices.begin(), indices.begin() + static_cast<std::ptrdiff_t>(std::min(count, indices.size()))};
}

Decision decide(const Box& kept, const Box& candidate, double threshold,
                const DecisionPolicy& policy) {
  return decide_with_evidence(kept, candidate, threshold, policy).decision;
}

ReplayResult replay_nms(const NmsProblem& problem, const std::vector<std::int64_t>& keep,
                        const DecisionPolicy& policy) {
  ReplayResult result;
  const auto n = static_cast<std::int64_t>(problem.boxes.size());
  const auto& scores = problem.scores;
  const double threshold = problem.iou_threshold;

  // 1. Valid, distinct indices; then the order.
  std::vector<bool> is_kept(problem.boxes.size(), false);
  for (std::int64_t index : keep) {
    if (index < 0 || index >= n) {
      result.explanation = fmt::format("index {} is out of range for {} boxes", index, n);
      result.trace = {{"invalid_index", index}};
      return result;
    }
    if (is_kept[index]) {
      result.explanation = fmt::format("index {} appears twice in the output", index);
      result.trace = {{"duplicate_index", index}};
      return result;
    }
    is_kept[index] = true;
  }
  std::vector<std::int64_t> visit = keep;
  // Stable: among equal scores the kernel's own order is its visiting order.
  std::stable_sort(visit.begin(), visit.end(),
                   [&](std::int64_t a, std::int64_t b) { return scores[a] > scores[b]; });
  const bool order_ok = visit == keep;

  // Pairs that cannot overlap are decided without looking (IoU 0, or 0/0 for two zero-area
  // boxes, handled below), so the kept boxes worth comparing come from an x-sorted sweep.
  const bool pruned = policy.shortcut && policy.convention == BoxConvention::continuous && threshold >= 0 &&
                      oracles::XSweep::all_finite(problem.boxes);
  // Class-aware, one sweep per class: boxes of other classes are never candidates, and a
  // class's widest box sets only its own sweep's reach (one global sweep walked every class's
  // kept boxes in the window, most of a batched case's replay).
  std::map<std::int64_t, oracles::XSweep> sweeps;
  if (pruned) {
    std::map<std::int64_t, std::vector<std::int64_t>> kept_by_class;
    for (std::int64_t k : visit) kept_by_class[class_of(policy, k)].push_back(k);
    for (auto& [id, members] : kept_by_class) sweeps.emplace(id, oracles::XSweep(problem.boxes, std::move(members)));
  }
  std::vector<std::size_t> position(problem.boxes.size(), visit.size());
  for (std::size_t p = 0; p < visit.size(); ++p) position[static_cast<std::size_t>(visit[p])] = p;
  auto for_each_kept_near = [&](std::int64_t box, auto&& f) {
    if (!pruned) {
      for (std::int64_t k : visit) f(k);
      return;
    }
    const auto sweep = sweeps.find(class_of(policy, box));
    if (sweep != sweeps.end()) sweep->second.for_each_candidate(problem.boxes[box], f);
  };

  // 2. No kept box may be surely suppressed by a box visited before it.
  for (std::size_t p = 0; p < visit.size(); ++p) {
    std::size_t suppressor = visit.size();  // the earliest, as a plain loop would find it
    for_each_kept_near(visit[p], [&](std::int64_t k) {
      const std::size_t q = position[static_cast<std::size_t>(k)];
      if (q >= p || q >= suppressor || !same_class(policy, k, visit[p])) return;
      if (decide_with_evidence(problem.boxes[k], problem.boxes[visit[p]], threshold, policy).decision ==
          Decision::suppress)
        suppressor = q;
    });
    if (suppressor == visit.size()) continue;
    const std::size_t q = suppressor;
    const DecisionInfo info =
        decide_with_evidence(problem.boxes[visit[q]], problem.boxes[visit[p]], threshold, policy, true);
    result.explanation = fmt::format(
        "box {} is kept, but box {} (score {}) was kept before it and overlaps it with IoU "
        "{} > threshold {} (tolerance {:.3g}): it should have been suppressed",
        visit[p], visit[q], scores[visit[q]], info.iou, threshold, info.tolerance);
    result.trace = decision_json(problem, visit[q], visit[p], info, "suppressed");
    return result;
  }

  // 3. Every box left out needs a kept box of higher or equal score that may suppress it.
  for (std::int64_t j = 0; j < n; ++j) {
    if (is_kept[j] || (policy.may_be_missing && (*policy.may_be_missing)[j])) continue;
    bool suppressible = false;
    DecisionInfo closest;
    std::int64_t closest_box = -1;
    auto consider = [&](std::int64_t k) {
      if (suppressible || scores[k] < scores[j] || !same_class(policy, k, j)) return;
      DecisionInfo info = decide_with_evidence(problem.boxes[k], problem.boxes[j], threshold, policy);
      if (info.decision != Decision::keep) {
        suppressible = true;
      } else if (closest_box < 0 || info.iou > closest.iou) {
        closest = info;
        closest_box = k;
      }
    };
    for_each_kept_near(j, consider);
    if (pruned && !suppressible)  // far apart: only zero-area pairs (0/0) may go either way
      for (std::int64_t k : visit) {
        if (scores[k] < scores[j] || suppressible) break;
        if (zero_area(problem.boxes[k]) && zero_area(problem.boxes[j])) consider(k);
        if (closest_box < 0) consider(k);  // IoU 0: names the nearest candidate like a plain loop
      }
    if (suppressible) continue;
    if (closest_box < 0) {
      result.explanation = fmt::format(
          "box {} (score {}) is missing from the output, but no box{} with a higher or equal "
          "score was kept, so nothing can have suppressed it",
          j, scores[j], policy.classes ? " of its class" : "");
      result.trace = {{"missing", box_json(problem, j)}};
    } else {
      closest = decide_with_evidence(problem.boxes[closest_box], problem.boxes[j], threshold, policy, true);
      result.explanation = fmt::format(
          "box {} (score {}) is missing from the output, but no kept box{} with a higher or "
          "equal score overlaps it with IoU > {} (largest: IoU {} with box {}, tolerance {:.3g})",
          j, scores[j], policy.classes ? " of its class" : "", threshold, closest.iou, closest_box, closest.tolerance);
      result.trace = decision_json(problem, closest_box, j, closest, "kept");
    }
    return result;
  }

  result.consistent = true;
  result.order_only = !order_ok;
  if (!order_ok) {
    result.explanation = "the kept set is right but not in decreasing score order";
    result.trace = {{"expected_order", first_indices(visit)}, {"kernel_order", first_indices(keep)}};
  }
  return result;
}

std::optional<Verdict> check_keep_indices(const HostTensor& keep, std::size_t boxes, Device device) {
  if (auto breach = check_contract(keep, {"keep", {-1}, "int64", device})) return breach;
  std::vector<bool> seen(boxes, false);
  for (double index : keep.values) {
    const bool valid = index >= 0 && index < static_cast<double>(boxes) && !seen[static_cast<std::size_t>(index)];
    if (!valid)
      return Verdict{FindingKind::mismatch, "hostile",
                     "on hostile input the kernel returned index " + std::to_string(index) + ", out of range or repeated",
                     {{"keep", keep.values}}};
    seen[static_cast<std::size_t>(index)] = true;
  }
  return std::nullopt;
}

Judgement judge_nms_output(const NmsProblem& problem, const HostTensor& output, DType dtype,
                           Device device, BoxConvention convention) {
  Judgement judgement;
  OutputContract contract{"keep", {-1}, "int64", device};
  if (auto breach = check_contract(output, contract)) {
    judgement.verdicts.push_back(*breach);
    return judgement;
  }
  std::vector<std::int64_t> keep(output.values.begin(), output.values.end());

  const DType strict = accumulate_type(dtype);
  ReplayResult verdict_source = replay_nms(problem, keep, {strict, false, convention});
  FindingKind kind = FindingKind::mismatch;
  if (verdict_source.consistent) {
    if (!verdict_source.order_only) return judgement;
    kind = FindingKind::order;
  } else {
    ReplayResult storage =
        strict == dtype ? verdict_source : replay_nms(problem, keep, {dtype, false, convention});
    ReplayResult lenient = replay_nms(problem, keep, {strict, true, convention});
    // Range first: where letting the out-of-range pairs go either way explains the list, the
    // cause is the range, even if the storage dtype's wide bound would excuse it too (bf16
    // shares fp32's range, so its bound says nothing about an fp32 overflow).
    if (lenient.consistent) {
      kind = lenient.order_only ? FindingKind::order : FindingKind::overflow;
    } else if (storage.consistent) {
      kind = storage.order_only ? FindingKind::order : FindingKind::precision;
    }
  }

  Verdict verdict;
  verdict.kind = kind;
  verdict.property = "oracle";
  verdict.message = verdict_source.explanation;
  if (kind == FindingKind::precision)
    verdict.message += fmt::format(" (consistent with {} arithmetic)", dtype_name(dtype));
  if (kind == FindingKind::overflow)
    verdict.message += " (consistent once out-of-range intermediates may go either way)";
  verdict.details = {{"decision", verdict_source.trace},
                     {"kernel_keep", first_indices(keep)},
                     {"oracle_keep", first_indices(oracles::nms(problem, convention).keep)},
                     {"kernel_kept", keep.size()},
                     {"boxes", problem.boxes.size()}};
  judgement.verdicts.push_back(std::move(verdict));
  return judgement;
}

}  // namespace detfuzz::compare
