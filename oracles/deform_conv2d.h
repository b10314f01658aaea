// Reference deformable convolution (forward) in double, mirroring torchvision's
// csrc/ops/cpu/deform_conv2d_kernel.cpp (0.14.1 and 0.26.0 alike: deformable_im2col_kernel,
// bilinear_interpolate, deform_conv2d_forward_kernel):
//   output (n, o, oy, ox) = bias[o] + sum over the input channels c of o's group and the taps
//   (i, j) of weight[o, c, i, j] * mask * bilinear(input[n, c], y, x), where
//   y = (oy * stride_h - pad_h) + i * dilation_h + offset_y, x likewise, offset_y and offset_x
//   the pair of channels 2 (i KW + j) and 2 (i KW + j) + 1 of c's offset group, mask its channel
//   i KW + j (1 without use_mask); bilinear is 0 at or beyond -1 and the map's size, its corners
//   outside the map read 0.
//
// Precision policy (element type vs compute type): the kernel computes each sample position,
// its bilinear weights and value in the storage dtype (scalar_t), stores the columns and the
// convolution sum before the bias in it, and multiplies by the weights with the library's gemm.
// Each tier bounds a kernel that rounds every one of those steps in that tier's type: the
// strict tier in the accumulate type (fp32 for fp16), the storage tier in the storage dtype.
// A sample position the tier cannot represent moves the sample by the rounding of the position
// times the map's local slope (bilinear interpolation is continuous everywhere, so that bound
// holds across cell edges and the map's border); the gemm's sum is bounded for any order
// (n u sum |terms|).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/dtype.h"
#include "model/problems.h"

namespace detfuzz::oracles {

struct DeformConv2dElement {
  double value = 0;          // bias + sum, fp64
  double sum = 0;            // the convolution sum before the bias (the kernel's out_buf)
  double strict_bound = 0;   // rounding error of accumulate-type arithmetic
  double storage_bound = 0;  // rounding error of storage-dtype arithmetic
  bool range_ok = true;      // every partial sum's reach within the accumulate type's range
};

// Why torchvision's kernel must refuse the problem's shapes (its TORCH_CHECKs, in their order:
// weight, stride, padding, dilation, groups dividing the channels, the offset and mask channel
// counts, the output size), or nullopt for a problem it computes.
std::optional<std::string> deform_conv2d_shape_error(const DeformConv2dProblem& problem);

// Output [N, O, OH, OW], row-major; empty for a problem deform_conv2d_shape_error refuses.
std::vector<DeformConv2dElement> deform_conv2d(const DeformConv2dProblem& problem, DType storage);

// The fp64 bilinear value of input[n, c] at (y, x) by the kernel's rules.
double deform_bilinear(const DeformConv2dProblem& problem, std::int64_t n, std::int64_t c, double y, double x);

// One term of an output element's sum: weight x column, the column being the kernel's im2col
// entry (mask x bilinear sample), `peak` the largest magnitude on the column's path (|mask|
// times the sum of the bilinear products' magnitudes).
struct DeformConv2dTerm {
  double weight = 0, column = 0, peak = 0;
  double value() const { return weight * column; }
};

// The terms one output element sums, in the kernel's column order (the group's channels outer,
// taps inner), without the bias: what explains an overflowing column or sum.
std::vector<DeformConv2dTerm> deform_conv2d_terms(const DeformConv2dProblem& problem, std::size_t element);

}  // namespace detfuzz::oracles
