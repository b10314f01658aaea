// RapidCheck generator of deform_conv2d problems: small maps and kernels across stride,
// padding, dilation, groups and offset_groups, with and without a mask; batch sizes around
// torchvision's image chunks (kMaxParallelImgs = 32: the kernel works in blocks of the largest
// divisor of the batch up to 32, so 31, 32, 33, 64 and 65 images take different paths) and an
// empty batch; offsets zero, integral, dyadic, fine and far outside the map; now and then
// output channels that groups do not divide, which the kernel must refuse. Shrinks toward
// one image, a 1 x 1 kernel and zero offsets.
#pragma once

#include <rapidcheck.h>

#include "fuzz/gen/boxes.h"
#include "model/problems.h"

namespace detfuzz::gen {

rc::Gen<DeformConv2dProblem> deform_conv2d_problem(const BoxGenOptions& options);

}  // namespace detfuzz::gen
