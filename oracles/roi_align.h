// Reference RoIAlign (forward) in double, mirroring torchvision 0.14.1
// torchvision/csrc/ops/cpu/roi_align_kernel.cpp (roi_align_forward_kernel_impl and
// pre_calc_for_bilinear_interpolate):
//   start = roi * spatial_scale - (aligned ? 0.5 : 0); size = end - start, at least 1 when
//   not aligned; bin = size / pooled; grid = sampling_ratio > 0 ? sampling_ratio
//   : ceil(size / pooled); sample (iy + .5) * bin / grid into the bin; a sample with
//   y < -1 or y > height (x likewise) contributes 0; y <= 0 clamps to 0; a low index at or
//   past height - 1 clamps to the last row; bilinear weights; sum / max(grid_h * grid_w, 1).
//
// Precision policy (element type vs compute type, as in CUTLASS's host references): the
// oracle is evaluated for a storage dtype and judges two tiers, the accumulate type
// (fp32 for fp16/bf16) and the storage dtype. Per element and tier it gives an interval of
// exact values, not a point: a sample whose computed position may fall on either side of
// -1 or of the map's edge, or a grid count that rounding can move, is a decision the
// kernel may take either way (design.md, Numerics 3). On top of the interval, the bound of
// the kernel's rounding error: the running error of the interpolation arithmetic plus the
// error of every sample position times the local slope of the map around it.
#pragma once

#include <vector>

#include "answer_memory.h"
#include "model/dtype.h"
#include "model/problems.h"

namespace detfuzz::oracles {

// Trivial (no member initializers), so that an answer is allocated without a pass that
// writes it: the oracle writes every field of every element.
struct RoiAlignTier {
  double low, high;  // exact values over the decisions this tier leaves open
  double bound;      // rounding error a kernel in this tier's arithmetic may add
};

// The flags sit together at the end: 64 bytes, not 72 (a 10-RoI, 256-channel answer is
// megabytes, and writing it is a tenth of the oracle's time).
struct RoiAlignElement {
  double value;           // every decision as fp64 takes it
  RoiAlignTier strict;    // accumulate-type arithmetic
  RoiAlignTier storage;   // storage-dtype arithmetic
  bool range_ok;          // intermediates within the accumulate type's range
  // The oracle says nothing: scaled corners at 2^30 or beyond, or more samples per RoI than
  // kMaxRoiAlignSamples (kernels overflow their int grid there or take minutes).
  bool unconstrained;
};

using RoiAlignAnswer = std::vector<RoiAlignElement, AnswerAllocator<RoiAlignElement>>;

inline constexpr double kMaxRoiAlignSamples = 1 << 24;

// Output [K, C, pooled_height, pooled_width], row-major.
RoiAlignAnswer roi_align(const RoiAlignProblem& problem, DType storage);

// The same with every per-channel step run through the general ErrorTracker: the naive
// version roi_align is tested against (same values and decisions bit for bit; roi_align's
// closed-form bound is never below this one and equals it where no step is exact).
RoiAlignAnswer roi_align_reference(const RoiAlignProblem& problem, DType storage);

// Position-sensitive RoIAlign (torchvision csrc/ops/cpu/ps_roi_align_kernel.cpp, 0.14.1 to
// 0.26.0): output [K, C / (PH * PW), PH, PW], the element (k, c, ph, pw) RoIAlign's value of
// input channel (c * PH + ph) * PW + pw at bin (ph, pw), with aligned RoIAlign's geometry
// (start = roi * spatial_scale - 0.5, no size clamp) whatever problem.aligned says. Empty when
// C is not a multiple of PH * PW. The closed form and the reference, as for roi_align.
RoiAlignAnswer ps_roi_align(const RoiAlignProblem& problem, DType storage);
RoiAlignAnswer ps_roi_align_reference(const RoiAlignProblem& problem, DType storage);

// The values one output element averages, in torchvision's summation order (grid rows outer,
// columns inner), each the fp64 bilinear value at its fp64 sample position, with the kernel's
// rules (outside [-1, size] it is 0, at or below 0 it clamps, past the last row or column it
// stays there). Naive on purpose: what explains an accumulation (the running sums a kernel
// forms), not a bound. Empty for an element with no samples or an unknown image.
std::vector<double> roi_align_bin_samples(const RoiAlignProblem& problem, std::size_t element);

}  // namespace detfuzz::oracles
