// What the RoI ops (roi_align, roi_pool) share: minimizer moves over a feature map and its
// RoIs, and the exact property that scaling every map value by 2 scales every output by 2.
#pragma once

#include <optional>
#include <utility>
#include <vector>

#include <functional>

#include "fuzz/compare/continuous.h"
#include "fuzz/compare/verdict.h"
#include "fuzz/ops/contained_run.h"
#include "fuzz/ops/typed_harness.h"
#include "kernels/target.h"
#include "model/dtype.h"
#include "model/problems.h"

namespace detfuzz::fuzz {

struct MapAndRois {
  FeatureMap map;
  std::vector<Roi> rois;
};

// Smaller or plainer (map, RoIs) pairs, largest cuts first: RoIs deleted, a channel or an
// image no RoI uses dropped, the last row or column cropped, values made plainer, RoI
// coordinates made plainer.
std::vector<MapAndRois> smaller_maps_and_rois(const FeatureMap& map, const std::vector<Roi>& rois, DType dtype);

// The map with every value doubled, when that is exact and stays far from overflow and
// from subnormal products in `dtype` (so outputs must double exactly); nullopt otherwise.
std::optional<FeatureMap> doubled_map(const FeatureMap& map, DType dtype);
std::optional<std::vector<double>> doubled_values(std::vector<double> values, DType dtype);

// A RoI whose scaled corners reach a million feature pixels: kernels overflow their int
// grids or take minutes there, so its outputs are unconstrained.
bool extreme_roi(const Roi& roi, double spatial_scale);

// Which outputs a hostile input leaves unconstrained: those of a RoI with a non-finite or
// inverted box or a batch index outside the batch, and those reading a channel that holds
// non-finite values. `clean` is the input with those replaced by harmless values, for the
// oracle (which must never read NaN into an index or outside the map).
struct RoiTaint {
  bool hostile = false;
  std::vector<std::size_t> bad_batch_index;  // RoIs whose image does not exist
  std::vector<bool> tainted;                 // per output element, [K, C, PH, PW]
  FeatureMap clean_map;
  std::vector<Roi> clean_rois;
};
// RoIs reaching a million feature pixels count as hostile (kernels overflow or take minutes).
RoiTaint roi_taint(const FeatureMap& map, const std::vector<Roi>& rois, double spatial_scale,
                   std::int64_t pooled_height, std::int64_t pooled_width);

// The taint of a RoI problem (RoiAlignProblem, RoiPoolProblem), and the problem the oracle
// sees: the input with the hostile values of `taint` made harmless.
template <class RoiProblem>
RoiTaint roi_taint(const RoiProblem& p) {
  return roi_taint(p.input, p.rois, p.spatial_scale, p.pooled_height, p.pooled_width);
}
template <class RoiProblem>
RoiProblem cleaned(const RoiProblem& p, const RoiTaint& taint) {
  RoiProblem clean = p;
  clean.input = taint.clean_map;
  clean.rois = taint.clean_rois;
  return clean;
}

// A RoI pointing at an image the batch does not have must be refused: a kernel that returns
// normally has read memory that is not its input. nullopt when no such RoI was accepted.
std::optional<compare::Verdict> accepted_bad_batch_index(const std::vector<Roi>& rois, const RoiTaint& taint,
                                                         std::int64_t batch);
// The verdict for RoI k, saying what the kernel did with the memory it named (`access`:
// "read memory that is not its input", "wrote outside grad_input").
compare::Verdict accepted_bad_batch_index(const std::vector<Roi>& rois, std::size_t k, std::int64_t batch,
                                          const std::string& access);

// The position-sensitive ops (ps_roi_align, ps_roi_pool): their channel_mapping output
// [K, C / (PH * PW), PH, PW] (int32), where element i of a RoI's block reads input channel i
// and its backward scatters the gradient there. A verdict when it breaks that.
std::optional<compare::Verdict> channel_mapping_verdict(const HostTensor& mapping, const std::vector<std::int64_t>& shape,
                                                        std::int64_t channels, Device device);

// A channel count the pooled grid does not divide has no position-sensitive reading: a kernel
// that returns normally on it breaks its contract (torchvision: "input channels must be a
// multiple of pooling height * pooling width").
compare::Verdict accepted_indivisible_channels(std::int64_t channels, std::int64_t group);

// The judgement of a position-sensitive problem whose channels the grid does not divide:
// none when the target refuses it, accepted_indivisible_channels when it returns.
template <class Problem>
compare::Judgement refused_channels(const Problem& problem, const kernels::Target<Problem>& target, DType dtype,
                                    Device device) {
  compare::Judgement judgement;
  auto run = run_guarded(target, problem, dtype, device, "channels", 2);
  if (std::holds_alternative<compare::Verdict>(run)) return judgement;  // refused: what it must do
  judgement.outputs = std::get<std::vector<HostTensor>>(run);
  judgement.verdicts.push_back(
      accepted_indivisible_channels(problem.input.channels, problem.pooled_height * problem.pooled_width));
  return judgement;
}

// The row-major index of the element a continuous verdict names ([k, c, ph, pw] in its
// details' "element") in an output of `shape`; nullopt when it names none.
std::optional<std::size_t> verdict_element(const compare::Verdict& verdict, const std::vector<std::int64_t>& shape);

// The stage a low-precision accumulation overflows: the sum of a bin's samples before the
// division by their count (torchvision's `output_val += ...; output_val /= count`). Its exact
// final value is the oracle's average times the count, and the kernel's sum lies within the
// storage tier's interval and bound times the count of it; where that reach rounds to
// infinity in the dtype the target sums in, the sum overflowed by that dtype's doing. Else the
// running sums, in the kernel's order over the oracle's fp64 samples: one whose true value
// rounds to infinity there is named with the samples it took (values of both signs can pass
// the range and come back).
// `samples_of(element)`: the fp64 samples the element averages, in the kernel's order (empty
// where it has none). RoIAlign and PSRoIAlign, whose arithmetic stage is "the sum of a bin's
// samples".
compare::OverflowExplainer bin_sum_explainer(std::function<std::vector<double>(std::size_t)> samples_of,
                                             const std::vector<compare::ExpectedValue>& expected,
                                             const kernels::Arithmetic& arithmetic, DType dtype);

// The same for a backward's gradient: the element is the sum of the terms its kernel adds into
// it (terms_of(element), in the kernel's order), in the dtype the target declares for the
// stage kGradientSum. A running sum is claimed where the kernel's may reach the dtype's
// overflow: its true value plus the rounding of the additions so far, (i - 1) u sum |t_j|.
inline constexpr const char* kGradientSum = "the sum of an input element's gradient terms";
compare::OverflowExplainer gradient_sum_explainer(std::function<std::vector<double>(std::size_t)> terms_of,
                                                  const std::vector<compare::ExpectedValue>& expected,
                                                  const kernels::Arithmetic& arithmetic, DType dtype);

// The exact property of the RoI ops: doubling every input value (`doubled`: the problem with
// them doubled, `what` names them) doubles every value of output 0 bit for bit (sums of
// products with exact weights, maxima, means), and leaves the other outputs (argmax,
// channel_mapping) as they were. Appends the verdict (property `property`) when it does not,
// or when the rerun raises; `outputs` are the main run's.
template <class Problem>
void check_doubling(const Problem& doubled, const kernels::Target<Problem>& target, DType dtype, Device device,
                    std::size_t expected_outputs, const std::string& property, const std::string& what,
                    compare::Judgement& judgement) {
  auto rerun = run_guarded(target, doubled, dtype, device, property, expected_outputs);
  if (auto* verdict = std::get_if<compare::Verdict>(&rerun)) {
    judgement.verdicts.push_back(*verdict);
    return;
  }
  auto again = std::get<std::vector<HostTensor>>(std::move(rerun));
  for (double& v : again[0].values) v /= 2;
  if (again[0].values.size() != judgement.outputs[0].values.size()) return;  // the shape contract's to judge
  bool same = again[0].values == judgement.outputs[0].values;
  for (std::size_t i = 1; i < expected_outputs && same; ++i) same = again[i].values == judgement.outputs[i].values;
  if (!same)
    judgement.verdicts.push_back({FindingKind::mismatch, property,
                                  expected_outputs > 1
                                      ? "doubling every " + what + " did not double every output (or moved an argmax)"
                                      : "doubling every " + what + " did not double every output exactly",
                                  {}});
}

// check_doubling of every map value (property "value_scaling").
template <class Problem>
void check_value_scaling(const Problem& problem, const kernels::Target<Problem>& target, DType dtype, Device device,
                         std::size_t expected_outputs, compare::Judgement& judgement) {
  auto doubled = doubled_map(problem.input, dtype);
  if (!doubled) return;
  Problem scaled = problem;
  scaled.input = *doubled;
  check_doubling(scaled, target, dtype, device, expected_outputs, "value_scaling", "feature value", judgement);
}

// What a hostile backward input leaves unconstrained: everything, when a RoI names an image
// outside the batch; the whole image of a RoI with a hostile or extreme box; the input channel
// a non-finite gradient value lands in. The clean RoIs and gradient (those RoIs emptied with
// their gradient zeroed, every non-finite value zeroed) are what the oracle sees.
struct GradientTaint {
  bool hostile = false;
  std::vector<std::size_t> bad_batch_index;
  std::vector<bool> tainted;  // per input element, [N, C, H, W]
  std::vector<Roi> clean_rois;
  std::vector<double> clean_grad;
};
// `map`: the input's shape; `block`: gradient values per RoI; `channel_of(i)`: the input
// channel value i of a RoI's block lands in.
GradientTaint gradient_taint(const FeatureMap& map, double spatial_scale, const std::vector<Roi>& rois,
                             const std::vector<double>& grad, std::size_t block,
                             const std::function<std::int64_t(std::size_t)>& channel_of);

// The judgement of a backward kernel (Problem: a `forward` with the RoIs and the map's shape,
// and `grad`): its grad_input against `expected` (the oracle on the clean problem), a RoI
// outside the batch refused (its kernel run in a forked child: torchvision scatters such a
// RoI's gradient past grad_input), and the exact property that doubling the gradient doubles
// every output. `terms_of(element)`: the terms the kernel adds into an element, in its order.
template <class Problem>
compare::Judgement judge_gradient(const Problem& problem, const kernels::Target<Problem>& target, DType dtype,
                                  Device device, const GradientTaint& taint,
                                  const std::function<std::vector<compare::ExpectedValue>()>& expected_of_clean,
                                  std::function<std::vector<double>(std::size_t)> terms_of) {
  const FeatureMap& map = problem.forward.input;
  std::vector<HostTensor> outputs;
  if (!taint.bad_batch_index.empty() && device == Device::cpu) {
    auto contained = run_contained(
        [&] {
          PhaseTimer timer(Phase::kernel);
          return target.run(problem, dtype, device);
        },
        "kernel");
    compare::Judgement refused;
    if (auto* verdict = std::get_if<compare::Verdict>(&contained)) {
      if (verdict->kind != FindingKind::exception) refused.verdicts.push_back(*verdict);  // refusing it is right
      return refused;
    }
    outputs = std::get<std::vector<HostTensor>>(std::move(contained));
    if (outputs.empty()) {
      refused.verdicts.push_back({FindingKind::shape, "contract", "the kernel returned no outputs", {}});
      return refused;
    }
  } else {
    auto run = run_target(target, problem, dtype, device, taint.hostile);
    if (auto* judgement = std::get_if<compare::Judgement>(&run)) return *judgement;
    outputs = std::get<std::vector<HostTensor>>(std::move(run));
  }
  compare::Judgement judgement;
  if (!taint.bad_batch_index.empty()) {
    // What it wrote past grad_input may have landed in its own output: nothing of it is to judge.
    judgement.outputs = {outputs.front()};
    judgement.verdicts.push_back(accepted_bad_batch_index(problem.forward.rois, taint.bad_batch_index.front(), map.batch,
                                                          "wrote outside grad_input"));
    return judgement;
  }
  const HostTensor& output = outputs.front();
  compare::OutputContract contract{"grad_input", {map.batch, map.channels, map.height, map.width},
                                   std::string(dtype_name(dtype)), device};
  const std::vector<compare::ExpectedValue> expected = timed_oracle(expected_of_clean);
  judgement = compare::compare_continuous(
      output, expected, contract, dtype, gradient_sum_explainer(std::move(terms_of), expected, target.arithmetic, dtype));
  judgement.outputs = {output};
  if (!judgement.consistent() || taint.hostile) return judgement;
  if (auto doubled = doubled_values(problem.grad, dtype)) {
    Problem scaled = problem;
    scaled.grad = std::move(*doubled);
    check_doubling(scaled, target, dtype, device, 1, "gradient_scaling", "gradient value", judgement);
  }
  return judgement;
}

// The output expectation of one element of a RoI oracle's answer (RoiAlignElement and its
// kin: value, strict and storage tiers, range_ok, unconstrained); `tainted`: a hostile input
// leaves it unconstrained.
template <class Element>
compare::ExpectedValue expected_of(const Element& e, bool tainted) {
  return {e.value, tainted || e.unconstrained, {e.strict.low, e.strict.high, e.strict.bound},
          {e.storage.low, e.storage.high, e.storage.bound}, e.range_ok};
}

// The tolerance people read beside the element in a side-by-side table: the strict tier's
// tolerance plus the widest reach of its interval from the value.
template <class Element>
double side_by_side_tolerance(const Element& e, DType dtype) {
  return compare::tolerance({e.strict.low, e.strict.high, e.strict.bound}, dtype) +
         std::max(e.value - e.strict.low, e.strict.high - e.value);
}

std::vector<std::int64_t> pooled_shape(std::size_t rois, const FeatureMap& map, std::int64_t pooled_height,
                                       std::int64_t pooled_width);

}  // namespace detfuzz::fuzz
