// generalized_box_iou (pairwise) and giou_loss (paired, eps-guarded): bound-normalized
// comparison with the fp64 oracles (oracles/giou.h). Pairs with a hostile box owe nothing
// but the shape; degenerate pairs are where eps earns its keep: the loss stays finite.
#include <algorithm>

#include "corpus/case_json.h"
#include "fuzz/compare/continuous.h"
#include "fuzz/ops/box_pairs.h"
#include "fuzz/ops/side_by_side.h"
#include "fuzz/ops/typed_harness.h"
#include "oracles/giou.h"

namespace detfuzz::fuzz {
namespace {

// As for IoU: reorderings and second-order terms stay within twice the first-order bound.
constexpr double kGiouBoundSafety = 2.0;

compare::ExpectedValue expected(const oracles::OracleValue& v, DType dtype, bool hostile) {
  return compare::expected_from(v, dtype, kGiouBoundSafety, hostile);
}

std::vector<double> values_of(const std::vector<compare::ExpectedValue>& expected_values) {
  std::vector<double> out;
  for (const auto& e : expected_values) out.push_back(e.value);
  return out;
}

bool any_hostile(const std::vector<Box>& boxes) { return std::any_of(boxes.begin(), boxes.end(), gen::hostile_box); }

// ---- generalized_box_iou ----

std::vector<compare::ExpectedValue> pairwise_expected(const BoxIouProblem& p, DType dtype) {
  const auto values = timed_oracle([&] { return oracles::generalized_box_iou(p); });
  std::vector<compare::ExpectedValue> out;
  for (std::size_t k = 0; k < values.size(); ++k) {
    const std::size_t i = k / std::max<std::size_t>(p.boxes2.size(), 1), j = k % std::max<std::size_t>(p.boxes2.size(), 1);
    out.push_back(expected(values[k], dtype, gen::hostile_box(p.boxes1[i]) || gen::hostile_box(p.boxes2[j])));
  }
  return out;
}

compare::Judgement judge_pairwise(const BoxIouProblem& p, const kernels::Target<BoxIouProblem>& target, DType dtype,
                                  Device device) {
  const bool hostile = any_hostile(p.boxes1) || any_hostile(p.boxes2);
  auto run = run_target(target, p, dtype, device, hostile);
  if (auto* judgement = std::get_if<compare::Judgement>(&run)) return *judgement;
  const HostTensor& output = std::get<std::vector<HostTensor>>(run).front();
  compare::Judgement judgement = compare::compare_continuous(
      output, pairwise_expected(p, dtype),
      {"giou", {static_cast<std::int64_t>(p.boxes1.size()), static_cast<std::int64_t>(p.boxes2.size())},
       std::string(dtype_name(accumulate_type(dtype))), device},
      dtype, pair_extent_explainer(p, target.arithmetic, dtype, true));
  judgement.outputs = {output};
  return judgement;
}

// ---- giou_loss ----

std::vector<compare::ExpectedValue> loss_expected(const GiouLossProblem& p, DType dtype) {
  const auto values = timed_oracle([&] { return oracles::giou_loss(p); });
  const bool reduced = p.reduction != RegressionLossProblem::Reduction::none;
  std::vector<compare::ExpectedValue> out;
  for (std::size_t i = 0; i < values.size(); ++i)
    out.push_back(expected(values[i], dtype,
                           reduced ? any_hostile(p.boxes1) || any_hostile(p.boxes2)
                                   : gen::hostile_box(p.boxes1[i]) || gen::hostile_box(p.boxes2[i])));
  return out;
}

compare::Judgement judge_loss(const GiouLossProblem& p, const kernels::Target<GiouLossProblem>& target, DType dtype,
                              Device device) {
  const bool hostile = any_hostile(p.boxes1) || any_hostile(p.boxes2);
  auto run = run_target(target, p, dtype, device, hostile);
  if (auto* judgement = std::get_if<compare::Judgement>(&run)) return *judgement;
  const HostTensor& output = std::get<std::vector<HostTensor>>(run).front();
  std::vector<std::int64_t> shape;
  if (p.reduction == RegressionLossProblem::Reduction::none) shape = {static_cast<std::int64_t>(p.boxes1.size())};
  compare::Judgement judgement = compare::compare_continuous(
      output, loss_expected(p, dtype), {"loss", shape, std::string(dtype_name(accumulate_type(dtype))), device}, dtype);
  judgement.outputs = {output};
  return judgement;
}

std::vector<GiouLossProblem> loss_smaller(const GiouLossProblem& p, DType dtype) {
  std::vector<GiouLossProblem> out;
  for (auto range : removal_ranges(p.boxes1.size()))
    out.push_back({without(p.boxes1, range), without(p.boxes2, range), p.eps, p.reduction});
  for (auto& boxes : simpler_boxes(p.boxes1, dtype)) out.push_back({boxes, p.boxes2, p.eps, p.reduction});
  for (auto& boxes : simpler_boxes(p.boxes2, dtype)) out.push_back({p.boxes1, boxes, p.eps, p.reduction});
  return out;
}

}  // namespace

std::unique_ptr<OpHarness> make_generalized_box_iou_harness(std::vector<kernels::Target<BoxIouProblem>> targets) {
  OpDefinition<BoxIouProblem> definition;
  definition.name = op_name(OpId::generalized_box_iou);
  definition.description = "pairwise generalized IoU (torchvision.ops.generalized_box_iou contract)";
  definition.targets = std::move(targets);
  definition.generator = gen::box_iou_problem;
  definition.judge = judge_pairwise;
  definition.to_json = [](const BoxIouProblem& p) { return corpus::to_json(p); };
  definition.from_json = corpus::box_iou_problem_from_json;
  definition.size = [](const BoxIouProblem& p) { return p.boxes1.size() + p.boxes2.size(); };
  definition.cost_exponent = 2;  // every pair of boxes
  definition.smaller = smaller_box_pairs;
  definition.oracle_json = [](const BoxIouProblem& p, DType dtype) {
    nlohmann::json values = nlohmann::json::array();
    for (const auto& e : pairwise_expected(p, dtype)) values.push_back(corpus::json_double(e.value));
    return nlohmann::json{{"shape", {p.boxes1.size(), p.boxes2.size()}}, {"giou", values}};
  };
  definition.side_by_side = [](const BoxIouProblem& p, const std::vector<HostTensor>& outputs, DType dtype) {
    const auto expected_values = pairwise_expected(p, dtype);
    return element_table(outputs.front().shape, outputs.front().values, values_of(expected_values),
                         compare::strict_tolerances(expected_values, accumulate_type(dtype)));
  };
  definition.contract = [](const BoxIouProblem& p) {
    auto breach = box_contract_breach(p.boxes1, "boxes1");
    return breach ? breach : box_contract_breach(p.boxes2, "boxes2");
  };
  definition.probe = {{{0, 0, 2, 2}}, {{1, 1, 3, 3}}};
  return std::make_unique<TypedOpHarness<BoxIouProblem>>(std::move(definition));
}

std::unique_ptr<OpHarness> make_giou_loss_harness(std::vector<kernels::Target<GiouLossProblem>> targets) {
  OpDefinition<GiouLossProblem> definition;
  definition.name = op_name(OpId::giou_loss);
  definition.description = "GIoU loss of paired boxes (torchvision.ops.generalized_box_iou_loss, eps = 1e-7)";
  definition.targets = std::move(targets);
  definition.generator = gen::giou_loss_problem;
  definition.judge = judge_loss;
  definition.to_json = [](const GiouLossProblem& p) { return corpus::to_json(p); };
  definition.from_json = corpus::giou_loss_problem_from_json;
  definition.size = [](const GiouLossProblem& p) { return p.boxes1.size(); };
  definition.smaller = loss_smaller;
  definition.oracle_json = [](const GiouLossProblem& p, DType dtype) {
    nlohmann::json values = nlohmann::json::array();
    for (const auto& e : loss_expected(p, dtype)) values.push_back(corpus::json_double(e.value));
    return nlohmann::json{{"loss", values}};
  };
  definition.side_by_side = [](const GiouLossProblem& p, const std::vector<HostTensor>& outputs, DType dtype) {
    const auto expected_values = loss_expected(p, dtype);
    return element_table(outputs.front().shape, outputs.front().values, values_of(expected_values),
                         compare::strict_tolerances(expected_values, accumulate_type(dtype)));
  };
  definition.contract = [](const GiouLossProblem& p) {
    auto breach = box_contract_breach(p.boxes1, "boxes1");
    return breach ? breach : box_contract_breach(p.boxes2, "boxes2");
  };
  definition.probe = {{{0, 0, 2, 2}}, {{1, 1, 3, 3}}, 1e-7, RegressionLossProblem::Reduction::none};
  return std::make_unique<TypedOpHarness<GiouLossProblem>>(std::move(definition));
}

}  // namespace detfuzz::fuzz
