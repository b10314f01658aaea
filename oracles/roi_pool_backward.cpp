#include "roi_pool_backward.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace detfuzz::oracles {
namespace {

// Where gradient value i (of [K, C, PH, PW]) lands in grad_input ([N, C, H, W]), or -1 when
// its bin is empty; throws when the problem's sizes disagree.
struct Routing {
  std::int64_t bins, plane, image;
  bool valid = true;  // every RoI's image and every argmax inside the tensors

  std::int64_t target(const RoiPoolBackwardProblem& p, std::size_t i) const {
    const std::int64_t argmax = p.argmax[i];
    if (argmax < 0) return -1;
    const auto k = static_cast<std::size_t>(static_cast<std::int64_t>(i) / (bins * p.forward.input.channels));
    const std::int64_t c = static_cast<std::int64_t>(i) / bins % p.forward.input.channels;
    return static_cast<std::int64_t>(p.forward.rois[k].batch_index) * image + c * plane + argmax;
  }
};

Routing routing(const RoiPoolBackwardProblem& p) {
  const FeatureMap& map = p.forward.input;
  Routing r{p.forward.pooled_height * p.forward.pooled_width, map.height * map.width, map.channels * map.height * map.width};
  const std::size_t expected = p.forward.rois.size() * static_cast<std::size_t>(map.channels * r.bins);
  if (p.grad.size() != expected || p.argmax.size() != expected)
    throw std::invalid_argument("roi_pool_backward: grad holds " + std::to_string(p.grad.size()) + " values and argmax " +
                                std::to_string(p.argmax.size()) + ", the RoIs and pooled shape need " +
                                std::to_string(expected) + " of each");
  for (const Roi& roi : p.forward.rois)
    r.valid = r.valid && roi.batch_index >= 0 && roi.batch_index < static_cast<double>(map.batch) &&
              roi.batch_index == std::floor(roi.batch_index);
  for (std::int64_t a : p.argmax) r.valid = r.valid && a >= -1 && a < r.plane;
  return r;
}

}  // namespace

RoiAlignAnswer roi_pool_backward(const RoiPoolBackwardProblem& problem, DType storage) {
  const FeatureMap& map = problem.forward.input;
  const Routing r = routing(problem);
  const auto size = static_cast<std::size_t>(map.batch) * static_cast<std::size_t>(r.image);
  std::vector<double> value(size, 0.0), magnitude(size, 0.0), terms(size, 0.0);
  if (r.valid)
    for (std::size_t i = 0; i < problem.grad.size(); ++i) {
      const std::int64_t at = r.target(problem, i);
      if (at < 0) continue;
      const auto e = static_cast<std::size_t>(at);
      value[e] += problem.grad[i];
      magnitude[e] += std::fabs(problem.grad[i]);
      terms[e] += 1;
    }
  const FloatFormat& strict = float_format(accumulate_type(storage));
  const double formats[2] = {strict.unit_roundoff, float_format(storage).unit_roundoff};
  const double fp64 = float_format(DType::fp64).unit_roundoff;
  RoiAlignAnswer out(size);
  for (std::size_t e = 0; e < size; ++e) {
    RoiAlignElement& element = out[e];
    element.value = value[e];
    // n terms, n - 1 additions after the first lands on the zero grad_input starts as (the
    // first addition, 0 + g, is exact); in fp64 the oracle's own sum errs the same way.
    const double additions = std::max(terms[e] - 1, 0.0);
    for (int tier = 0; tier < 2; ++tier) {
      RoiAlignTier& into = tier == 0 ? element.strict : element.storage;
      into.low = into.high = value[e];
      into.bound = additions * (formats[tier] + fp64) * magnitude[e];
    }
    element.range_ok = (magnitude[e] + std::fabs(value[e])) / 2 <= strict.max_finite;
    element.unconstrained = !r.valid;
  }
  return out;
}

std::vector<double> roi_pool_backward_terms(const RoiPoolBackwardProblem& problem, std::size_t element) {
  const Routing r = routing(problem);
  std::vector<double> terms;
  if (!r.valid) return terms;
  for (std::size_t i = 0; i < problem.grad.size(); ++i)
    if (r.target(problem, i) == static_cast<std::int64_t>(element)) terms.push_back(problem.grad[i]);
  return terms;
}

}  // namespace detfuzz::oracles
