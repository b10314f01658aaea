// Discrete comparison of RoIPool: no arithmetic rounds a max, so each element's (value,
// argmax) must be exactly one of the oracle's options: those of the accumulate-type tier
// (ok) or, failing that, of the storage tier (precision); anything else is a mismatch.
#pragma once

#include <vector>

#include "fuzz/compare/verdict.h"
#include "model/dtype.h"
#include "model/problems.h"
#include "oracles/roi_pool.h"

namespace detfuzz::compare {

Judgement compare_roi_pool(const HostTensor& values, const HostTensor& argmax,
                           const std::vector<oracles::RoiPoolElement>& expected,
                           const std::vector<std::int64_t>& shape, DType dtype, Device device);

}  // namespace detfuzz::compare
