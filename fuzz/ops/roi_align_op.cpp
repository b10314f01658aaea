// roi_align: interval- and bound-normalized comparison with the fp64 oracle
// (oracles/roi_align.h), plus an exact property: doubling every map value doubles every
// output bit for bit (each output is a sum of weight x value products).
#include <cmath>

#include <fmt/format.h>

#include "corpus/case_json.h"
#include "fuzz/compare/continuous.h"
#include "fuzz/ops/side_by_side.h"
#include "fuzz/ops/roi_common.h"
#include "fuzz/gen/rois.h"
#include "fuzz/ops/typed_harness.h"
#include "oracles/roi_align.h"

namespace detfuzz::fuzz {
namespace {

using RoiAlignTarget = kernels::Target<RoiAlignProblem>;

// The oracle sees the input with hostile values made harmless; the outputs they taint
// accept anything.
std::vector<compare::ExpectedValue> expected_values(const RoiAlignProblem& p, DType dtype, const RoiTaint& taint) {
  const RoiAlignProblem clean = cleaned(p, taint);
  std::vector<compare::ExpectedValue> expected;
  std::size_t i = 0;
  for (const auto& e : oracles::roi_align(clean, dtype))
    expected.push_back(expected_of(e, taint.tainted[i++]));
  return expected;
}

std::vector<std::int64_t> shape_of(const RoiAlignProblem& p) {
  return pooled_shape(p.rois.size(), p.input, p.pooled_height, p.pooled_width);
}

compare::Judgement judge(const RoiAlignProblem& problem, const RoiAlignTarget& target, DType dtype, Device device) {
  const RoiTaint taint = roi_taint(problem);
  auto run = run_target(target, problem, dtype, device, taint.hostile);
  if (auto* judgement = std::get_if<compare::Judgement>(&run)) return *judgement;
  const HostTensor& output = std::get<std::vector<HostTensor>>(run).front();
  compare::OutputContract contract{"output", shape_of(problem), std::string(dtype_name(dtype)), device};
  const std::vector<compare::ExpectedValue> expected =
      timed_oracle([&] { return expected_values(problem, dtype, taint); });
  compare::Judgement judgement = compare::compare_continuous(
      output, expected, contract, dtype, bin_sum_explainer([&problem](std::size_t element) { return oracles::roi_align_bin_samples(problem, element); },
                                            expected, target.arithmetic, dtype));
  judgement.outputs = {output};
  if (auto verdict = accepted_bad_batch_index(problem.rois, taint, problem.input.batch))
    judgement.verdicts.push_back(*verdict);
  if (!judgement.consistent() || taint.hostile) return judgement;
  check_value_scaling(problem, target, dtype, device, 1, judgement);
  return judgement;
}

}  // namespace

std::unique_ptr<OpHarness> make_roi_align_harness(std::vector<RoiAlignTarget> targets) {
  OpDefinition<RoiAlignProblem> d;
  d.name = op_name(OpId::roi_align);
  d.description = "RoIAlign forward, torchvision semantics (bilinear samples averaged per bin)";
  d.targets = std::move(targets);
  d.generator = gen::roi_align_problem;
  d.judge = judge;
  d.to_json = [](const RoiAlignProblem& p) { return corpus::to_json(p); };
  d.from_json = corpus::roi_align_problem_from_json;
  d.size = [](const RoiAlignProblem& p) { return p.rois.size(); };
  d.smaller = [](const RoiAlignProblem& p, DType dtype) {
    std::vector<RoiAlignProblem> smaller;
    for (auto& [map, rois] : smaller_maps_and_rois(p.input, p.rois, dtype)) {
      RoiAlignProblem q = p;
      q.input = std::move(map);
      q.rois = std::move(rois);
      smaller.push_back(std::move(q));
    }
    auto with = [&](auto change) {
      RoiAlignProblem q = p;
      change(q);
      smaller.push_back(std::move(q));
    };
    if (p.pooled_height > 1) with([](RoiAlignProblem& q) { q.pooled_height = 1; });
    if (p.pooled_width > 1) with([](RoiAlignProblem& q) { q.pooled_width = 1; });
    if (p.sampling_ratio != 1) with([](RoiAlignProblem& q) { q.sampling_ratio = 1; });
    if (p.aligned) with([](RoiAlignProblem& q) { q.aligned = false; });
    if (p.spatial_scale != 1) with([](RoiAlignProblem& q) { q.spatial_scale = 1; });
    return smaller;
  };
  d.oracle_json = [](const RoiAlignProblem& p, DType dtype) {
    nlohmann::json values = nlohmann::json::array(), intervals = nlohmann::json::array();
    const RoiAlignProblem clean = cleaned(p, roi_taint(p));
    for (const auto& e : oracles::roi_align(clean, dtype)) {
      values.push_back(corpus::json_double(e.value));
      intervals.push_back({corpus::json_double(e.strict.low), corpus::json_double(e.strict.high),
                           corpus::json_double(e.strict.bound)});
    }
    return nlohmann::json{{"shape", shape_of(p)}, {"output", values}, {"interval_and_bound", intervals}};
  };
  d.side_by_side = [](const RoiAlignProblem& p, const std::vector<HostTensor>& outputs, DType dtype) {
    std::vector<double> oracle, tolerance;
    const RoiAlignProblem clean = cleaned(p, roi_taint(p));
    for (const auto& e : oracles::roi_align(clean, dtype)) {
      oracle.push_back(e.value);
      tolerance.push_back(side_by_side_tolerance(e, dtype));
    }
    return element_table(outputs.front().shape, outputs.front().values, oracle, tolerance);
  };
  d.probe = {{1, 1, 2, 2, {1, 2, 3, 4}}, {{0, 0, 0, 1, 1}}, 1.0, 1, 1, 1, false};
  return std::make_unique<TypedOpHarness<RoiAlignProblem>>(std::move(d));
}

}  // namespace detfuzz::fuzz
