// deform_conv2d: bound-normalized comparison with the fp64 oracle (oracles/deform_conv2d.h),
// shapes the kernel must refuse refused, and an exact property: doubling every map value and
// the bias doubles every output bit for bit (each output is a sum of products with exact
// bilinear weights, plus the bias).
#include <cmath>

#include <fmt/format.h>

#include "corpus/case_json.h"
#include "fuzz/compare/continuous.h"
#include "fuzz/gen/deform.h"
#include "fuzz/gen/hostile.h"
#include "fuzz/ops/roi_common.h"
#include "fuzz/ops/side_by_side.h"
#include "fuzz/ops/typed_harness.h"
#include "oracles/deform_conv2d.h"

namespace detfuzz::fuzz {
namespace {

using DeformTarget = kernels::Target<DeformConv2dProblem>;

std::vector<std::int64_t> shape_of(const DeformConv2dProblem& p) {
  return {p.batch, p.out_channels, p.out_height(), p.out_width()};
}

// What a hostile input leaves unconstrained: an output whose group reads a map channel holding
// a non-finite value, or whose position has a non-finite or far-off (beyond 2^20 pixels: the
// kernel's int casts of the position overflow there) offset or a non-finite mask value.
// `clean` has those values replaced by 0, for the oracle.
struct DeformTaint {
  bool hostile = false;
  std::vector<bool> tainted;  // per output element
  DeformConv2dProblem clean;
};

DeformTaint deform_taint(const DeformConv2dProblem& p) {
  DeformTaint taint{false, {}, p};
  if (oracles::deform_conv2d_shape_error(p)) return taint;
  const std::int64_t oh = p.out_height(), ow = p.out_width(), taps = p.kernel_h * p.kernel_w;
  const std::int64_t plane = oh * ow;
  auto bad = [](double v) { return !std::isfinite(v); };
  // Per (image, channel): the map plane holds a hostile value.
  std::vector<bool> bad_channel(static_cast<std::size_t>(p.batch * p.in_channels), false);
  const auto map_plane = static_cast<std::size_t>(p.height * p.width);
  for (std::size_t i = 0; i < p.input.size(); ++i)
    if (bad(p.input[i])) {
      bad_channel[i / map_plane] = true;
      taint.clean.input[i] = 0;
    }
  // Per (image, offset group, output position): an offset or mask value there is hostile.
  std::vector<bool> bad_position(static_cast<std::size_t>(p.batch * p.offset_groups * plane), false);
  const auto per_offset_group = static_cast<std::size_t>(2 * taps * plane);
  for (std::size_t i = 0; i < p.offset.size(); ++i)
    if (bad(p.offset[i]) || std::fabs(p.offset[i]) > 0x1p20) {
      bad_position[(i / per_offset_group) * static_cast<std::size_t>(plane) + i % static_cast<std::size_t>(plane)] = true;
      taint.clean.offset[i] = 0;
    }
  const auto per_mask_group = static_cast<std::size_t>(taps * plane);
  for (std::size_t i = 0; i < p.mask.size(); ++i)
    if (bad(p.mask[i])) {
      bad_position[(i / per_mask_group) * static_cast<std::size_t>(plane) + i % static_cast<std::size_t>(plane)] = true;
      taint.clean.mask[i] = 0;
    }
  bool any_bad_parameter = false;
  for (double& w : taint.clean.weight) any_bad_parameter |= bad(w);
  for (double& b : taint.clean.bias) any_bad_parameter |= bad(b);
  const std::int64_t group_channels = p.in_channels / p.groups, group_outputs = p.out_channels / p.groups;
  const std::int64_t channels_per_offset_group = p.in_channels / p.offset_groups;
  taint.tainted.assign(static_cast<std::size_t>(p.batch * p.out_channels * plane), any_bad_parameter);
  for (std::int64_t b = 0; b < p.batch; ++b)
    for (std::int64_t o = 0; o < p.out_channels; ++o)
      for (std::int64_t gc = 0; gc < group_channels; ++gc) {
        const std::int64_t c = (o / group_outputs) * group_channels + gc, og = c / channels_per_offset_group;
        const bool channel = bad_channel[static_cast<std::size_t>(b * p.in_channels + c)];
        for (std::int64_t q = 0; q < plane; ++q)
          if (channel || bad_position[static_cast<std::size_t>((b * p.offset_groups + og) * plane + q)])
            taint.tainted[static_cast<std::size_t>((b * p.out_channels + o) * plane + q)] = true;
      }
  for (bool t : taint.tainted) taint.hostile |= t;
  return taint;
}

std::vector<compare::ExpectedValue> expected_values(const std::vector<oracles::DeformConv2dElement>& answer,
                                                    const DeformTaint& taint) {
  std::vector<compare::ExpectedValue> expected;
  expected.reserve(answer.size());
  for (std::size_t i = 0; i < answer.size(); ++i) {
    const auto& e = answer[i];
    expected.push_back(compare::ExpectedValue::point(e.value, e.strict_bound, e.storage_bound, e.range_ok,
                                                     taint.tainted[i]));
  }
  return expected;
}

// The stage a low-precision kernel overflows: the convolution sum before the bias, which
// torchvision keeps in a tensor of the input's dtype (out_buf) and only then adds the bias
// to. Its exact value, or its reach given the storage tier's rounding, rounds to infinity in
// the dtype the target sums in while the biased output fits; else a running sum over the
// terms in column order (the group's channels outer, taps inner) that may do so.
constexpr const char* kConvolutionSum = "the convolution sum before the bias";
// The im2col columns (mask x bilinear sample), which the kernel stores in the input's dtype:
// a mask beyond 1 takes a sample of a large map value past that dtype's range.
constexpr const char* kColumns = "the im2col columns (mask x bilinear sample)";

compare::OverflowExplainer convolution_sum_explainer(const DeformConv2dProblem& problem,
                                                     const std::vector<oracles::DeformConv2dElement>& answer,
                                                     const kernels::Arithmetic& arithmetic, DType dtype) {
  const DType sum_dtype = arithmetic.dtype_of(kConvolutionSum, dtype);
  if (sum_dtype == accumulate_type(dtype) && arithmetic.dtype_of(kColumns, dtype) == accumulate_type(dtype)) return {};
  return [&problem, &answer, &arithmetic, sum_dtype, dtype](std::size_t element) -> std::optional<compare::StageOverflow> {
    const oracles::DeformConv2dElement& e = answer[element];
    auto overflows = [sum_dtype](double value) { return std::isinf(round_to(sum_dtype, value)); };
    const double reach = std::copysign(std::fabs(e.sum) + e.storage_bound, e.sum);
    if (overflows(e.sum)) return compare::StageOverflow{kConvolutionSum, e.sum, e.sum, sum_dtype, arithmetic.source};
    if (overflows(reach)) return compare::StageOverflow{kConvolutionSum, e.sum, reach, sum_dtype, arithmetic.source};
    const std::vector<oracles::DeformConv2dTerm> terms = oracles::deform_conv2d_terms(problem, element);
    const DType column_dtype = arithmetic.dtype_of(kColumns, dtype);
    if (column_dtype != accumulate_type(dtype))
      for (std::size_t k = 0; k < terms.size(); ++k)
        if (std::isinf(round_to(column_dtype, terms[k].peak)))
          return compare::StageOverflow{fmt::format("{} (entry {} of {} in column order)", kColumns, k + 1, terms.size()),
                                        terms[k].column, std::copysign(terms[k].peak, terms[k].column), column_dtype,
                                        arithmetic.source};
    const double u = float_format(sum_dtype).unit_roundoff;
    double running = 0, magnitude = 0;
    for (std::size_t taken = 1; taken <= terms.size(); ++taken) {
      running += terms[taken - 1].value();
      magnitude += std::fabs(terms[taken - 1].value());
      const double partial = std::copysign(std::fabs(running) + static_cast<double>(taken - 1) * u * magnitude, running);
      if (overflows(partial))
        return compare::StageOverflow{
            fmt::format("the running sum of the convolution's terms (after {} of {} in column order; the sum is {})",
                        taken, terms.size(), e.sum),
            running, partial, sum_dtype, arithmetic.source};
    }
    return std::nullopt;
  };
}

// Whether every product on an output's path (weight x mask x bilinear weights x map value)
// stays in the dtype's normal range, before and after doubling the map and the bias: below it
// rounding is absolute, not relative, and doubling is not exact (a weight of 1e-30 in fp32).
// The bilinear weights are at least the smallest distance of an offset from an integer (the
// positions' integer parts are exact) or, once rounded, the unit roundoff.
bool doubling_is_exact(const DeformConv2dProblem& p, DType dtype) {
  const FloatFormat& format = float_format(dtype);
  auto smallest = [](const std::vector<double>& values, double none) {
    double least = none;
    for (double v : values)
      if (v != 0) least = std::min(least, std::fabs(v));
    return least;
  };
  auto largest = [](const std::vector<double>& values) {
    double most = 0;
    for (double v : values) most = std::max(most, std::fabs(v));
    return most;
  };
  double fraction = format.unit_roundoff;
  for (double d : p.offset)
    if (d != std::round(d)) fraction = std::min(fraction, std::fabs(d - std::round(d)));
  const std::vector<double> no_mask{1.0};
  const std::vector<double>& mask = p.use_mask ? p.mask : no_mask;
  const double lowest = smallest(p.input, 1) * smallest(p.weight, 1) * smallest(mask, 1) * fraction * fraction;
  const double terms = static_cast<double>((p.in_channels / std::max<std::int64_t>(p.groups, 1)) * p.kernel_h * p.kernel_w);
  const double highest = 2 * (largest(p.input) * largest(p.weight) * std::max(1.0, largest(mask)) * terms + largest(p.bias));
  return lowest >= std::ldexp(format.min_normal, 8) && highest <= std::ldexp(format.max_finite, -8);
}

// A problem whose shapes the kernel must refuse: no verdict when it raises, one when it returns.
compare::Judgement refused_shapes(const DeformConv2dProblem& problem, const std::string& why, const DeformTarget& target,
                                  DType dtype, Device device) {
  compare::Judgement judgement;
  auto run = run_guarded(target, problem, dtype, device, "shapes", 1);
  if (std::holds_alternative<compare::Verdict>(run)) return judgement;
  judgement.outputs = std::get<std::vector<HostTensor>>(run);
  judgement.verdicts.push_back({FindingKind::mismatch, "shapes",
                                "torchvision's kernel refuses these shapes (" + why + ") and this one returned without an error",
                                {{"why", why}}});
  return judgement;
}

compare::Judgement judge(const DeformConv2dProblem& problem, const DeformTarget& target, DType dtype, Device device) {
  if (auto why = oracles::deform_conv2d_shape_error(problem)) return refused_shapes(problem, *why, target, dtype, device);
  const DeformTaint taint = deform_taint(problem);
  auto run = run_target(target, problem, dtype, device, taint.hostile);
  if (auto* judgement = std::get_if<compare::Judgement>(&run)) return *judgement;
  const HostTensor& output = std::get<std::vector<HostTensor>>(run).front();
  compare::OutputContract contract{"output", shape_of(problem), std::string(dtype_name(dtype)), device};
  const std::vector<oracles::DeformConv2dElement> answer =
      timed_oracle([&] { return oracles::deform_conv2d(taint.clean, dtype); });
  const std::vector<compare::ExpectedValue> expected = expected_values(answer, taint);
  compare::Judgement judgement = compare::compare_continuous(
      output, expected, contract, dtype, convolution_sum_explainer(taint.clean, answer, target.arithmetic, dtype));
  judgement.outputs = {output};
  if (!judgement.consistent() || taint.hostile || !doubling_is_exact(problem, dtype)) return judgement;
  auto input = doubled_values(problem.input, dtype);
  auto bias = doubled_values(problem.bias, dtype);
  if (!input || !bias) return judgement;
  DeformConv2dProblem doubled = problem;
  doubled.input = std::move(*input);
  doubled.bias = std::move(*bias);
  check_doubling(doubled, target, dtype, device, 1, "value_scaling", "map value and the bias", judgement);
  return judgement;
}

// The row-major [d0, d1, d2, d3] tensor `values` with every axis cut to `keep`'s length.
std::vector<double> cropped(const std::vector<double>& values, const std::array<std::int64_t, 4>& shape,
                            const std::array<std::int64_t, 4>& keep) {
  std::vector<double> out;
  for (std::int64_t a = 0; a < keep[0]; ++a)
    for (std::int64_t b = 0; b < keep[1]; ++b)
      for (std::int64_t c = 0; c < keep[2]; ++c)
        for (std::int64_t d = 0; d < keep[3]; ++d)
          out.push_back(values[static_cast<std::size_t>(((a * shape[1] + b) * shape[2] + c) * shape[3] + d)]);
  return out;
}

// The problem with `batch` images and a map of `height` x `width` (the offsets and mask cut
// to its output size).
DeformConv2dProblem resized(const DeformConv2dProblem& p, std::int64_t batch, std::int64_t height, std::int64_t width) {
  DeformConv2dProblem q = p;
  q.batch = batch;
  q.height = height;
  q.width = width;
  const std::int64_t taps = p.kernel_h * p.kernel_w;
  q.input = cropped(p.input, {p.batch, p.in_channels, p.height, p.width}, {batch, p.in_channels, height, width});
  q.offset = cropped(p.offset, {p.batch, 2 * p.offset_groups * taps, p.out_height(), p.out_width()},
                     {batch, 2 * p.offset_groups * taps, q.out_height(), q.out_width()});
  if (p.use_mask)
    q.mask = cropped(p.mask, {p.batch, p.offset_groups * taps, p.out_height(), p.out_width()},
                     {batch, p.offset_groups * taps, q.out_height(), q.out_width()});
  return q;
}

std::vector<DeformConv2dProblem> smaller(const DeformConv2dProblem& p, DType) {
  std::vector<DeformConv2dProblem> out;
  if (oracles::deform_conv2d_shape_error(p)) return out;
  if (p.batch > 1) out.push_back(resized(p, p.batch - 1, p.height, p.width));
  // One output channel fewer in every group.
  if (p.out_channels > p.groups) {
    DeformConv2dProblem q = p;
    const std::int64_t per_group = p.out_channels / p.groups, weights_per_output = (p.in_channels / p.groups) * p.kernel_h * p.kernel_w;
    q.out_channels -= p.groups;
    q.weight.clear();
    q.bias.clear();
    for (std::int64_t o = 0; o < p.out_channels; ++o) {
      if (o % per_group == per_group - 1) continue;
      q.bias.push_back(p.bias[static_cast<std::size_t>(o)]);
      const auto first = p.weight.begin() + o * weights_per_output;
      q.weight.insert(q.weight.end(), first, first + weights_per_output);
    }
    out.push_back(std::move(q));
  }
  for (auto [height, width] : {std::pair{p.height - 1, p.width}, std::pair{p.height, p.width - 1}}) {
    DeformConv2dProblem shape = p;
    shape.height = height;
    shape.width = width;
    if (height >= 1 && width >= 1 && shape.out_height() > 0 && shape.out_width() > 0)
      out.push_back(resized(p, p.batch, height, width));
  }
  auto with = [&](bool applies, auto change) {
    if (!applies) return;
    DeformConv2dProblem q = p;
    change(q);
    out.push_back(std::move(q));
  };
  auto any = [](const std::vector<double>& v, double other_than) {
    for (double x : v)
      if (x != other_than) return true;
    return false;
  };
  with(any(p.offset, 0), [](DeformConv2dProblem& q) { std::fill(q.offset.begin(), q.offset.end(), 0.0); });
  with(p.use_mask, [](DeformConv2dProblem& q) {
    q.use_mask = false;
    q.mask.clear();
  });
  with(any(p.bias, 0), [](DeformConv2dProblem& q) { std::fill(q.bias.begin(), q.bias.end(), 0.0); });
  with(any(p.weight, 1), [](DeformConv2dProblem& q) { std::fill(q.weight.begin(), q.weight.end(), 1.0); });
  return out;
}

}  // namespace

std::unique_ptr<OpHarness> make_deform_conv2d_harness(std::vector<DeformTarget> targets) {
  OpDefinition<DeformConv2dProblem> d;
  d.name = op_name(OpId::deform_conv2d);
  d.description = "deformable convolution forward (DCNv1, and v2 with a mask), torchvision semantics";
  d.targets = std::move(targets);
  d.generator = gen::deform_conv2d_problem;
  d.judge = judge;
  d.to_json = [](const DeformConv2dProblem& p) { return corpus::to_json(p); };
  d.from_json = corpus::deform_conv2d_problem_from_json;
  d.size = [](const DeformConv2dProblem& p) {
    return oracles::deform_conv2d_shape_error(p) ? std::size_t{0}
                                                 : static_cast<std::size_t>(p.batch * p.out_channels * p.out_height() * p.out_width());
  };
  d.smaller = smaller;
  d.oracle_json = [](const DeformConv2dProblem& p, DType dtype) {
    nlohmann::json values = nlohmann::json::array(), bounds = nlohmann::json::array();
    for (const auto& e : oracles::deform_conv2d(deform_taint(p).clean, dtype)) {
      values.push_back(corpus::json_double(e.value));
      bounds.push_back({corpus::json_double(e.strict_bound), corpus::json_double(e.storage_bound)});
    }
    return nlohmann::json{{"shape", shape_of(p)}, {"output", values}, {"strict_and_storage_bound", bounds}};
  };
  d.side_by_side = [](const DeformConv2dProblem& p, const std::vector<HostTensor>& outputs, DType dtype) {
    std::vector<double> oracle, tolerance;
    for (const auto& e : oracles::deform_conv2d(deform_taint(p).clean, dtype)) {
      oracle.push_back(e.value);
      tolerance.push_back(compare::tolerance({e.value, e.value, e.strict_bound}, dtype));
    }
    return element_table(outputs.front().shape, outputs.front().values, oracle, tolerance);
  };
  // One image, one channel, a 2 x 2 map, a 1 x 1 kernel with zero offsets: 2 x input + 1.
  DeformConv2dProblem probe;
  probe.batch = probe.in_channels = probe.out_channels = 1;
  probe.height = probe.width = 2;
  probe.input = {1, 2, 3, 4};
  probe.weight = {2};
  probe.offset = std::vector<double>(8, 0.0);
  probe.bias = {1};
  d.probe = probe;
  return std::make_unique<TypedOpHarness<DeformConv2dProblem>>(std::move(d));
}

}  // namespace detfuzz::fuzz
