// generalized_box_iou (pairwise) and giou_loss (paired, eps-guarded): bound-normalized
// comparison with the fp64 oracles (oracles/giou.h). Pairs with a hostile box owe nothing
// but the shape; degenerate pairs are where eps earns its keep: the loss stays finite.
// giou_loss_backward: the gradients autograd gives both box sets against the analytic fp64
// gradient (oracles/loss_gradients.h), any share at a max / min tie (identical boxes).
#include <algorithm>

#include "corpus/case_json.h"
#include "fuzz/compare/continuous.h"
#include "fuzz/ops/box_pairs.h"
#include "fuzz/ops/side_by_side.h"
#include "fuzz/ops/typed_harness.h"
#include "oracles/giou.h"
#include "oracles/loss_gradients.h"

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

// ---- giou_loss_backward ----

// [grad_boxes1 (N x 4), grad_boxes2 (N x 4)]; a pair with a hostile box (as the forward's
// verdict has it: non-finite or inverted) owes nothing in either gradient.
std::vector<compare::ExpectedValue> gradient_expected(const GiouLossProblem& p, DType dtype) {
  std::vector<compare::ExpectedValue> out;
  for (const auto& g : timed_oracle([&] { return oracles::giou_loss_gradient(p, dtype); }))
    out.push_back(compare::expected_from(g));
  const std::size_t n = p.boxes1.size();
  for (std::size_t i = 0; i < n; ++i)
    if (gen::hostile_box(p.boxes1[i]) || gen::hostile_box(p.boxes2[i]))
      for (std::size_t k = 0; k < 4; ++k) out[4 * i + k].undefined = out[4 * (n + i) + k].undefined = true;
  return out;
}

compare::Judgement judge_gradient(const GiouLossProblem& p, const kernels::Target<GiouLossProblem>& target, DType dtype,
                                  Device device) {
  auto run = run_target(target, p, dtype, device, any_hostile(p.boxes1) || any_hostile(p.boxes2), 2);
  if (auto* judgement = std::get_if<compare::Judgement>(&run)) return *judgement;
  const auto& outputs = std::get<std::vector<HostTensor>>(run);
  const std::vector<compare::ExpectedValue> expected_values = gradient_expected(p, dtype);
  const auto half = static_cast<std::ptrdiff_t>(expected_values.size() / 2);
  const std::vector<compare::ExpectedValue> parts[2] = {{expected_values.begin(), expected_values.begin() + half},
                                                        {expected_values.begin() + half, expected_values.end()}};
  compare::Judgement judgement;
  const char* names[2] = {"grad_boxes1", "grad_boxes2"};
  for (std::size_t k = 0; k < 2; ++k) {
    compare::Judgement part = compare::compare_continuous(
        outputs[k], parts[k],
        {names[k], {static_cast<std::int64_t>(p.boxes1.size()), 4}, std::string(dtype_name(dtype)), device}, dtype);
    for (auto& verdict : part.verdicts) {
      verdict.property = names[k];
      judgement.verdicts.push_back(std::move(verdict));
    }
    judgement.max_normalized_error = std::max(judgement.max_normalized_error, part.max_normalized_error);
  }
  judgement.outputs = outputs;
  return judgement;
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

std::unique_ptr<OpHarness> make_giou_loss_backward_harness(std::vector<kernels::Target<GiouLossProblem>> targets) {
  OpDefinition<GiouLossProblem> definition;
  definition.name = op_name(OpId::giou_loss_backward);
  definition.description =
      "gradient of the GIoU loss by autograd (d sum(loss) / d boxes1, d boxes2), any share at a max / min tie";
  definition.targets = std::move(targets);
  definition.generator = gen::giou_loss_problem;
  definition.judge = judge_gradient;
  definition.to_json = [](const GiouLossProblem& p) { return corpus::to_json(p); };
  definition.from_json = corpus::giou_loss_problem_from_json;
  definition.size = [](const GiouLossProblem& p) { return p.boxes1.size(); };
  definition.smaller = loss_smaller;
  definition.oracle_json = [](const GiouLossProblem& p, DType dtype) {
    nlohmann::json json = expected_json(gradient_expected(p, dtype), "grad_boxes1_then_grad_boxes2");
    json["shape"] = {2, p.boxes1.size(), 4};
    return json;
  };
  definition.side_by_side = [](const GiouLossProblem& p, const std::vector<HostTensor>& outputs, DType dtype) {
    const auto expected_values = gradient_expected(p, dtype);
    std::vector<double> both = outputs.at(0).values;
    both.insert(both.end(), outputs.at(1).values.begin(), outputs.at(1).values.end());
    return element_table({2, static_cast<std::int64_t>(p.boxes1.size()), 4}, both, values_of(expected_values),
                         compare::strict_tolerances(expected_values, dtype));
  };
  definition.contract = [](const GiouLossProblem& p) {
    auto breach = box_contract_breach(p.boxes1, "boxes1");
    return breach ? breach : box_contract_breach(p.boxes2, "boxes2");
  };
  definition.probe = {{{0, 0, 2, 2}}, {{1, 1, 3, 3}}, 1e-7, RegressionLossProblem::Reduction::none};
  return std::make_unique<TypedOpHarness<GiouLossProblem>>(std::move(definition));
}

}  // namespace detfuzz::fuzz
