// ps_roi_pool: each position-sensitive bin's mean against the fp64 oracle's interval and
// bound (compare_continuous), channel_mapping exactly, a channel count the pooled grid does
// not divide refused, and the exact property that doubling every map value doubles every
// output.
#include <cmath>

#include <fmt/format.h>

#include "corpus/case_json.h"
#include "fuzz/compare/continuous.h"
#include "fuzz/ops/roi_common.h"
#include "fuzz/ops/side_by_side.h"
#include "fuzz/gen/rois.h"
#include "fuzz/ops/typed_harness.h"
#include "oracles/ps_roi_pool.h"

namespace detfuzz::fuzz {
namespace {

using PsRoiPoolTarget = kernels::Target<RoiPoolProblem>;

std::vector<std::int64_t> shape_of(const RoiPoolProblem& p) {
  const std::int64_t group = oracles::ps_channel_group(p);
  return {static_cast<std::int64_t>(p.rois.size()), group > 0 ? p.input.channels / group : 0, p.pooled_height,
          p.pooled_width};
}

// The oracle on the input with hostile values made harmless. roi_taint marks elements of the
// [K, C, PH, PW] layout; a position-sensitive element (k, c, ph, pw) reads input channel c_in
// at bin (ph, pw), so its taint is that of (k, c_in, ph, pw).
std::vector<compare::ExpectedValue> expected_values(const RoiPoolProblem& p, DType dtype, const RoiTaint& taint) {
  const auto bins = static_cast<std::size_t>(oracles::ps_channel_group(p));
  const auto per_roi = static_cast<std::size_t>(p.input.channels);
  std::vector<compare::ExpectedValue> expected;
  std::size_t i = 0;
  for (const auto& e : oracles::ps_roi_pool(cleaned(p, taint), dtype)) {
    const std::size_t roi = i / per_roi, bin = i % bins;
    const bool tainted = taint.tainted[(roi * per_roi + static_cast<std::size_t>(e.channel)) * bins + bin];
    expected.push_back(expected_of(e, tainted));
    ++i;
  }
  return expected;
}

// Where the running sum of a bin's values over rows [row_begin, row_end) and columns
// [column_begin, column_end), in the kernel's order, first leaves the range of `sum_dtype`:
// how many values it had taken and its value then.
struct SumOverflow {
  std::size_t taken;
  double value;
};
std::optional<SumOverflow> running_sum_overflow(const FeatureMap& map, const oracles::PsRoiPoolBin& bin,
                                                std::int64_t row_end, std::int64_t column_end, DType sum_dtype) {
  double running = 0;
  std::size_t taken = 0;
  for (std::int64_t h = bin.row_begin; h < row_end; ++h)
    for (std::int64_t w = bin.column_begin; w < column_end; ++w) {
      running += map.at(bin.image, bin.channel, h, w);
      ++taken;
      if (std::isinf(round_to(sum_dtype, running))) return SumOverflow{taken, running};
    }
  return std::nullopt;
}

// torchvision's forward sums a bin without the map's last row and column
// (clipped_edge_explanation): its bin ends, clipped to height - 1 and width - 1.
std::pair<std::int64_t, std::int64_t> forward_kernel_ends(const RoiPoolProblem& p, const oracles::PsRoiPoolBin& bin) {
  return {std::min(bin.row_end, p.input.height - 1), std::min(bin.column_end, p.input.width - 1)};
}

// The stage a low-precision accumulation overflows: the bin's sum before the division by
// its area (`out_sum += offset_input[...]; out_sum / bin_area`), as for RoIAlign's samples.
// Named only where the sum overflows over the oracle's bin and over the smaller one
// torchvision's forward sums (else the value is that bug's, not the dtype's).
constexpr const char* kBinSum = "the sum of a bin's values";

compare::OverflowExplainer bin_values_sum_explainer(const RoiPoolProblem& p, const kernels::Arithmetic& arithmetic,
                                                    DType dtype) {
  const DType sum_dtype = arithmetic.dtype_of(kBinSum, dtype);
  if (sum_dtype == accumulate_type(dtype)) return {};
  return [&p, &arithmetic, sum_dtype](std::size_t element) -> std::optional<compare::StageOverflow> {
    const auto bin = oracles::ps_roi_pool_bin(p, element);
    if (!bin) return std::nullopt;
    const auto overflow = running_sum_overflow(p.input, *bin, bin->row_end, bin->column_end, sum_dtype);
    const auto [row_end, column_end] = forward_kernel_ends(p, *bin);
    if (!overflow || !running_sum_overflow(p.input, *bin, row_end, column_end, sum_dtype)) return std::nullopt;
    return compare::StageOverflow{fmt::format("the running sum of a bin's values (after {} of them)", overflow->taken),
                                  overflow->value, overflow->value, sum_dtype, arithmetic.source};
  };
}

// torchvision's forward kernels clip a bin's ends to height - 1 and width - 1 (its backward
// and its test reference to height and width): a bin reaching the map's last row or column
// averages without it. Said where the kernel's value is that mean, or infinite because its
// running sum over that smaller bin leaves the range of the dtype it sums in (`sum_dtype`),
// where the whole bin's sums do not.
std::string clipped_edge_explanation(const RoiPoolProblem& p, const HostTensor& output, std::size_t element,
                                     DType dtype, DType sum_dtype) {
  const auto bin = oracles::ps_roi_pool_bin(p, element);
  if (!bin || element >= output.values.size()) return {};
  const auto [row_end, column_end] = forward_kernel_ends(p, *bin);
  if (row_end == bin->row_end && column_end == bin->column_end) return {};
  double sum = 0;
  std::size_t count = 0;
  for (std::int64_t h = bin->row_begin; h < row_end; ++h)
    for (std::int64_t w = bin->column_begin; w < column_end; ++w, ++count) sum += p.input.at(bin->image, bin->channel, h, w);
  const bool sum_overflows = running_sum_overflow(p.input, *bin, row_end, column_end, sum_dtype).has_value();
  const double clipped_mean = count ? sum / static_cast<double>(count) : 0.0;
  const double kernel = output.values[element];
  const double slack = 4 * float_format(dtype).unit_roundoff * std::fabs(clipped_mean) + 1e-300;
  const bool is_clipped_mean = std::fabs(kernel - clipped_mean) <= slack;
  if (!is_clipped_mean && !(std::isinf(kernel) && sum_overflows)) return {};
  return fmt::format(
      "; the kernel's value is {} the map's {} (the bin is rows {}..{}, columns {}..{} of a {}x{} map): "
      "torchvision's ps_roi_pool forward clips bin ends to height - 1 and width - 1 "
      "(csrc/ops/cpu/ps_roi_pool_kernel.cpp and cuda/ps_roi_pool_kernel.cu, 0.14.1 to 0.26.0), its backward and "
      "its test reference (test/test_ops.py TestPSRoIPool.expected_fn) to height and width",
      is_clipped_mean ? "the bin's mean without"
                      : fmt::format("infinite: its {} running sum overflows over the bin without", dtype_name(sum_dtype)),
      row_end < bin->row_end ? (column_end < bin->column_end ? "last row and column" : "last row") : "last column",
      bin->row_begin, bin->row_end - 1, bin->column_begin, bin->column_end - 1, p.input.height, p.input.width);
}

compare::Judgement judge(const RoiPoolProblem& problem, const PsRoiPoolTarget& target, DType dtype, Device device) {
  if (problem.input.channels % oracles::ps_channel_group(problem) != 0)
    return refused_channels(problem, target, dtype, device);
  const RoiTaint taint = roi_taint(problem);
  auto run = run_target(target, problem, dtype, device, taint.hostile, 2);
  if (auto* judgement = std::get_if<compare::Judgement>(&run)) return *judgement;
  const auto& outputs = std::get<std::vector<HostTensor>>(run);
  const std::vector<std::int64_t> shape = shape_of(problem);
  const std::vector<compare::ExpectedValue> expected =
      timed_oracle([&] { return expected_values(problem, dtype, taint); });
  compare::Judgement judgement =
      compare::compare_continuous(outputs[0], expected, {"output", shape, std::string(dtype_name(dtype)), device}, dtype,
                                  bin_values_sum_explainer(problem, target.arithmetic, dtype));
  judgement.outputs = outputs;
  for (compare::Verdict& verdict : judgement.verdicts)
    if (const auto element = verdict_element(verdict, shape);
        element && (verdict.kind == FindingKind::mismatch || verdict.kind == FindingKind::nan))
      verdict.message += clipped_edge_explanation(problem, outputs[0], *element, dtype,
                                                  target.arithmetic.dtype_of(kBinSum, dtype));
  if (auto verdict = channel_mapping_verdict(outputs[1], shape, problem.input.channels, device))
    judgement.verdicts.push_back(*verdict);
  if (auto verdict = accepted_bad_batch_index(problem.rois, taint, problem.input.batch))
    judgement.verdicts.push_back(*verdict);
  if (!judgement.consistent() || taint.hostile) return judgement;
  check_value_scaling(problem, target, dtype, device, 2, judgement);
  return judgement;
}

}  // namespace

std::unique_ptr<OpHarness> make_ps_roi_pool_harness(std::vector<PsRoiPoolTarget> targets) {
  OpDefinition<RoiPoolProblem> d;
  d.name = op_name(OpId::ps_roi_pool);
  d.description = "position-sensitive RoIPool forward (R-FCN), torchvision semantics (mean over quantized bins, "
                  "one input channel per bin)";
  d.targets = std::move(targets);
  d.generator = gen::ps_roi_pool_problem;
  d.judge = judge;
  d.to_json = [](const RoiPoolProblem& p) { return corpus::to_json(p); };
  d.from_json = corpus::roi_pool_problem_from_json;
  d.size = [](const RoiPoolProblem& p) { return p.rois.size(); };
  d.smaller = [](const RoiPoolProblem& p, DType dtype) {
    std::vector<RoiPoolProblem> smaller;
    // Channels are dropped only in whole position-sensitive groups (a smaller map must keep
    // the channel count a multiple of the pooled grid, or the case changes its signature).
    for (auto& [map, rois] : smaller_maps_and_rois(p.input, p.rois, dtype))
      if (map.channels == p.input.channels) smaller.push_back({std::move(map), std::move(rois), p.spatial_scale, p.pooled_height, p.pooled_width});
    if (p.spatial_scale != 1) smaller.push_back({p.input, p.rois, 1.0, p.pooled_height, p.pooled_width});
    return smaller;
  };
  d.oracle_json = [](const RoiPoolProblem& p, DType dtype) {
    nlohmann::json values = nlohmann::json::array(), intervals = nlohmann::json::array(),
                   channels = nlohmann::json::array();
    for (const auto& e : oracles::ps_roi_pool(cleaned(p, roi_taint(p)), dtype)) {
      values.push_back(corpus::json_double(e.value));
      intervals.push_back({corpus::json_double(e.strict.low), corpus::json_double(e.strict.high),
                           corpus::json_double(e.strict.bound)});
      channels.push_back(e.channel);
    }
    return nlohmann::json{{"shape", shape_of(p)}, {"output", values}, {"interval_and_bound", intervals},
                          {"channel_mapping", channels}};
  };
  d.side_by_side = [](const RoiPoolProblem& p, const std::vector<HostTensor>& outputs, DType dtype) {
    std::vector<double> oracle, tolerance;
    for (const auto& e : oracles::ps_roi_pool(cleaned(p, roi_taint(p)), dtype)) {
      oracle.push_back(e.value);
      tolerance.push_back(side_by_side_tolerance(e, dtype));
    }
    if (outputs.empty() || oracle.size() != outputs.front().values.size()) return std::string();
    return element_table(outputs.front().shape, outputs.front().values, oracle, tolerance);
  };
  d.probe = {{1, 1, 2, 2, {1, 2, 3, 4}}, {{0, 0, 0, 1, 1}}, 1.0, 1, 1};
  return std::make_unique<TypedOpHarness<RoiPoolProblem>>(std::move(d));
}

}  // namespace detfuzz::fuzz
