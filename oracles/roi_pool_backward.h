// Reference RoIPool backward, mirroring torchvision csrc/ops/cpu/roi_pool_kernel.cpp
// roi_pool_backward_kernel_impl (0.14.1 to 0.26.0; cuda/ with atomicAdd): for every RoI k,
// channel c and bin, `if (argmax != -1) add(grad_input + (n_k * C + c) * H * W + argmax,
// grad)`. The routing is an input (the forward's argmax), so the gradient of a pixel is the
// sum of the gradient values routed to it: exact terms, rounded only by the additions, in an
// order a CUDA kernel does not fix: the bound is (n - 1) u sum |g| per tier. Where a forward's
// argmax is itself a decision (ties within rounding), it is the forward's verdict that says
// which routings are consistent; the backward is judged on the one it was given.
#pragma once

#include <vector>

#include "model/dtype.h"
#include "model/problems.h"
#include "roi_align.h"

namespace detfuzz::oracles {

// Output [N, C, H, W] row-major, in RoIAlign's element type (a value, two tiers of interval
// and bound, range_ok). Every element unconstrained when a RoI names an image outside the
// batch or an argmax lies outside the plane (the kernel writes outside grad_input there).
RoiAlignAnswer roi_pool_backward(const RoiPoolBackwardProblem& problem, DType storage);

// The gradient values the kernel adds into input element `element`, in its CPU order (RoI,
// channel, bin): what explains an accumulation's running sums.
std::vector<double> roi_pool_backward_terms(const RoiPoolBackwardProblem& problem, std::size_t element);

}  // namespace detfuzz::oracles
