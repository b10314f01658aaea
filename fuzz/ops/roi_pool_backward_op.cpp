// roi_pool_backward: torchvision's _roi_pool_backward called directly with the argmax its
// forward returned, the gradient of every input element against the exact routing's sums
// (oracles/roi_pool_backward.h), a RoI outside the batch refused, and the exact property that
// doubling the gradient doubles every output.
#include "corpus/case_json.h"
#include "fuzz/gen/rois.h"
#include "fuzz/ops/roi_common.h"
#include "fuzz/ops/side_by_side.h"
#include "fuzz/ops/typed_harness.h"
#include "oracles/roi_pool_backward.h"

namespace detfuzz::fuzz {
namespace {

using PoolBackwardTarget = kernels::Target<RoiPoolBackwardProblem>;

struct PoolBackwardTaint {
  GradientTaint gradient;
  RoiPoolBackwardProblem clean;
};

PoolBackwardTaint backward_taint(const RoiPoolBackwardProblem& p) {
  const RoiPoolProblem& f = p.forward;
  const std::int64_t bins = f.pooled_height * f.pooled_width;
  PoolBackwardTaint taint{gradient_taint(f.input, f.spatial_scale, f.rois, p.grad,
                                         static_cast<std::size_t>(f.input.channels * bins),
                                         [bins](std::size_t i) { return static_cast<std::int64_t>(i) / bins; }),
                          p};
  taint.clean.forward.rois = taint.gradient.clean_rois;
  taint.clean.grad = taint.gradient.clean_grad;
  return taint;
}

compare::Judgement judge(const RoiPoolBackwardProblem& problem, const PoolBackwardTarget& target, DType dtype,
                         Device device) {
  const PoolBackwardTaint taint = backward_taint(problem);
  return judge_gradient(
      problem, target, dtype, device, taint.gradient,
      [&] {
        std::vector<compare::ExpectedValue> values;
        std::size_t i = 0;
        for (const auto& e : oracles::roi_pool_backward(taint.clean, dtype))
          values.push_back(expected_of(e, taint.gradient.tainted[i++]));
        return values;
      },
      [&taint](std::size_t element) { return oracles::roi_pool_backward_terms(taint.clean, element); });
}

// Smaller problems, largest cuts first: RoIs deleted (with their gradient and argmax blocks),
// the gradient plainer (every value 1, then each nonzero one 0), an argmax dropped to -1.
std::vector<RoiPoolBackwardProblem> smaller(const RoiPoolBackwardProblem& p) {
  std::vector<RoiPoolBackwardProblem> out;
  const RoiPoolProblem& f = p.forward;
  const auto block = static_cast<std::size_t>(f.input.channels * f.pooled_height * f.pooled_width);
  auto with = [&](auto change) {
    RoiPoolBackwardProblem q = p;
    change(q);
    out.push_back(std::move(q));
  };
  for (std::size_t k = 0; k < f.rois.size(); ++k)
    with([&](RoiPoolBackwardProblem& q) {
      q.forward.rois.erase(q.forward.rois.begin() + static_cast<std::ptrdiff_t>(k));
      q.grad.erase(q.grad.begin() + static_cast<std::ptrdiff_t>(k * block),
                   q.grad.begin() + static_cast<std::ptrdiff_t>((k + 1) * block));
      q.argmax.erase(q.argmax.begin() + static_cast<std::ptrdiff_t>(k * block),
                     q.argmax.begin() + static_cast<std::ptrdiff_t>((k + 1) * block));
    });
  if (std::any_of(p.grad.begin(), p.grad.end(), [](double g) { return g != 1; }))
    with([](RoiPoolBackwardProblem& q) { std::fill(q.grad.begin(), q.grad.end(), 1.0); });
  for (std::size_t i = 0; i < p.grad.size() && out.size() < 64; ++i)
    if (p.grad[i] != 0) with([i](RoiPoolBackwardProblem& q) { q.grad[i] = 0; });
  for (std::size_t i = 0; i < p.argmax.size() && out.size() < 96; ++i)
    if (p.argmax[i] >= 0) with([i](RoiPoolBackwardProblem& q) { q.argmax[i] = -1; });
  return out;
}

}  // namespace

std::unique_ptr<OpHarness> make_roi_pool_backward_harness(std::vector<PoolBackwardTarget> targets) {
  OpDefinition<RoiPoolBackwardProblem> d;
  d.name = op_name(OpId::roi_pool_backward);
  d.description =
      "RoIPool backward (torchvision::_roi_pool_backward): each bin's gradient added at the argmax its forward "
      "returned";
  d.targets = std::move(targets);
  d.generator = gen::roi_pool_backward_problem;
  d.judge = judge;
  d.to_json = [](const RoiPoolBackwardProblem& p) { return corpus::to_json(p); };
  d.from_json = corpus::roi_pool_backward_problem_from_json;
  d.size = [](const RoiPoolBackwardProblem& p) { return p.forward.rois.size(); };
  d.smaller = [](const RoiPoolBackwardProblem& p, DType) { return smaller(p); };
  d.oracle_json = [](const RoiPoolBackwardProblem& p, DType dtype) {
    nlohmann::json values = nlohmann::json::array(), bounds = nlohmann::json::array();
    for (const auto& e : oracles::roi_pool_backward(backward_taint(p).clean, dtype)) {
      values.push_back(corpus::json_double(e.value));
      bounds.push_back(corpus::json_double(e.strict.bound));
    }
    const FeatureMap& map = p.forward.input;
    return nlohmann::json{{"shape", {map.batch, map.channels, map.height, map.width}},
                          {"grad_input", values},
                          {"bound", bounds}};
  };
  d.side_by_side = [](const RoiPoolBackwardProblem& p, const std::vector<HostTensor>& outputs, DType dtype) {
    std::vector<double> oracle, tolerance;
    for (const auto& e : oracles::roi_pool_backward(backward_taint(p).clean, dtype)) {
      oracle.push_back(e.value);
      tolerance.push_back(side_by_side_tolerance(e, dtype));
    }
    return element_table(outputs.front().shape, outputs.front().values, oracle, tolerance);
  };
  d.probe = {{{1, 1, 2, 2, {}}, {{0, 0, 0, 1, 1}}, 1.0, 1, 1}, {1}, {3}};
  return std::make_unique<TypedOpHarness<RoiPoolBackwardProblem>>(std::move(d));
}

}  // namespace detfuzz::fuzz
