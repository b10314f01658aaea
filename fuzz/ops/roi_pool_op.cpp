// roi_pool: exact comparison of (max, argmax) against the oracle's options per element
// (fuzz/compare/roi_pool_compare.h), plus the exact property that doubling every map value
// doubles every output and keeps every argmax.
#include "corpus/case_json.h"
#include "fuzz/compare/roi_pool_compare.h"
#include "fuzz/ops/side_by_side.h"
#include "fuzz/ops/roi_common.h"
#include "fuzz/gen/rois.h"
#include "fuzz/ops/typed_harness.h"
#include "oracles/roi_pool.h"

namespace detfuzz::fuzz {
namespace {

using RoiPoolTarget = kernels::Target<RoiPoolProblem>;

std::vector<std::int64_t> shape_of(const RoiPoolProblem& p) {
  return pooled_shape(p.rois.size(), p.input, p.pooled_height, p.pooled_width);
}

// The oracle's options on the input with hostile values made harmless; outputs they taint
// accept anything.
std::vector<oracles::RoiPoolElement> expected_options(const RoiPoolProblem& p, DType dtype, const RoiTaint& taint) {
  const RoiPoolProblem clean = cleaned(p, taint);
  std::vector<oracles::RoiPoolElement> expected = oracles::roi_pool(clean, dtype);
  for (std::size_t i = 0; i < expected.size(); ++i) expected[i].unconstrained = expected[i].unconstrained || taint.tainted[i];
  return expected;
}

compare::Judgement judge(const RoiPoolProblem& problem, const RoiPoolTarget& target, DType dtype, Device device) {
  const RoiTaint taint = roi_taint(problem);
  auto run = run_target(target, problem, dtype, device, taint.hostile, 2);
  if (auto* judgement = std::get_if<compare::Judgement>(&run)) return *judgement;
  const auto& outputs = std::get<std::vector<HostTensor>>(run);
  compare::Judgement judgement = compare::compare_roi_pool(outputs[0], outputs[1], timed_oracle([&] { return expected_options(problem, dtype, taint); }),
                                                           shape_of(problem), dtype, device);
  judgement.outputs = outputs;
  if (auto verdict = accepted_bad_batch_index(problem.rois, taint, problem.input.batch))
    judgement.verdicts.push_back(*verdict);
  if (!judgement.consistent() || taint.hostile) return judgement;
  check_value_scaling(problem, target, dtype, device, 2, judgement);
  return judgement;
}

}  // namespace

std::unique_ptr<OpHarness> make_roi_pool_harness(std::vector<RoiPoolTarget> targets) {
  OpDefinition<RoiPoolProblem> d;
  d.name = op_name(OpId::roi_pool);
  d.description = "RoIPool forward, torchvision semantics (max over quantized bins, with argmax)";
  d.targets = std::move(targets);
  d.generator = gen::roi_pool_problem;
  d.judge = judge;
  d.to_json = [](const RoiPoolProblem& p) { return corpus::to_json(p); };
  d.from_json = corpus::roi_pool_problem_from_json;
  d.size = [](const RoiPoolProblem& p) { return p.rois.size(); };
  d.smaller = [](const RoiPoolProblem& p, DType dtype) {
    std::vector<RoiPoolProblem> smaller;
    for (auto& [map, rois] : smaller_maps_and_rois(p.input, p.rois, dtype))
      smaller.push_back({std::move(map), std::move(rois), p.spatial_scale, p.pooled_height, p.pooled_width});
    if (p.pooled_height > 1) smaller.push_back({p.input, p.rois, p.spatial_scale, 1, p.pooled_width});
    if (p.pooled_width > 1) smaller.push_back({p.input, p.rois, p.spatial_scale, p.pooled_height, 1});
    if (p.spatial_scale != 1) smaller.push_back({p.input, p.rois, 1.0, p.pooled_height, p.pooled_width});
    return smaller;
  };
  d.oracle_json = [](const RoiPoolProblem& p, DType dtype) {
    nlohmann::json values = nlohmann::json::array(), argmax = nlohmann::json::array();
    const RoiPoolProblem clean = cleaned(p, roi_taint(p));
    for (const auto& e : oracles::roi_pool(clean, dtype)) {
      values.push_back(corpus::json_double(e.nominal.value));
      argmax.push_back(e.nominal.argmax);
    }
    return nlohmann::json{{"shape", shape_of(p)}, {"output", values}, {"argmax", argmax}};
  };
  d.side_by_side = [](const RoiPoolProblem& p, const std::vector<HostTensor>& outputs, DType dtype) {
    std::vector<double> oracle, oracle_argmax, tolerance;
    const RoiTaint taint = roi_taint(p);
    for (const auto& e : expected_options(p, dtype, taint)) {
      oracle.push_back(e.nominal.value);
      oracle_argmax.push_back(static_cast<double>(e.nominal.argmax));
      tolerance.push_back(0.0);
    }
    return element_table(outputs[0].shape, outputs[0].values, oracle, tolerance) +
           lists_side_by_side("argmax", outputs[1].values, oracle_argmax);
  };
  d.probe = {{1, 1, 2, 2, {1, 2, 3, 4}}, {{0, 0, 0, 1, 1}}, 1.0, 1, 1};
  return std::make_unique<TypedOpHarness<RoiPoolProblem>>(std::move(d));
}

}  // namespace detfuzz::fuzz
