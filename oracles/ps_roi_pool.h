// Reference position-sensitive RoIPool (forward), R-FCN's average pooling as torchvision
// defines it: output [K, C / (PH * PW), PH, PW], the element (k, c, ph, pw) the mean of input
// channel (c * PH + ph) * PW + pw over the bin (ph, pw) of RoI k, 0 for an empty bin. The bins
// are torchvision 0.14.1 csrc/ops/cpu/ps_roi_pool_kernel.cpp's (oracles/quantized_bins.h with
// size = max(end - start, 1)), clipped to the map [0, height) x [0, width) as torchvision's
// own reference (test/test_ops.py, TestPSRoIPool.expected_fn, which slices
// x[..., y1 : y2 + 1, x1 : x2 + 1]) and its backward kernel clip them. Its forward kernels (CPU
// and CUDA, 0.14.1 through 0.26.0) clip the bin ends to height - 1 and width - 1 instead: a
// bin reaching the map's last row or column averages without it, a finding.
//
// Precision policy as for RoIAlign: per element and tier an interval of exact values (every
// span the tier's rounding may give the bin) and the rounding bound of the kernel's
// sequential sum and its division by the bin's area.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "model/dtype.h"
#include "model/problems.h"
#include "roi_align.h"

namespace detfuzz::oracles {

struct PsRoiPoolElement {
  double value = 0;            // every decision as fp64 takes it
  RoiAlignTier strict{};       // accumulate-type arithmetic (the interval-and-bound tier of RoIAlign)
  RoiAlignTier storage{};      // storage-dtype arithmetic
  bool range_ok = true;        // the bin's sums within the accumulate type's range
  bool unconstrained = false;  // any output accepted (the input left it undefined)
  std::int64_t channel = 0;    // the input channel the element reads: channel_mapping's value
};

// The input channels a problem must have a multiple of: pooled_height * pooled_width.
std::int64_t ps_channel_group(const RoiPoolProblem& problem);

// Output [K, C / (PH * PW), PH, PW], row-major; empty when C is not a multiple of PH * PW.
std::vector<PsRoiPoolElement> ps_roi_pool(const RoiPoolProblem& problem, DType storage);

// The bin an output element averages as fp64 decides it: what explains a kernel's value.
// nullopt for an element of a RoI the oracle says nothing about.
struct PsRoiPoolBin {
  std::int64_t image, channel;
  std::int64_t row_begin, row_end, column_begin, column_end;  // [begin, end) in map pixels
};
std::optional<PsRoiPoolBin> ps_roi_pool_bin(const RoiPoolProblem& problem, std::size_t element);

}  // namespace detfuzz::oracles
