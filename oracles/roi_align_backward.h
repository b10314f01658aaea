// Reference RoIAlign backward in double: the adjoint of the forward oracle (roi_align.h),
// mirroring torchvision csrc/ops/cpu/roi_align_kernel.cpp roi_align_backward_kernel_impl and
// bilinear_interpolate_gradient (0.14.1 to 0.26.0, the same arithmetic; cuda/ likewise, with
// atomicAdd): the same RoI geometry, grid and sample positions as the forward, and each
// sample adds grad * w_i / count to the four pixels it interpolates (count = grid_h * grid_w,
// no max(count, 1): a bin with no samples adds nothing). PSRoIAlign's backward
// (cpu/ps_roi_align_kernel.cpp) scatters output channel c of bin b into input channel
// c * bins + b, with aligned geometry.
//
// The verdict's numerics, per input element and tier (the accumulate type, the storage
// dtype), as the forward's: an interval of exact values over the decisions the tier's rounding
// leaves open (a sample on either side of -1 or of the map's edge; a grid count rounding can
// move), and a bound. torchvision accumulates into grad_input in T, in an order a CUDA kernel
// does not fix (atomicAdd), so the bound holds for every order: (n + 1) u sum |term| for n
// additions and the two roundings of each term (grad * w, then / count), plus each weight's
// rounding and the position error times the weight's slope (the bilinear hat is 1-Lipschitz
// per axis, so a position off by e moves any pixel's weight by at most e_y + e_x, also onto
// the neighbours a shifted sample reaches), plus the absolute error of underflow.
#pragma once

#include <vector>

#include "model/dtype.h"
#include "model/problems.h"
#include "roi_align.h"

namespace detfuzz::oracles {

// Output [N, C, H, W] row-major (forward.input's shape), in the forward's element type.
// Every element unconstrained when a RoI names an image outside the batch (the kernel writes
// outside grad_input there); an image's elements when one of its RoIs is too large to
// sample (as the forward's kMaxRoiAlignSamples).
RoiAlignAnswer roi_align_backward(const RoiAlignBackwardProblem& problem, DType storage);

// PSRoIAlign's backward: grad is [K, C / (PH * PW), PH, PW]. Empty when C is not a multiple
// of PH * PW.
RoiAlignAnswer ps_roi_align_backward(const RoiAlignBackwardProblem& problem, DType storage);

// The terms the kernel adds into input element `element` ([n, c, y, x] row-major), in
// torchvision's CPU order (RoI, output channel, bin, sample row, sample column, corner), each
// grad * w / count in fp64 at the fp64 sample position with the kernel's rules. Naive on
// purpose: what explains an accumulation (its running sums), not a bound. Empty for an
// element no sample reaches.
std::vector<double> roi_align_backward_terms(const RoiAlignBackwardProblem& problem, bool position_sensitive,
                                             std::size_t element);

}  // namespace detfuzz::oracles
