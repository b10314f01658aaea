// regression_loss and fast_rcnn_loss: bound-normalized comparison with the fp64 oracles
// (oracles/losses.h), smooth L1's branch ambiguity as an interval per tier. A loss that
// touches a hostile value (NaN, infinite) owes nothing but its shape; everything else must
// be finite where the oracle is, which is what catches 0/0 on an image without positives.
// regression_loss_backward: the gradient autograd gives against the analytic fp64 gradient
// (oracles/loss_gradients.h), every subgradient accepted at |x - y|'s kink.
#include <algorithm>

#include "corpus/case_json.h"
#include "fuzz/compare/continuous.h"
#include "fuzz/gen/losses.h"
#include "fuzz/ops/side_by_side.h"
#include "fuzz/ops/typed_harness.h"
#include "oracles/loss_gradients.h"
#include "oracles/losses.h"

namespace detfuzz::fuzz {
namespace {

// Second-order terms and the summation orders of ATen's reductions (cascade sums, vectorized
// lanes) stay within twice the sequential first-order bound.
constexpr double kLossBoundSafety = 2.0;

compare::ExpectedValue expected(const oracles::LossValue& loss, DType dtype, bool hostile) {
  const DType strict = accumulate_type(dtype);
  const auto tier = [&](DType compute) {
    const std::size_t f = oracles::format_index(compute);
    return compare::TierExpectation{loss.low[f], loss.high[f],
                                    kLossBoundSafety * (loss.value.bound(compute) + loss.value.bound(DType::fp64))};
  };
  return {loss.value.value, loss.value.undefined || hostile, tier(strict), tier(dtype), loss.value.range_ok(strict)};
}

bool any_hostile(const std::vector<double>& values) { return std::any_of(values.begin(), values.end(), gen::hostile_value); }

std::vector<double> oracle_values(const std::vector<oracles::LossValue>& losses) {
  std::vector<double> values;
  for (const auto& l : losses) values.push_back(l.value.value);
  return values;
}

// ---- regression_loss ----

std::vector<compare::ExpectedValue> regression_expected(const RegressionLossProblem& p, DType dtype) {
  const std::vector<oracles::LossValue> losses = timed_oracle([&] { return oracles::regression_loss(p); });
  const bool reduced = p.reduction != RegressionLossProblem::Reduction::none;
  std::vector<compare::ExpectedValue> out;
  for (std::size_t i = 0; i < losses.size(); ++i) {
    const bool hostile = reduced ? any_hostile(p.input) || any_hostile(p.target)
                                 : gen::hostile_value(p.input[i]) || gen::hostile_value(p.target[i]);
    out.push_back(expected(losses[i], dtype, hostile));
  }
  return out;
}

compare::Judgement judge_regression(const RegressionLossProblem& p, const kernels::Target<RegressionLossProblem>& target,
                                    DType dtype, Device device) {
  const bool hostile = any_hostile(p.input) || any_hostile(p.target);
  auto run = run_target(target, p, dtype, device, hostile);
  if (auto* judgement = std::get_if<compare::Judgement>(&run)) return *judgement;
  const HostTensor& output = std::get<std::vector<HostTensor>>(run).front();
  std::vector<std::int64_t> shape;
  if (p.reduction == RegressionLossProblem::Reduction::none) shape = {static_cast<std::int64_t>(p.input.size())};
  compare::Judgement judgement = compare::compare_continuous(
      output, regression_expected(p, dtype), {"loss", shape, std::string(dtype_name(dtype)), device}, dtype);
  judgement.outputs = {output};
  return judgement;
}

std::vector<RegressionLossProblem> regression_smaller(const RegressionLossProblem& p, DType dtype) {
  std::vector<RegressionLossProblem> out;
  for (auto range : removal_ranges(p.input.size())) {
    RegressionLossProblem fewer = p;
    fewer.input = without(p.input, range);
    fewer.target = without(p.target, range);
    out.push_back(std::move(fewer));
  }
  for (std::size_t i = 0; i < p.input.size() && p.input.size() <= kMaxElementsToSimplify; ++i)
    for (auto values : {&RegressionLossProblem::input, &RegressionLossProblem::target})
      for (double v : simpler_values((p.*values)[i], dtype)) {
        RegressionLossProblem plainer = p;
        (plainer.*values)[i] = v;
        out.push_back(std::move(plainer));
      }
  return out;
}

// ---- regression_loss_backward ----

std::vector<compare::ExpectedValue> regression_gradient_expected(const RegressionLossProblem& p, DType dtype) {
  std::vector<compare::ExpectedValue> out;
  for (const auto& g : timed_oracle([&] { return oracles::regression_loss_gradient(p, dtype); }))
    out.push_back(compare::expected_from(g));
  return out;
}

compare::Judgement judge_regression_gradient(const RegressionLossProblem& p,
                                             const kernels::Target<RegressionLossProblem>& target, DType dtype,
                                             Device device) {
  auto run = run_target(target, p, dtype, device, any_hostile(p.input) || any_hostile(p.target));
  if (auto* judgement = std::get_if<compare::Judgement>(&run)) return *judgement;
  const HostTensor& output = std::get<std::vector<HostTensor>>(run).front();
  compare::Judgement judgement = compare::compare_continuous(
      output, regression_gradient_expected(p, dtype),
      {"grad_input", {static_cast<std::int64_t>(p.input.size())}, std::string(dtype_name(dtype)), device}, dtype);
  judgement.outputs = {output};
  return judgement;
}

// ---- fast_rcnn_loss ----

std::vector<compare::ExpectedValue> fast_rcnn_expected(const FastRcnnLossProblem& p, DType dtype) {
  const std::vector<oracles::LossValue> losses = timed_oracle([&] { return oracles::fast_rcnn_loss(p); });
  return {expected(losses[0], dtype, any_hostile(p.class_logits)), expected(losses[1], dtype, any_hostile(p.box_regression))};
}

compare::Judgement judge_fast_rcnn(const FastRcnnLossProblem& p, const kernels::Target<FastRcnnLossProblem>& target,
                                   DType dtype, Device device) {
  const bool hostile = any_hostile(p.class_logits) || any_hostile(p.box_regression);
  auto run = run_target(target, p, dtype, device, hostile, 2);
  if (auto* judgement = std::get_if<compare::Judgement>(&run)) return *judgement;
  const auto& outputs = std::get<std::vector<HostTensor>>(run);
  const auto expected_values = fast_rcnn_expected(p, dtype);
  compare::Judgement judgement;
  const char* names[2] = {"classification_loss", "box_loss"};
  for (std::size_t k = 0; k < 2; ++k) {
    compare::Judgement part = compare::compare_continuous(
        outputs[k], {expected_values[k]}, {names[k], {}, std::string(dtype_name(dtype)), device}, dtype);
    for (auto& verdict : part.verdicts) {
      verdict.property = names[k];
      judgement.verdicts.push_back(std::move(verdict));
    }
    judgement.max_normalized_error = std::max(judgement.max_normalized_error, part.max_normalized_error);
  }
  judgement.outputs = outputs;
  return judgement;
}

FastRcnnLossProblem without_proposals(const FastRcnnLossProblem& p, std::pair<std::size_t, std::size_t> range) {
  FastRcnnLossProblem fewer = p;
  const auto c = static_cast<std::size_t>(p.classes);
  fewer.labels = without(p.labels, range);
  fewer.class_logits = without(p.class_logits, {range.first * c, range.second * c});
  fewer.box_regression = without(p.box_regression, {range.first * 4 * c, range.second * 4 * c});
  fewer.regression_targets = without(p.regression_targets, {range.first * 4, range.second * 4});
  return fewer;
}

std::vector<FastRcnnLossProblem> fast_rcnn_smaller(const FastRcnnLossProblem& p, DType dtype) {
  std::vector<FastRcnnLossProblem> out;
  for (auto range : removal_ranges(p.labels.size())) out.push_back(without_proposals(p, range));
  for (std::size_t i = 0; i < p.labels.size(); ++i)
    if (p.labels[i] != 0) {
      FastRcnnLossProblem background = p;
      background.labels[i] = 0;
      out.push_back(std::move(background));
    }
  for (auto values : {&FastRcnnLossProblem::class_logits, &FastRcnnLossProblem::box_regression,
                       &FastRcnnLossProblem::regression_targets}) {
    if ((p.*values).size() > kMaxElementsToSimplify) continue;
    for (std::size_t i = 0; i < (p.*values).size(); ++i)
      for (double v : simpler_values((p.*values)[i], dtype)) {
        FastRcnnLossProblem plainer = p;
        (plainer.*values)[i] = v;
        out.push_back(std::move(plainer));
      }
  }
  return out;
}

}  // namespace

std::unique_ptr<OpHarness> make_regression_loss_harness(std::vector<kernels::Target<RegressionLossProblem>> targets) {
  OpDefinition<RegressionLossProblem> definition;
  definition.name = op_name(OpId::regression_loss);
  definition.description = "smooth L1 (beta, incl. 1/9 and 0) and L1 losses with none / sum / mean reduction";
  definition.targets = std::move(targets);
  definition.generator = gen::regression_loss_problem;
  definition.judge = judge_regression;
  definition.to_json = [](const RegressionLossProblem& p) { return corpus::to_json(p); };
  definition.from_json = corpus::regression_loss_problem_from_json;
  definition.size = [](const RegressionLossProblem& p) { return p.input.size(); };
  definition.smaller = regression_smaller;
  definition.oracle_json = [](const RegressionLossProblem& p, DType dtype) {
    nlohmann::json values = nlohmann::json::array();
    for (const auto& e : regression_expected(p, dtype)) values.push_back(corpus::json_double(e.value));
    return nlohmann::json{{"loss", values}};
  };
  definition.side_by_side = [](const RegressionLossProblem& p, const std::vector<HostTensor>& outputs, DType dtype) {
    const auto expected_values = regression_expected(p, dtype);
    return element_table(outputs.front().shape, outputs.front().values, oracle_values(oracles::regression_loss(p)),
                         compare::strict_tolerances(expected_values, dtype));
  };
  definition.probe.input = {0.5, 2};
  definition.probe.target = {0, 0};
  return std::make_unique<TypedOpHarness<RegressionLossProblem>>(std::move(definition));
}

std::unique_ptr<OpHarness> make_regression_loss_backward_harness(
    std::vector<kernels::Target<RegressionLossProblem>> targets) {
  OpDefinition<RegressionLossProblem> definition;
  definition.name = op_name(OpId::regression_loss_backward);
  definition.description =
      "gradient of smooth L1 / L1 losses by autograd (d sum(loss) / d input), any subgradient at a zero residual";
  definition.targets = std::move(targets);
  definition.generator = gen::regression_loss_problem;
  definition.judge = judge_regression_gradient;
  definition.to_json = [](const RegressionLossProblem& p) { return corpus::to_json(p); };
  definition.from_json = corpus::regression_loss_problem_from_json;
  definition.size = [](const RegressionLossProblem& p) { return p.input.size(); };
  definition.smaller = regression_smaller;
  definition.oracle_json = [](const RegressionLossProblem& p, DType dtype) {
    return expected_json(regression_gradient_expected(p, dtype), "grad_input");
  };
  definition.side_by_side = [](const RegressionLossProblem& p, const std::vector<HostTensor>& outputs, DType dtype) {
    const auto expected_values = regression_gradient_expected(p, dtype);
    std::vector<double> values;
    for (const auto& e : expected_values) values.push_back(e.value);
    return element_table(outputs.front().shape, outputs.front().values, values,
                         compare::strict_tolerances(expected_values, dtype));
  };
  definition.probe.input = {0.5, 2};
  definition.probe.target = {0, 0};
  return std::make_unique<TypedOpHarness<RegressionLossProblem>>(std::move(definition));
}

std::unique_ptr<OpHarness> make_fast_rcnn_loss_harness(std::vector<kernels::Target<FastRcnnLossProblem>> targets) {
  OpDefinition<FastRcnnLossProblem> definition;
  definition.name = op_name(OpId::fast_rcnn_loss);
  definition.description =
      "Fast R-CNN head loss (torchvision roi_heads.fastrcnn_loss): cross-entropy + smooth L1 of the positives / N";
  definition.targets = std::move(targets);
  definition.generator = gen::fast_rcnn_loss_problem;
  definition.judge = judge_fast_rcnn;
  definition.to_json = [](const FastRcnnLossProblem& p) { return corpus::to_json(p); };
  definition.from_json = corpus::fast_rcnn_loss_problem_from_json;
  definition.size = [](const FastRcnnLossProblem& p) { return p.labels.size(); };
  definition.smaller = fast_rcnn_smaller;
  definition.oracle_json = [](const FastRcnnLossProblem& p, DType) {
    const auto losses = oracles::fast_rcnn_loss(p);
    return nlohmann::json{{"classification_loss", corpus::json_double(losses[0].value.value)},
                          {"box_loss", corpus::json_double(losses[1].value.value)}};
  };
  definition.side_by_side = [](const FastRcnnLossProblem& p, const std::vector<HostTensor>& outputs, DType dtype) {
    const auto expected_values = fast_rcnn_expected(p, dtype);
    return element_table({2}, {outputs[0].values.at(0), outputs[1].values.at(0)}, oracle_values(oracles::fast_rcnn_loss(p)),
                         compare::strict_tolerances(expected_values, dtype));
  };
  definition.probe.classes = 2;
  definition.probe.class_logits = {0.5, -0.5};
  definition.probe.labels = {1};
  definition.probe.box_regression = {0, 0, 0, 0, 0.5, 0.25, 0, 0};
  definition.probe.regression_targets = {0.5, 0, 0, 0};
  return std::make_unique<TypedOpHarness<FastRcnnLossProblem>>(std::move(definition));
}

}  // namespace detfuzz::fuzz
