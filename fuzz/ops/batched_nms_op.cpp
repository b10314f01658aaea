// batched_nms: the class-aware replay (fuzz/compare/batched_nms_compare.h) plus two checks
// that need the target itself:
// - mixed dtypes (boxes and scores of different dtypes, as autocast delivers them): a
//   target may reject them cleanly, but not only on some code paths. When it raises, the
//   first 8 boxes of the same case are run; if they pass, the target takes another path at
//   this size and that path breaks (mmcv's split_thr buffer: `mixed_dtypes_split_path`).
// - the oracle-free class union: the boxes a class keeps inside the batched call are the
//   boxes NMS keeps on that class alone, bit for bit, wherever the class offsets are exact.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "corpus/case_json.h"
#include "fuzz/compare/batched_nms_compare.h"
#include "fuzz/compare/nms_replay.h"
#include "fuzz/ops/box_pairs.h"
#include "fuzz/ops/side_by_side.h"
#include "fuzz/ops/typed_harness.h"
#include "oracles/batched_nms.h"
#include "oracles/running_error.h"

namespace detfuzz::fuzz {
namespace {

using BatchedTarget = kernels::Target<BatchedNmsProblem>;

constexpr std::size_t kSmallPrefix = 8;
constexpr std::size_t kUnionClasses = 3;

bool hostile_input(const BatchedNmsProblem& p) {
  return std::any_of(p.boxes.begin(), p.boxes.end(), gen::hostile_box) ||
         std::any_of(p.scores.begin(), p.scores.end(), gen::hostile_value);
}

BatchedNmsProblem prefix(const BatchedNmsProblem& p, std::size_t n) {
  BatchedNmsProblem small = p;
  small.boxes.resize(n);
  small.scores.resize(n);
  small.classes.resize(n);
  return small;
}

std::optional<compare::Verdict> split_path_dtype_failure(const BatchedNmsProblem& problem, const BatchedTarget& target,
                                                         DType dtype, Device device, const compare::Verdict& raised) {
  if (!problem.score_dtype || *problem.score_dtype == dtype) return raised;
  if (problem.boxes.size() <= kSmallPrefix) return std::nullopt;  // mixed dtypes rejected: a clean contract
  auto small = run_guarded(target, prefix(problem, kSmallPrefix), dtype, device);
  if (std::holds_alternative<compare::Verdict>(small)) return std::nullopt;  // rejected at every size: a clean contract
  return compare::Verdict{
      FindingKind::dtype, "mixed_dtypes_split_path",
      fmt::format("{} boxes with {} scores: accepted with {} boxes, raised with {}: {}", dtype_name(dtype),
                  dtype_name(*problem.score_dtype), kSmallPrefix, problem.boxes.size(), raised.message),
      {{"boxes", problem.boxes.size()}, {"exception", raised.details.value("exception", raised.message)}}};
}

// The offsets are exact only when no step of the kernel's arithmetic rounded.
bool exact_sum(double a, double b) { return oracles::sum_rounding_error(a, b) == 0; }
bool exact_product(double a, double b) { return oracles::product_rounding_error(a, b) == 0; }

bool offsets_exact(const BatchedNmsProblem& problem, std::int64_t cls, DType dtype) {
  double max_coordinate = -INFINITY;
  for (const Box& b : problem.boxes) max_coordinate = std::max({max_coordinate, b.x1, b.y1, b.x2, b.y2});
  const double c = static_cast<double>(cls), step = max_coordinate + 1, offset = c * step;
  if (!representable(dtype, c) || !exact_sum(max_coordinate, 1) || !representable(dtype, step) ||
      !exact_product(c, step) || !representable(dtype, offset))
    return false;
  for (std::size_t i = 0; i < problem.boxes.size(); ++i) {
    if (problem.classes[i] != cls) continue;
    const Box& b = problem.boxes[i];
    for (double v : {b.x1, b.y1, b.x2, b.y2})
      if (!exact_sum(v, offset) || !representable(dtype, v + offset)) return false;
  }
  return true;
}

std::optional<compare::Verdict> class_union(const BatchedNmsProblem& problem, const BatchedTarget& target, DType dtype,
                                            Device device, const std::vector<double>& keep) {
  if (problem.class_agnostic || problem.max_num > 0) return std::nullopt;
  std::set<std::int64_t> checked;
  for (std::int64_t cls : problem.classes) {
    if (checked.size() == kUnionClasses) break;
    if (!checked.insert(cls).second || !offsets_exact(problem, cls, dtype)) continue;
    BatchedNmsProblem alone = problem;
    alone.boxes.clear();
    alone.scores.clear();
    alone.classes.clear();
    std::vector<std::int64_t> members;
    for (std::size_t i = 0; i < problem.boxes.size(); ++i)
      if (problem.classes[i] == cls) {
        members.push_back(static_cast<std::int64_t>(i));
        alone.boxes.push_back(problem.boxes[i]);
        alone.scores.push_back(problem.scores[i]);
        alone.classes.push_back(0);
      }
    // Equal scores may be visited in any order (mmcv's and torchvision's sorts are not
    // stable), and the order decides which of two overlapping boxes survives: the two runs
    // may then differ without a bug. The property holds for distinct scores.
    std::vector<double> member_scores = alone.scores;
    std::sort(member_scores.begin(), member_scores.end());
    if (std::adjacent_find(member_scores.begin(), member_scores.end()) != member_scores.end()) continue;
    auto run = run_guarded(target, alone, dtype, device, "class_union");
    if (auto* verdict = std::get_if<compare::Verdict>(&run)) return *verdict;
    std::set<std::int64_t> kept_alone, kept_together;
    for (double local : std::get<std::vector<HostTensor>>(run).front().values)
      if (local >= 0 && local < static_cast<double>(members.size())) kept_alone.insert(members[static_cast<std::size_t>(local)]);
    for (double index : keep)
      if (problem.classes[static_cast<std::size_t>(index)] == cls) kept_together.insert(static_cast<std::int64_t>(index));
    if (kept_alone == kept_together) continue;
    return compare::Verdict{
        FindingKind::mismatch, "class_union",
        fmt::format("class {} keeps {} boxes inside the batched call and {} when run alone (its offsets are exact, "
                    "so the two must agree)", cls, kept_together.size(), kept_alone.size()),
        {{"class", cls},
         {"kept_together", std::vector<std::int64_t>(kept_together.begin(), kept_together.end())},
         {"kept_alone", std::vector<std::int64_t>(kept_alone.begin(), kept_alone.end())}}};
  }
  return std::nullopt;
}

compare::Judgement judge(const BatchedNmsProblem& problem, const BatchedTarget& target, DType dtype, Device device) {
  const bool hostile = hostile_input(problem);
  auto run = run_guarded(target, problem, dtype, device);
  compare::Judgement judgement;
  if (auto* raised = std::get_if<compare::Verdict>(&run)) {
    if (hostile && raised->kind == FindingKind::exception) return judgement;
    if (raised->kind == FindingKind::exception) {
      if (auto verdict = split_path_dtype_failure(problem, target, dtype, device, *raised))
        judgement.verdicts.push_back(*verdict);
    } else {
      judgement.verdicts.push_back(*raised);
    }
    return judgement;
  }
  judgement.outputs = std::get<std::vector<HostTensor>>(std::move(run));
  if (hostile) {
    if (auto breach = compare::check_keep_indices(judgement.outputs.front(), problem.boxes.size(), device))
      judgement.verdicts.push_back(*breach);
    return judgement;
  }
  compare::Judgement verdicts =
      timed_oracle([&] { return compare::judge_batched_nms_output(problem, judgement.outputs, dtype, device); });
  judgement.verdicts = std::move(verdicts.verdicts);
  if (!judgement.consistent()) return judgement;
  if (auto verdict = class_union(problem, target, dtype, device, judgement.outputs.front().values))
    judgement.verdicts.push_back(*verdict);
  return judgement;
}

// Class ids renumbered 0, 1, 2... in order of first appearance: fewer distinct offsets.
std::optional<std::vector<std::int64_t>> compact_classes(const std::vector<std::int64_t>& classes) {
  std::map<std::int64_t, std::int64_t> renumber;
  std::vector<std::int64_t> compact;
  for (std::int64_t c : classes) compact.push_back(renumber.emplace(c, static_cast<std::int64_t>(renumber.size())).first->second);
  if (compact == classes) return std::nullopt;
  return compact;
}

std::vector<BatchedNmsProblem> smaller(const BatchedNmsProblem& p, DType dtype) {
  std::vector<BatchedNmsProblem> out;
  // The last box alone first: a failure that needs a box count (a strategy switch) gets
  // down to its threshold one box at a time, cheaply, before ddmin's halves.
  if (p.boxes.size() > 1) {
    BatchedNmsProblem fewer = prefix(p, p.boxes.size() - 1);
    out.push_back(std::move(fewer));
  }
  for (auto range : removal_ranges(p.boxes.size())) {
    BatchedNmsProblem fewer = p;
    fewer.boxes = without(p.boxes, range);
    fewer.scores = without(p.scores, range);
    fewer.classes = without(p.classes, range);
    out.push_back(std::move(fewer));
  }
  auto with = [&](auto change) {
    BatchedNmsProblem plainer = p;
    change(plainer);
    out.push_back(std::move(plainer));
  };
  if (p.score_dtype) with([](BatchedNmsProblem& q) { q.score_dtype.reset(); });
  if (p.class_agnostic) with([](BatchedNmsProblem& q) { q.class_agnostic = false; });
  if (p.max_num > 0) with([](BatchedNmsProblem& q) { q.max_num = -1; });
  if (std::any_of(p.classes.begin(), p.classes.end(), [](std::int64_t c) { return c != 0; }))
    with([](BatchedNmsProblem& q) { std::fill(q.classes.begin(), q.classes.end(), 0); });
  if (auto compact = compact_classes(p.classes)) with([&](BatchedNmsProblem& q) { q.classes = *compact; });
  for (auto& boxes : simpler_boxes(p.boxes, dtype)) with([&](BatchedNmsProblem& q) { q.boxes = boxes; });
  const DType score_dtype = p.score_dtype.value_or(dtype);
  for (std::size_t i = 0; i < p.scores.size() && p.scores.size() <= kMaxElementsToSimplify; ++i)
    for (double score : simpler_values(p.scores[i], score_dtype)) with([&](BatchedNmsProblem& q) { q.scores[i] = score; });
  for (double threshold : simpler_values(p.iou_threshold, DType::fp64))
    with([&](BatchedNmsProblem& q) { q.iou_threshold = threshold; });
  return out;
}

}  // namespace

std::unique_ptr<OpHarness> make_batched_nms_harness(std::vector<BatchedTarget> targets) {
  OpDefinition<BatchedNmsProblem> definition;
  definition.name = op_name(OpId::batched_nms);
  definition.description =
      "class-aware NMS (torchvision ops.batched_nms and mmcv batched_nms contracts): no suppression across "
      "classes, kept boxes by decreasing score";
  definition.targets = std::move(targets);
  definition.generator = gen::batched_nms_problem;
  definition.judge = judge;
  definition.to_json = [](const BatchedNmsProblem& p) { return corpus::to_json(p); };
  definition.from_json = corpus::batched_nms_problem_from_json;
  definition.size = [](const BatchedNmsProblem& p) { return p.boxes.size(); };
  definition.cost_exponent = 2;  // every pair of boxes
  definition.smaller = smaller;
  definition.oracle_json = [](const BatchedNmsProblem& p, DType) {
    return nlohmann::json{{"keep", oracles::batched_nms(p)}};
  };
  definition.side_by_side = [](const BatchedNmsProblem& p, const std::vector<HostTensor>& outputs, DType) {
    const auto reference = oracles::batched_nms(p);
    return lists_side_by_side("keep", outputs.front().values, std::vector<double>(reference.begin(), reference.end()));
  };
  const auto& switch_counts = gen::batched_nms_switch_counts();
  definition.largest_generated = static_cast<std::size_t>(*std::max_element(switch_counts.begin(), switch_counts.end()));
  definition.contract = [](const BatchedNmsProblem& p) { return box_contract_breach(p.boxes, "boxes"); };
  definition.probe = {{{0, 0, 2, 2}, {1, 1, 3, 3}}, {0.75, 0.5}, {0, 1}, 0.5, std::nullopt, false, -1};
  return std::make_unique<TypedOpHarness<BatchedNmsProblem>>(std::move(definition));
}

}  // namespace detfuzz::fuzz
