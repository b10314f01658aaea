// roi_align_backward and ps_roi_align_backward: torchvision's _roi_align_backward and
// _ps_roi_align_backward called directly, the gradient of every input element against the
// fp64 adjoint oracle's interval and bound (oracles/roi_align_backward.h), a RoI naming an
// image outside the batch refused (the kernels write grad_input at that image's offset), and
// the exact property that doubling the gradient doubles every output. One file for both: they
// differ only in where a bin's gradient lands (its own channel, or channel c * bins + b).
#include <cmath>

#include <fmt/format.h>

#include "corpus/case_json.h"
#include "fuzz/compare/continuous.h"
#include "fuzz/gen/hostile.h"
#include "fuzz/gen/rois.h"
#include "fuzz/ops/roi_common.h"
#include "fuzz/ops/side_by_side.h"
#include "fuzz/ops/typed_harness.h"
#include "oracles/roi_align_backward.h"

namespace detfuzz::fuzz {
namespace {

using BackwardTarget = kernels::Target<RoiAlignBackwardProblem>;

std::vector<std::int64_t> shape_of(const RoiAlignBackwardProblem& p) {
  const FeatureMap& map = p.forward.input;
  return {map.batch, map.channels, map.height, map.width};
}

std::int64_t output_channels(const RoiAlignProblem& f, bool position_sensitive) {
  const std::int64_t bins = f.pooled_height * f.pooled_width;
  return position_sensitive && bins > 0 ? f.input.channels / bins : f.input.channels;
}

// The taint of a backward problem (roi_common's gradient_taint) and the problem the oracle
// sees.
struct BackwardTaint {
  GradientTaint gradient;
  RoiAlignBackwardProblem clean;
};

BackwardTaint backward_taint(const RoiAlignBackwardProblem& p, bool position_sensitive) {
  const RoiAlignProblem& f = p.forward;
  const std::int64_t bins = f.pooled_height * f.pooled_width;
  const auto block = static_cast<std::size_t>(output_channels(f, position_sensitive) * bins);
  BackwardTaint taint{gradient_taint(f.input, f.spatial_scale, f.rois, p.grad, block,
                                     [bins, position_sensitive](std::size_t i) {
                                       const auto c = static_cast<std::int64_t>(i) / bins;
                                       return position_sensitive ? c * bins + static_cast<std::int64_t>(i) % bins : c;
                                     }),
                      p};
  taint.clean.forward.rois = taint.gradient.clean_rois;
  taint.clean.grad = taint.gradient.clean_grad;
  return taint;
}

oracles::RoiAlignAnswer gradient(const RoiAlignBackwardProblem& p, DType dtype, bool position_sensitive) {
  return position_sensitive ? oracles::ps_roi_align_backward(p, dtype) : oracles::roi_align_backward(p, dtype);
}

compare::Judgement judge(const RoiAlignBackwardProblem& problem, const BackwardTarget& target, DType dtype,
                         Device device, bool position_sensitive) {
  const BackwardTaint taint = backward_taint(problem, position_sensitive);
  return judge_gradient(
      problem, target, dtype, device, taint.gradient,
      [&] {
        std::vector<compare::ExpectedValue> values;
        std::size_t i = 0;
        for (const auto& e : gradient(taint.clean, dtype, position_sensitive))
          values.push_back(expected_of(e, taint.gradient.tainted[i++]));
        return values;
      },
      [&taint, position_sensitive](std::size_t element) {
        return oracles::roi_align_backward_terms(taint.clean, position_sensitive, element);
      });
}

// Smaller problems, largest cuts first: RoIs (with their gradient blocks) deleted, the last
// image no RoI uses dropped, the map's last row or column cropped, the gradient plainer
// (every value 1, then each nonzero one 0), then the geometry plainer.
std::vector<RoiAlignBackwardProblem> smaller(const RoiAlignBackwardProblem& p, bool position_sensitive) {
  std::vector<RoiAlignBackwardProblem> out;
  const RoiAlignProblem& f = p.forward;
  const auto block = static_cast<std::size_t>(output_channels(f, position_sensitive) * f.pooled_height * f.pooled_width);
  auto with = [&](auto change) {
    RoiAlignBackwardProblem q = p;
    change(q);
    out.push_back(std::move(q));
  };
  for (std::size_t k = 0; k < f.rois.size(); ++k)
    with([&](RoiAlignBackwardProblem& q) {
      q.forward.rois.erase(q.forward.rois.begin() + static_cast<std::ptrdiff_t>(k));
      q.grad.erase(q.grad.begin() + static_cast<std::ptrdiff_t>(k * block),
                   q.grad.begin() + static_cast<std::ptrdiff_t>((k + 1) * block));
    });
  const bool last_image_used = std::any_of(f.rois.begin(), f.rois.end(), [&](const Roi& r) {
    return r.batch_index == static_cast<double>(f.input.batch - 1);
  });
  if (f.input.batch > 1 && !last_image_used) with([](RoiAlignBackwardProblem& q) { --q.forward.input.batch; });
  if (f.input.height > 1) with([](RoiAlignBackwardProblem& q) { --q.forward.input.height; });
  if (f.input.width > 1) with([](RoiAlignBackwardProblem& q) { --q.forward.input.width; });
  if (std::any_of(p.grad.begin(), p.grad.end(), [](double g) { return g != 1; }))
    with([](RoiAlignBackwardProblem& q) { std::fill(q.grad.begin(), q.grad.end(), 1.0); });
  for (std::size_t i = 0; i < p.grad.size() && out.size() < 64; ++i)
    if (p.grad[i] != 0) with([i](RoiAlignBackwardProblem& q) { q.grad[i] = 0; });
  if (f.sampling_ratio != 1) with([](RoiAlignBackwardProblem& q) { q.forward.sampling_ratio = 1; });
  if (f.aligned && !position_sensitive) with([](RoiAlignBackwardProblem& q) { q.forward.aligned = false; });
  if (f.spatial_scale != 1) with([](RoiAlignBackwardProblem& q) { q.forward.spatial_scale = 1; });
  return out;
}

std::unique_ptr<OpHarness> backward_harness(OpId op, std::vector<BackwardTarget> targets, bool position_sensitive) {
  OpDefinition<RoiAlignBackwardProblem> d;
  d.name = op_name(op);
  d.description = position_sensitive
                      ? "PSRoIAlign backward (torchvision::_ps_roi_align_backward): each bin's gradient scattered "
                        "with its samples' bilinear weights into its own input channel"
                      : "RoIAlign backward (torchvision::_roi_align_backward): each bin's gradient scattered with "
                        "its samples' bilinear weights, summed over RoIs";
  d.targets = std::move(targets);
  d.generator = position_sensitive ? gen::ps_roi_align_backward_problem : gen::roi_align_backward_problem;
  d.judge = [position_sensitive](const RoiAlignBackwardProblem& p, const BackwardTarget& target, DType dtype,
                                 Device device) { return judge(p, target, dtype, device, position_sensitive); };
  d.to_json = [](const RoiAlignBackwardProblem& p) { return corpus::to_json(p); };
  d.from_json = [position_sensitive](const nlohmann::json& json) {
    return corpus::roi_align_backward_problem_from_json(json, position_sensitive);
  };
  d.size = [](const RoiAlignBackwardProblem& p) { return p.forward.rois.size(); };
  d.smaller = [position_sensitive](const RoiAlignBackwardProblem& p, DType) { return smaller(p, position_sensitive); };
  d.oracle_json = [position_sensitive](const RoiAlignBackwardProblem& p, DType dtype) {
    nlohmann::json values = nlohmann::json::array(), intervals = nlohmann::json::array();
    for (const auto& e : gradient(backward_taint(p, position_sensitive).clean, dtype, position_sensitive)) {
      values.push_back(corpus::json_double(e.value));
      intervals.push_back({corpus::json_double(e.strict.low), corpus::json_double(e.strict.high),
                           corpus::json_double(e.strict.bound)});
    }
    return nlohmann::json{{"shape", shape_of(p)}, {"grad_input", values}, {"interval_and_bound", intervals}};
  };
  d.side_by_side = [position_sensitive](const RoiAlignBackwardProblem& p, const std::vector<HostTensor>& outputs,
                                        DType dtype) {
    std::vector<double> oracle, tolerance;
    for (const auto& e : gradient(backward_taint(p, position_sensitive).clean, dtype, position_sensitive)) {
      oracle.push_back(e.value);
      tolerance.push_back(side_by_side_tolerance(e, dtype));
    }
    return element_table(outputs.front().shape, outputs.front().values, oracle, tolerance);
  };
  if (position_sensitive)
    d.probe = {{{1, 4, 2, 2, {}}, {{0, 0, 0, 2, 2}}, 1.0, 2, 2, 1, true}, {1, 2, 3, 4}};
  else
    d.probe = {{{1, 1, 2, 2, {}}, {{0, 0, 0, 1, 1}}, 1.0, 1, 1, 1, false}, {1}};
  return std::make_unique<TypedOpHarness<RoiAlignBackwardProblem>>(std::move(d));
}

}  // namespace

std::unique_ptr<OpHarness> make_roi_align_backward_harness(std::vector<BackwardTarget> targets) {
  return backward_harness(OpId::roi_align_backward, std::move(targets), false);
}

std::unique_ptr<OpHarness> make_ps_roi_align_backward_harness(std::vector<BackwardTarget> targets) {
  return backward_harness(OpId::ps_roi_align_backward, std::move(targets), true);
}

}  // namespace detfuzz::fuzz
