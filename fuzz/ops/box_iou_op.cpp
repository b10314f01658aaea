// box_iou: bound-normalized comparison with the fp64 oracle, plus exact properties:
// scaling all coordinates by 2^k changes no IoU bit, and box_iou(b, a) is the transpose of
// box_iou(a, b) bit for bit (the union is a1 + a2 either way).
#include <algorithm>
#include <cmath>

#include "corpus/case_json.h"
#include "fuzz/compare/continuous.h"
#include "fuzz/ops/box_pairs.h"
#include "fuzz/gen/hostile.h"
#include "fuzz/ops/invariance.h"
#include "fuzz/ops/side_by_side.h"
#include "fuzz/ops/typed_harness.h"
#include "oracles/box_iou.h"

namespace detfuzz::fuzz {
namespace {

using BoxIouTarget = kernels::Target<BoxIouProblem>;

// Pairs with a hostile box (NaN, infinite, inverted) have no true IoU: anything goes there.
std::vector<compare::ExpectedValue> expected_values(const BoxIouProblem& problem, DType dtype) {
  const DType strict = accumulate_type(dtype);
  std::vector<compare::ExpectedValue> expected;
  const std::vector<oracles::TrackedBox> tracked1 = oracles::tracked_boxes(problem.boxes1);
  const std::vector<oracles::TrackedBox> tracked2 = oracles::tracked_boxes(problem.boxes2);
  for (std::size_t i = 0; i < problem.boxes1.size(); ++i)
    for (std::size_t j = 0; j < problem.boxes2.size(); ++j) {
      const Box &a = problem.boxes1[i], &b = problem.boxes2[j];
      const oracles::IouTerms terms = oracles::tracked_iou_terms(tracked1[i], tracked2[j]);
      const double oracle_error = terms.bound(DType::fp64);
      expected.push_back(compare::ExpectedValue::point(
          terms.value, oracles::kIouBoundSafety * (terms.bound(strict) + oracle_error),
          oracles::kIouBoundSafety * (terms.bound(dtype) + oracle_error), terms.range_ok(strict),
          terms.undefined || gen::hostile_box(a) || gen::hostile_box(b)));
    }
  return expected;
}

bool hostile_input(const BoxIouProblem& p) {
  return std::any_of(p.boxes1.begin(), p.boxes1.end(), gen::hostile_box) ||
         std::any_of(p.boxes2.begin(), p.boxes2.end(), gen::hostile_box);
}

std::optional<compare::Verdict> rerun_identical(const BoxIouProblem& changed,
                                                const BoxIouTarget& target, DType dtype,
                                                Device device, const HostTensor& expected,
                                                const std::string& property,
                                                const std::string& message, bool transpose) {
  auto run = run_guarded(target, changed, dtype, device, property);
  if (auto* verdict = std::get_if<compare::Verdict>(&run)) return *verdict;
  HostTensor output = std::get<std::vector<HostTensor>>(run).front();
  if (transpose && output.shape.size() == 2) {
    HostTensor transposed = output;
    const auto rows = output.shape[0], cols = output.shape[1];
    transposed.shape = {cols, rows};
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < cols; ++c) transposed.values[c * rows + r] = output.values[r * cols + c];
    output = transposed;
  }
  if (identical(expected, output)) return std::nullopt;
  std::size_t first_difference = 0;
  while (first_difference < std::min(expected.values.size(), output.values.size()) &&
         expected.values[first_difference] == output.values[first_difference])
    ++first_difference;
  nlohmann::json details = {{"first_difference", first_difference}};
  if (first_difference < std::min(expected.values.size(), output.values.size())) {
    details["original"] = corpus::json_double(expected.values[first_difference]);
    details["changed"] = corpus::json_double(output.values[first_difference]);
  }
  return compare::Verdict{FindingKind::mismatch, property, message, details};
}

compare::Judgement judge(const BoxIouProblem& problem, const BoxIouTarget& target, DType dtype,
                         Device device) {
  const bool hostile = hostile_input(problem);
  auto run = run_target(target, problem, dtype, device, hostile);
  if (auto* judgement = std::get_if<compare::Judgement>(&run)) return *judgement;
  const HostTensor& iou = std::get<std::vector<HostTensor>>(run).front();
  // torchvision's contract: _upcast turns fp16/bf16 results into fp32.
  compare::OutputContract contract{"iou",
                                   {static_cast<std::int64_t>(problem.boxes1.size()),
                                    static_cast<std::int64_t>(problem.boxes2.size())},
                                   std::string(dtype_name(accumulate_type(dtype))),
                                   device};
  compare::Judgement judgement =
      compare::compare_continuous(iou, timed_oracle([&] { return expected_values(problem, dtype); }), contract, dtype,
                                  pair_extent_explainer(problem, target.arithmetic, dtype, false));
  judgement.outputs = {iou};
  if (!judgement.consistent() || hostile) return judgement;

  std::vector<Box> all = problem.boxes1;
  all.insert(all.end(), problem.boxes2.begin(), problem.boxes2.end());
  if (int exponent = safe_scale_exponent(all, dtype)) {
    BoxIouProblem scaled{scale_boxes(problem.boxes1, exponent), scale_boxes(problem.boxes2, exponent)};
    if (auto verdict = rerun_identical(
            scaled, target, dtype, device, iou, "scale_invariance",
            "multiplying every coordinate by 2^" + std::to_string(exponent) + " changed the IoU",
            false))
      judgement.verdicts.push_back(*verdict);
  }
  if (!(problem.boxes1 == problem.boxes2)) {
    BoxIouProblem swapped{problem.boxes2, problem.boxes1};
    if (auto verdict = rerun_identical(swapped, target, dtype, device, iou, "symmetry",
                                       "box_iou(b, a) is not the transpose of box_iou(a, b)", true))
      judgement.verdicts.push_back(*verdict);
  }
  return judgement;
}

std::vector<compare::ExpectedValue> area_expected(const BoxAreaProblem& p, DType dtype) {
  const auto areas = oracles::box_area(p.boxes);
  std::vector<compare::ExpectedValue> out;
  // One product of two differences, in the canonical order: the first-order bound as is.
  for (std::size_t i = 0; i < areas.size(); ++i)
    out.push_back(compare::expected_from(areas[i], dtype, 1.0, gen::hostile_box(p.boxes[i])));
  return out;
}

compare::Judgement judge_area(const BoxAreaProblem& p, const kernels::Target<BoxAreaProblem>& target, DType dtype,
                              Device device) {
  auto run = run_target(target, p, dtype, device, std::any_of(p.boxes.begin(), p.boxes.end(), gen::hostile_box));
  if (auto* judgement = std::get_if<compare::Judgement>(&run)) return *judgement;
  const HostTensor& area = std::get<std::vector<HostTensor>>(run).front();
  // torchvision's contract: _upcast turns fp16/bf16 areas into fp32.
  compare::Judgement judgement = compare::compare_continuous(
      area, timed_oracle([&] { return area_expected(p, dtype); }),
      {"area", {static_cast<std::int64_t>(p.boxes.size())}, std::string(dtype_name(accumulate_type(dtype))), device}, dtype);
  judgement.outputs = {area};
  return judgement;
}

}  // namespace

std::unique_ptr<OpHarness> make_box_area_harness(std::vector<kernels::Target<BoxAreaProblem>> targets) {
  OpDefinition<BoxAreaProblem> definition;
  definition.name = op_name(OpId::box_area);
  definition.description = "areas of a box set (torchvision.ops.box_area contract, fp32 for fp16/bf16)";
  definition.targets = std::move(targets);
  definition.generator = gen::box_area_problem;
  definition.judge = judge_area;
  definition.to_json = [](const BoxAreaProblem& p) { return corpus::to_json(p); };
  definition.from_json = corpus::box_area_problem_from_json;
  definition.size = [](const BoxAreaProblem& p) { return p.boxes.size(); };
  definition.smaller = [](const BoxAreaProblem& p, DType dtype) {
    std::vector<BoxAreaProblem> smaller;
    for (auto range : removal_ranges(p.boxes.size())) smaller.push_back({without(p.boxes, range)});
    for (auto& boxes : simpler_boxes(p.boxes, dtype)) smaller.push_back({boxes});
    return smaller;
  };
  definition.oracle_json = [](const BoxAreaProblem& p, DType dtype) {
    nlohmann::json values = nlohmann::json::array();
    for (const auto& e : area_expected(p, dtype)) values.push_back(corpus::json_double(e.value));
    return nlohmann::json{{"area", values}};
  };
  definition.side_by_side = [](const BoxAreaProblem& p, const std::vector<HostTensor>& outputs, DType dtype) {
    const auto expected = area_expected(p, dtype);
    std::vector<double> oracle;
    for (const auto& e : expected) oracle.push_back(e.value);
    return element_table(outputs.front().shape, outputs.front().values, oracle,
                         compare::strict_tolerances(expected, accumulate_type(dtype)));
  };
  definition.contract = [](const BoxAreaProblem& p) { return box_contract_breach(p.boxes, "boxes"); };
  definition.probe = {{{0, 0, 2, 3}}};
  return std::make_unique<TypedOpHarness<BoxAreaProblem>>(std::move(definition));
}

std::unique_ptr<OpHarness> make_box_iou_harness(std::vector<BoxIouTarget> targets) {
  OpDefinition<BoxIouProblem> definition;
  definition.name = op_name(OpId::box_iou);
  definition.description = "pairwise IoU matrix of two box sets (torchvision.ops.box_iou contract)";
  definition.targets = std::move(targets);
  definition.generator = gen::box_iou_problem;
  definition.judge = judge;
  definition.to_json = [](const BoxIouProblem& p) { return corpus::to_json(p); };
  definition.from_json = corpus::box_iou_problem_from_json;
  definition.size = [](const BoxIouProblem& p) { return p.boxes1.size() + p.boxes2.size(); };
  definition.cost_exponent = 2;  // every pair of boxes
  definition.smaller = smaller_box_pairs;
  definition.oracle_json = [](const BoxIouProblem& p, DType dtype) {
    nlohmann::json values = nlohmann::json::array(), tolerance = nlohmann::json::array();
    const auto expected = expected_values(p, dtype);
    for (const auto& e : expected) values.push_back(corpus::json_double(e.value));
    for (double t : compare::strict_tolerances(expected, accumulate_type(dtype))) tolerance.push_back(corpus::json_double(t));
    return nlohmann::json{{"shape", {p.boxes1.size(), p.boxes2.size()}},
                          {"iou", values},
                          {"tolerance", tolerance}};
  };
  definition.side_by_side = [](const BoxIouProblem& p, const std::vector<HostTensor>& outputs, DType dtype) {
    const HostTensor& iou = outputs.front();
    const auto expected = expected_values(p, dtype);
    std::vector<double> oracle;
    for (const auto& e : expected) oracle.push_back(e.value);
    return element_table(iou.shape, iou.values, oracle, compare::strict_tolerances(expected, accumulate_type(dtype)));
  };
  definition.contract = [](const BoxIouProblem& p) {
    auto breach = box_contract_breach(p.boxes1, "boxes1");
    return breach ? breach : box_contract_breach(p.boxes2, "boxes2");
  };
  definition.probe = {{{0, 0, 2, 2}}, {{1, 1, 3, 3}}};
  return std::make_unique<TypedOpHarness<BoxIouProblem>>(std::move(definition));
}

}  // namespace detfuzz::fuzz
