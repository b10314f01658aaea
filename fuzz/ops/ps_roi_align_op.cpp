// ps_roi_align: each position-sensitive bin's average of bilinear samples against the fp64
// oracle's interval and bound (oracles/roi_align.h ps_roi_align), channel_mapping exactly, a
// channel count the pooled grid does not divide refused, and the exact property that doubling
// every map value doubles every output. The problem is RoIAlign's with aligned always true:
// torchvision's kernel shifts by -0.5 and takes no aligned argument.
#include <cmath>

#include <fmt/format.h>

#include "corpus/case_json.h"
#include "fuzz/compare/continuous.h"
#include "fuzz/ops/roi_common.h"
#include "fuzz/ops/side_by_side.h"
#include "fuzz/gen/rois.h"
#include "fuzz/ops/typed_harness.h"
#include "model/error.h"
#include "oracles/roi_align.h"

namespace detfuzz::fuzz {
namespace {

using PsRoiAlignTarget = kernels::Target<RoiAlignProblem>;

std::int64_t group_of(const RoiAlignProblem& p) { return p.pooled_height * p.pooled_width; }

std::vector<std::int64_t> shape_of(const RoiAlignProblem& p) {
  const std::int64_t group = group_of(p);
  return {static_cast<std::int64_t>(p.rois.size()), group > 0 ? p.input.channels / group : 0, p.pooled_height,
          p.pooled_width};
}

// Element (k, c, ph, pw) of the position-sensitive output reads input channel c_in = its
// index within the RoI's block, at bin (ph, pw): RoIAlign's element (k, c_in, ph, pw).
std::size_t roi_align_element(const RoiAlignProblem& p, std::size_t element) {
  const auto bins = static_cast<std::size_t>(group_of(p)), per_roi = static_cast<std::size_t>(p.input.channels);
  return (element / per_roi * per_roi + element % per_roi) * bins + element % bins;
}

std::vector<compare::ExpectedValue> expected_values(const RoiAlignProblem& p, DType dtype, const RoiTaint& taint) {
  std::vector<compare::ExpectedValue> expected;
  std::size_t i = 0;
  for (const auto& e : oracles::ps_roi_align(cleaned(p, taint), dtype)) {
    const bool tainted = taint.tainted[roi_align_element(p, i++)];
    expected.push_back(expected_of(e, tainted));
  }
  return expected;
}

// torchvision's ps_roi_align divides a bin's sum by `count = roi_bin_grid_h *
// roi_bin_grid_w` without roi_align's max(count, 1): with an adaptive sampling_ratio a RoI of
// zero width or height has a grid of ceil(0) = 0 samples, and 0 / 0 is NaN where RoIAlign
// (and the oracle) give 0. Said where an element is NaN for that reason.
std::string empty_grid_explanation(const RoiAlignProblem& p, std::size_t element) {
  if (p.sampling_ratio > 0 || p.rois.empty()) return {};
  const Roi& roi = p.rois[std::min(element / static_cast<std::size_t>(p.input.channels), p.rois.size() - 1)];
  const double height = roi.y2 * p.spatial_scale - roi.y1 * p.spatial_scale;
  const double width = roi.x2 * p.spatial_scale - roi.x1 * p.spatial_scale;
  const double grid_h = std::ceil(height / static_cast<double>(p.pooled_height));
  const double grid_w = std::ceil(width / static_cast<double>(p.pooled_width));
  if (grid_h > 0 && grid_w > 0) return {};
  return fmt::format(
      "; the bin has no samples (adaptive sampling_ratio, RoI {} x {}: a grid of {:g} x {:g}), and torchvision's "
      "ps_roi_align divides by count = roi_bin_grid_h * roi_bin_grid_w without roi_align's max(count, 1): 0 / 0 "
      "(csrc/ops/cpu/ps_roi_align_kernel.cpp and cuda/ps_roi_align_kernel.cu, 0.14.1 to 0.26.0)",
      width, height, std::max(grid_h, 0.0), std::max(grid_w, 0.0));
}

compare::Judgement judge(const RoiAlignProblem& problem, const PsRoiAlignTarget& target, DType dtype, Device device) {
  if (problem.input.channels % group_of(problem) != 0) return refused_channels(problem, target, dtype, device);
  const RoiTaint taint = roi_taint(problem);
  auto run = run_target(target, problem, dtype, device, taint.hostile, 2);
  if (auto* judgement = std::get_if<compare::Judgement>(&run)) return *judgement;
  const auto& outputs = std::get<std::vector<HostTensor>>(run);
  const std::vector<std::int64_t> shape = shape_of(problem);
  const std::vector<compare::ExpectedValue> expected =
      timed_oracle([&] { return expected_values(problem, dtype, taint); });
  compare::Judgement judgement =
      compare::compare_continuous(outputs[0], expected, {"output", shape, std::string(dtype_name(dtype)), device}, dtype,
                                  bin_sum_explainer(
                                      [&problem](std::size_t element) {
                                        RoiAlignProblem aligned = problem;  // its geometry (only for a failing element)
                                        aligned.aligned = true;
                                        return oracles::roi_align_bin_samples(aligned, roi_align_element(problem, element));
                                      },
                                      expected, target.arithmetic, dtype));
  judgement.outputs = outputs;
  for (compare::Verdict& verdict : judgement.verdicts)
    if (const auto element = verdict_element(verdict, shape); element && verdict.kind == FindingKind::nan)
      verdict.message += empty_grid_explanation(problem, *element);
  if (auto verdict = channel_mapping_verdict(outputs[1], shape, problem.input.channels, device))
    judgement.verdicts.push_back(*verdict);
  if (auto verdict = accepted_bad_batch_index(problem.rois, taint, problem.input.batch))
    judgement.verdicts.push_back(*verdict);
  if (!judgement.consistent() || taint.hostile) return judgement;
  check_value_scaling(problem, target, dtype, device, 2, judgement);
  return judgement;
}

RoiAlignProblem ps_problem_from_json(const nlohmann::json& json) {
  RoiAlignProblem p = corpus::roi_align_problem_from_json(json);
  if (!p.aligned)
    throw Error(ErrorKind::input,
                "ps_roi_align input: \"aligned\" is false, but torchvision::ps_roi_align always samples as aligned "
                "RoIAlign does (start = roi * spatial_scale - 0.5) and takes no aligned argument; set \"aligned\": true");
  return p;
}

}  // namespace

std::unique_ptr<OpHarness> make_ps_roi_align_harness(std::vector<PsRoiAlignTarget> targets) {
  OpDefinition<RoiAlignProblem> d;
  d.name = op_name(OpId::ps_roi_align);
  d.description = "position-sensitive RoIAlign forward (R-FCN), torchvision semantics (aligned bilinear samples "
                  "averaged per bin, one input channel per bin)";
  d.targets = std::move(targets);
  d.generator = gen::ps_roi_align_problem;
  d.judge = judge;
  d.to_json = [](const RoiAlignProblem& p) { return corpus::to_json(p); };
  d.from_json = ps_problem_from_json;
  d.size = [](const RoiAlignProblem& p) { return p.rois.size(); };
  d.smaller = [](const RoiAlignProblem& p, DType dtype) {
    std::vector<RoiAlignProblem> smaller;
    // Channels only in whole position-sensitive groups, as for ps_roi_pool.
    for (auto& [map, rois] : smaller_maps_and_rois(p.input, p.rois, dtype))
      if (map.channels == p.input.channels) {
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
    if (p.sampling_ratio != 1) with([](RoiAlignProblem& q) { q.sampling_ratio = 1; });
    if (p.spatial_scale != 1) with([](RoiAlignProblem& q) { q.spatial_scale = 1; });
    return smaller;
  };
  d.oracle_json = [](const RoiAlignProblem& p, DType dtype) {
    nlohmann::json values = nlohmann::json::array(), intervals = nlohmann::json::array();
    for (const auto& e : oracles::ps_roi_align(cleaned(p, roi_taint(p)), dtype)) {
      values.push_back(corpus::json_double(e.value));
      intervals.push_back({corpus::json_double(e.strict.low), corpus::json_double(e.strict.high),
                           corpus::json_double(e.strict.bound)});
    }
    return nlohmann::json{{"shape", shape_of(p)}, {"output", values}, {"interval_and_bound", intervals}};
  };
  d.side_by_side = [](const RoiAlignProblem& p, const std::vector<HostTensor>& outputs, DType dtype) {
    std::vector<double> oracle, tolerance;
    for (const auto& e : oracles::ps_roi_align(cleaned(p, roi_taint(p)), dtype)) {
      oracle.push_back(e.value);
      tolerance.push_back(side_by_side_tolerance(e, dtype));
    }
    if (outputs.empty() || oracle.size() != outputs.front().values.size()) return std::string();
    return element_table(outputs.front().shape, outputs.front().values, oracle, tolerance);
  };
  d.probe = {{1, 1, 2, 2, {1, 2, 3, 4}}, {{0, 0, 0, 1, 1}}, 1.0, 1, 1, 1, true};
  return std::make_unique<TypedOpHarness<RoiAlignProblem>>(std::move(d));
}

}  // namespace detfuzz::fuzz
