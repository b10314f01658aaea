// Reference position-sensitive RoIPool backward: the fp64 adjoint of the forward oracle
// (oracles/ps_roi_pool.h). Gradient value (k, c_out, ph, pw) of [K, C / (PH * PW), PH, PW]
// is divided by its bin's area and added to every pixel of the bin in input channel
// c_in = (c_out * PH + ph) * PW + pw, as torchvision 0.14.1 to 0.26.0
// csrc/ops/cpu/ps_roi_pool_kernel.cpp ps_roi_pool_backward_kernel_impl does:
//   diff_val = is_empty ? 0 : grad_output[index] / bin_area;
//   for h in [hstart, hend), w in [wstart, wend): add(grad_input_offset + h * width + w, diff_val)
// with the bins clipped to [0, height] x [0, width] (the forward kernels clip to height - 1
// and width - 1: the backward is the adjoint of the op the forward oracle defines, not of
// torchvision's forward kernel).
//
// Precision policy: per element and tier an interval of exact sums over every span the tier's
// rounding may give each bin (quantized_bins: a pixel that one resolution includes and another
// does not receives 0 or the share), and the bound of a kernel summing the rounded shares in
// any order, n (u sum |share| + eta) for n shares: a CUDA kernel's atomicAdd fixes no order.
#pragma once

#include <vector>

#include "model/dtype.h"
#include "model/problems.h"
#include "roi_align.h"

namespace detfuzz::oracles {

// Output [N, C, H, W] row-major, in RoIAlign's element type. Every element unconstrained
// when a RoI names an image outside the batch (the kernel writes outside grad_input there);
// the elements of a RoI whose bins the oracle cannot resolve (quantized_bins::Unconstrained)
// unconstrained in its image. Empty when C is not a multiple of PH * PW.
RoiAlignAnswer ps_roi_pool_backward(const PsRoiPoolBackwardProblem& problem, DType storage);

// The shares the kernel adds into input element `element`, in its CPU order (RoI, bin,
// output channel), as fp64 decides each bin: what explains an accumulation's running sums.
std::vector<double> ps_roi_pool_backward_terms(const PsRoiPoolBackwardProblem& problem, std::size_t element);

}  // namespace detfuzz::oracles
