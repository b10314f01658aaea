// What the quantized RoI poolings (RoIPool, PSRoIPool) share: the bins of a RoI as integer
// spans of the map, with every span that rounding may produce. Both kernels compute
//   start/end = round(roi * spatial_scale) (half away from zero);
//   size = max(end - start + size_extra, 1); bin = size / pooled;
//   a bin spans [floor(p * bin), ceil((p + 1) * bin)) offset by the start, clipped to [0, limit]
// (torchvision 0.14.1 csrc/ops/cpu/roi_pool_kernel.cpp: size_extra 1; ps_roi_pool_kernel.cpp:
// size_extra 0). A scaled coordinate within its error bound of a rounding point (x.5), or a
// bin boundary within its bound of an integer, may be resolved either way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "model/problems.h"
#include "running_error.h"

namespace detfuzz::oracles::quantized_bins {

// A RoI whose scaled corners reach 2^30 (the kernels' int conversions overflow) or whose
// decisions leave more than a handful of resolutions open: its outputs accept anything.
struct Unconstrained {};

struct Span {
  std::int64_t begin, end;
  bool operator==(const Span& o) const { return begin == o.begin && end == o.end; }
};

// Per bin, the spans one tier's rounding may give; index 0 of each axis: fp64's decisions
// only (a single span per bin), then the accumulate-type tier, then the storage tier.
struct RoiBins {
  std::vector<std::vector<Span>> rows[3], columns[3];
};

// The bins of `roi` over a map of `height` x `width`; throws Unconstrained.
RoiBins roi_bins(const Roi& roi, double spatial_scale, std::int64_t size_extra, std::int64_t pooled_height,
                 std::int64_t pooled_width, std::int64_t height, std::int64_t width, DType storage);

}  // namespace detfuzz::oracles::quantized_bins
