// nms: the oracle replay (fuzz/compare/nms_replay.h) plus two oracle-free properties that
// hold exactly for any IEEE kernel: scaling all coordinates by 2^k changes no decision,
// and permuting boxes with distinct scores changes no kept box.
#include <algorithm>

#include "corpus/case_json.h"
#include "fuzz/compare/contract.h"
#include "fuzz/compare/nms_replay.h"
#include "fuzz/ops/invariance.h"
#include "fuzz/ops/box_pairs.h"
#include "fuzz/ops/side_by_side.h"
#include "fuzz/ops/typed_harness.h"
#include "oracles/nms.h"

namespace detfuzz::fuzz {
namespace {

using NmsTarget = kernels::Target<NmsProblem>;

std::optional<compare::Verdict> scale_invariance(const NmsProblem& problem, const NmsTarget& target,
                                                 DType dtype, Device device, const HostTensor& keep) {
  const int exponent = safe_scale_exponent(problem.boxes, dtype);
  if (exponent == 0) return std::nullopt;
  NmsProblem scaled = problem;
  scaled.boxes = scale_boxes(problem.boxes, exponent);
  auto run = run_guarded(target, scaled, dtype, device, "scale_invariance");
  if (auto* verdict = std::get_if<compare::Verdict>(&run)) return *verdict;
  const HostTensor& scaled_keep = std::get<std::vector<HostTensor>>(run).front();
  if (identical(keep, scaled_keep)) return std::nullopt;
  return compare::Verdict{
      FindingKind::mismatch, "scale_invariance",
      "multiplying every coordinate by 2^" + std::to_string(exponent) +
          " (exact in binary floating point) changed the kept boxes",
      {{"scale_exponent", exponent}, {"keep", keep.values}, {"scaled_keep", scaled_keep.values}}};
}

std::optional<compare::Verdict> permutation_invariance(const NmsProblem& problem,
                                                       const NmsTarget& target, DType dtype,
                                                       Device device, const HostTensor& keep) {
  std::vector<double> sorted = problem.scores;
  std::sort(sorted.begin(), sorted.end());
  if (sorted.size() < 2 || std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
    return std::nullopt;  // ties may legitimately be visited in another order
  const auto permutation = fixed_permutation(problem.boxes.size());
  NmsProblem permuted = problem;
  for (std::size_t i = 0; i < permutation.size(); ++i) {
    permuted.boxes[i] = problem.boxes[permutation[i]];
    permuted.scores[i] = problem.scores[permutation[i]];
  }
  auto run = run_guarded(target, permuted, dtype, device, "permutation_invariance");
  if (auto* verdict = std::get_if<compare::Verdict>(&run)) return *verdict;
  HostTensor mapped = std::get<std::vector<HostTensor>>(run).front();
  for (double& index : mapped.values)
    if (index >= 0 && index < static_cast<double>(permutation.size()))
      index = static_cast<double>(permutation[static_cast<std::size_t>(index)]);
  if (identical(keep, mapped)) return std::nullopt;
  return compare::Verdict{FindingKind::mismatch, "permutation_invariance",
                          "permuting the input boxes (all scores distinct) changed the kept boxes",
                          {{"permutation", permutation}, {"keep", keep.values},
                           {"permuted_keep_mapped_back", mapped.values}}};
}

bool hostile_input(const NmsProblem& p) {
  return std::any_of(p.boxes.begin(), p.boxes.end(), gen::hostile_box) ||
         std::any_of(p.scores.begin(), p.scores.end(), gen::hostile_value);
}

// With NaN scores or inverted boxes no kept set is wrong; what must hold is the contract:
// a clean error, or int64 indices into the input, each at most once.
compare::Judgement judge_hostile(const NmsProblem& problem, const NmsTarget& target, DType dtype, Device device) {
  auto run = run_target(target, problem, dtype, device, true);
  if (auto* judgement = std::get_if<compare::Judgement>(&run)) return *judgement;
  compare::Judgement judgement;
  judgement.outputs = std::get<std::vector<HostTensor>>(run);
  if (auto breach = compare::check_keep_indices(judgement.outputs.front(), problem.boxes.size(), device))
    judgement.verdicts.push_back(*breach);
  return judgement;
}

compare::Judgement judge(const NmsProblem& problem, const NmsTarget& target, DType dtype,
                         Device device) {
  if (hostile_input(problem)) return judge_hostile(problem, target, dtype, device);
  auto run = run_target(target, problem, dtype, device, false);
  if (auto* judgement = std::get_if<compare::Judgement>(&run)) return *judgement;
  const HostTensor& keep = std::get<std::vector<HostTensor>>(run).front();
  compare::Judgement judgement = timed_oracle([&] { return compare::judge_nms_output(problem, keep, dtype, device); });
  judgement.outputs = {keep};
  if (!judgement.consistent()) return judgement;
  if (auto verdict = scale_invariance(problem, target, dtype, device, keep))
    judgement.verdicts.push_back(*verdict);
  if (auto verdict = permutation_invariance(problem, target, dtype, device, keep))
    judgement.verdicts.push_back(*verdict);
  return judgement;
}

}  // namespace

std::unique_ptr<OpHarness> make_nms_harness(std::vector<NmsTarget> targets) {
  OpDefinition<NmsProblem> definition;
  definition.name = op_name(OpId::nms);
  definition.description =
      "greedy non-maximum suppression, torchvision semantics (suppress when IoU > threshold)";
  definition.targets = std::move(targets);
  definition.generator = gen::nms_problem;
  definition.judge = judge;
  definition.to_json = [](const NmsProblem& p) { return corpus::to_json(p); };
  definition.from_json = corpus::nms_problem_from_json;
  definition.size = [](const NmsProblem& p) { return p.boxes.size(); };
  definition.cost_exponent = 2;  // every pair of boxes
  definition.smaller = [](const NmsProblem& p, DType dtype) {
    std::vector<NmsProblem> smaller;
    for (auto range : removal_ranges(p.boxes.size()))
      smaller.push_back({without(p.boxes, range), without(p.scores, range), p.iou_threshold});
    for (auto& boxes : simpler_boxes(p.boxes, dtype)) smaller.push_back({boxes, p.scores, p.iou_threshold});
    for (std::size_t i = 0; i < p.scores.size() && p.scores.size() <= kMaxElementsToSimplify; ++i)
      for (double score : simpler_values(p.scores[i], dtype)) {
        NmsProblem plainer = p;
        plainer.scores[i] = score;
        smaller.push_back(std::move(plainer));
      }
    for (double threshold : simpler_values(p.iou_threshold, DType::fp64))
      smaller.push_back({p.boxes, p.scores, threshold});
    return smaller;
  };
  definition.oracle_json = [](const NmsProblem& p, DType) {
    const oracles::NmsReference reference = oracles::nms(p);
    nlohmann::json suppressions = nlohmann::json::array();
    for (const auto& s : reference.suppressions)
      suppressions.push_back({{"kept", s.kept}, {"suppressed", s.suppressed}, {"iou", s.iou}});
    return nlohmann::json{{"keep", reference.keep}, {"suppressions", suppressions}};
  };
  definition.side_by_side = [](const NmsProblem& p, const std::vector<HostTensor>& outputs, DType) {
    const auto reference = oracles::nms(p).keep;
    return lists_side_by_side("keep", outputs.front().values, std::vector<double>(reference.begin(), reference.end()));
  };
  definition.contract = [](const NmsProblem& p) { return box_contract_breach(p.boxes, "boxes"); };
  definition.probe = {{{0, 0, 2, 2}, {1, 1, 3, 3}}, {0.75, 0.5}, 0.5};
  return std::make_unique<TypedOpHarness<NmsProblem>>(std::move(definition));
}

}  // namespace detfuzz::fuzz
