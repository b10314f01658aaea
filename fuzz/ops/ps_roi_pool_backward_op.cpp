// ps_roi_pool_backward: torchvision's _ps_roi_pool_backward called directly with the
// channel_mapping its forward returns, the gradient of every input element against the fp64
// adjoint oracle's interval and bound (oracles/ps_roi_pool_backward.h), a RoI outside the
// batch refused, and the exact property that doubling the gradient doubles every output.
#include "corpus/case_json.h"
#include "fuzz/gen/rois.h"
#include "fuzz/ops/roi_common.h"
#include "fuzz/ops/side_by_side.h"
#include "fuzz/ops/typed_harness.h"
#include "oracles/ps_roi_pool_backward.h"

namespace detfuzz::fuzz {
namespace {

using PsPoolBackwardTarget = kernels::Target<PsRoiPoolBackwardProblem>;

struct PsPoolBackwardTaint {
  GradientTaint gradient;
  PsRoiPoolBackwardProblem clean;
};

// A RoI's gradient block is [C / (PH * PW), PH, PW]: value i of it lands in input channel i.
PsPoolBackwardTaint backward_taint(const PsRoiPoolBackwardProblem& p) {
  const RoiPoolProblem& f = p.forward;
  PsPoolBackwardTaint taint{gradient_taint(f.input, f.spatial_scale, f.rois, p.grad,
                                           static_cast<std::size_t>(f.input.channels),
                                           [](std::size_t i) { return static_cast<std::int64_t>(i); }),
                            p};
  taint.clean.forward.rois = taint.gradient.clean_rois;
  taint.clean.grad = taint.gradient.clean_grad;
  return taint;
}

compare::Judgement judge(const PsRoiPoolBackwardProblem& problem, const PsPoolBackwardTarget& target, DType dtype,
                         Device device) {
  const PsPoolBackwardTaint taint = backward_taint(problem);
  return judge_gradient(
      problem, target, dtype, device, taint.gradient,
      [&] {
        std::vector<compare::ExpectedValue> values;
        std::size_t i = 0;
        for (const auto& e : oracles::ps_roi_pool_backward(taint.clean, dtype))
          values.push_back(expected_of(e, taint.gradient.tainted[i++]));
        return values;
      },
      [&taint](std::size_t element) { return oracles::ps_roi_pool_backward_terms(taint.clean, element); });
}

// Smaller problems, largest cuts first: RoIs deleted (with their gradient blocks), the last
// image no RoI uses dropped, the map's last row or column cropped, the gradient plainer
// (every value 1, then each nonzero one 0), spatial_scale 1.
std::vector<PsRoiPoolBackwardProblem> smaller(const PsRoiPoolBackwardProblem& p) {
  std::vector<PsRoiPoolBackwardProblem> out;
  const RoiPoolProblem& f = p.forward;
  const auto block = static_cast<std::size_t>(f.input.channels);
  auto with = [&](auto change) {
    PsRoiPoolBackwardProblem q = p;
    change(q);
    out.push_back(std::move(q));
  };
  for (std::size_t k = 0; k < f.rois.size(); ++k)
    with([&](PsRoiPoolBackwardProblem& q) {
      q.forward.rois.erase(q.forward.rois.begin() + static_cast<std::ptrdiff_t>(k));
      q.grad.erase(q.grad.begin() + static_cast<std::ptrdiff_t>(k * block),
                   q.grad.begin() + static_cast<std::ptrdiff_t>((k + 1) * block));
    });
  const bool last_image_used = std::any_of(f.rois.begin(), f.rois.end(), [&](const Roi& r) {
    return r.batch_index == static_cast<double>(f.input.batch - 1);
  });
  if (f.input.batch > 1 && !last_image_used) with([](PsRoiPoolBackwardProblem& q) { --q.forward.input.batch; });
  if (f.input.height > 1) with([](PsRoiPoolBackwardProblem& q) { --q.forward.input.height; });
  if (f.input.width > 1) with([](PsRoiPoolBackwardProblem& q) { --q.forward.input.width; });
  if (std::any_of(p.grad.begin(), p.grad.end(), [](double g) { return g != 1; }))
    with([](PsRoiPoolBackwardProblem& q) { std::fill(q.grad.begin(), q.grad.end(), 1.0); });
  for (std::size_t i = 0; i < p.grad.size() && out.size() < 64; ++i)
    if (p.grad[i] != 0) with([i](PsRoiPoolBackwardProblem& q) { q.grad[i] = 0; });
  if (f.spatial_scale != 1) with([](PsRoiPoolBackwardProblem& q) { q.forward.spatial_scale = 1; });
  return out;
}

}  // namespace

std::unique_ptr<OpHarness> make_ps_roi_pool_backward_harness(std::vector<PsPoolBackwardTarget> targets) {
  OpDefinition<PsRoiPoolBackwardProblem> d;
  d.name = op_name(OpId::ps_roi_pool_backward);
  d.description =
      "PSRoIPool backward (torchvision::_ps_roi_pool_backward): each bin's gradient spread evenly over its pixels "
      "in its own input channel";
  d.targets = std::move(targets);
  d.generator = gen::ps_roi_pool_backward_problem;
  d.judge = judge;
  d.to_json = [](const PsRoiPoolBackwardProblem& p) { return corpus::to_json(p); };
  d.from_json = corpus::ps_roi_pool_backward_problem_from_json;
  d.size = [](const PsRoiPoolBackwardProblem& p) { return p.forward.rois.size(); };
  d.smaller = [](const PsRoiPoolBackwardProblem& p, DType) { return smaller(p); };
  d.oracle_json = [](const PsRoiPoolBackwardProblem& p, DType dtype) {
    nlohmann::json values = nlohmann::json::array(), intervals = nlohmann::json::array();
    for (const auto& e : oracles::ps_roi_pool_backward(backward_taint(p).clean, dtype)) {
      values.push_back(corpus::json_double(e.value));
      intervals.push_back({corpus::json_double(e.strict.low), corpus::json_double(e.strict.high),
                           corpus::json_double(e.strict.bound)});
    }
    const FeatureMap& map = p.forward.input;
    return nlohmann::json{{"shape", {map.batch, map.channels, map.height, map.width}},
                          {"grad_input", values},
                          {"interval_and_bound", intervals}};
  };
  d.side_by_side = [](const PsRoiPoolBackwardProblem& p, const std::vector<HostTensor>& outputs, DType dtype) {
    std::vector<double> oracle, tolerance;
    for (const auto& e : oracles::ps_roi_pool_backward(backward_taint(p).clean, dtype)) {
      oracle.push_back(e.value);
      tolerance.push_back(side_by_side_tolerance(e, dtype));
    }
    return element_table(outputs.front().shape, outputs.front().values, oracle, tolerance);
  };
  d.probe = {{{1, 4, 2, 2, {}}, {{0, 0, 0, 2, 2}}, 1.0, 2, 2}, {1, 2, 3, 4}};
  return std::make_unique<TypedOpHarness<PsRoiPoolBackwardProblem>>(std::move(d));
}

}  // namespace detfuzz::fuzz
