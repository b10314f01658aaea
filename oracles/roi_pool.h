// Reference RoIPool (forward) mirroring torchvision 0.14.1
// torchvision/csrc/ops/cpu/roi_pool_kernel.cpp (roi_pool_forward_kernel_impl):
//   start/end = round(roi * spatial_scale) (half away from zero); size = max(end - start + 1, 1);
//   bin = size / pooled; a bin spans [floor(p * bin), ceil((p + 1) * bin)) offset by the
//   start and clipped to the map; its output is the max over it and the row-major index of
//   the first maximum (argmax), or 0 and -1 when it is empty.
//
// The oracle takes the max of the values (torchvision starts from -FLT_MAX, so a double
// bin whose values all lie below -3.4e38 comes back as -3.4e38 with argmax -1: the oracle
// says what max pooling means, and that difference is a finding).
//
// A RoI whose scaled corners reach 2^30 (where torchvision's int conversions overflow) or
// whose decisions leave more than a handful of resolutions open gets unconstrained elements.
//
// No arithmetic rounds the output; the rounding is in the decisions. A scaled coordinate
// within its error bound of a rounding point (x.5), or a bin boundary within its bound of
// an integer, may be resolved either way; each element lists every (value, argmax) some
// resolution gives. Decisions shared by the bins of one RoI are resolved per element here,
// a relaxation that accepts a kernel mixing resolutions across bins.
#pragma once

#include <cstdint>
#include <vector>

#include "model/dtype.h"
#include "model/problems.h"

namespace detfuzz::oracles {

struct RoiPoolOption {
  double value = 0;
  std::int64_t argmax = -1;
  bool operator==(const RoiPoolOption& o) const { return value == o.value && argmax == o.argmax; }
};

struct RoiPoolElement {
  RoiPoolOption nominal;                 // every decision as fp64 takes it
  std::vector<RoiPoolOption> strict;     // accepted with accumulate-type arithmetic
  std::vector<RoiPoolOption> storage;    // accepted with storage-dtype arithmetic
  bool unconstrained = false;            // any output accepted (the input left it undefined)
};

// Output [K, C, pooled_height, pooled_width], row-major.
std::vector<RoiPoolElement> roi_pool(const RoiPoolProblem& problem, DType storage);

}  // namespace detfuzz::oracles
