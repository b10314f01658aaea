// Reference anchor matching with torchvision 0.14.1's Matcher semantics
// (models/detection/_utils.py). The quality values are the kernel's inputs, so max and
// argmax are exact; what arithmetic can change is the thresholds: a kernel comparing a
// low-precision tensor with a Python float rounds the threshold to the tensor's dtype.
// Each prediction gets the set of answers that are right for a given threshold rounding.
#pragma once

#include <cstdint>
#include <vector>

#include "model/dtype.h"
#include "model/problems.h"

namespace detfuzz::oracles {

// Per prediction, the acceptable match values (ground-truth indices, -1, -2), with the
// thresholds rounded to `threshold_dtype` (fp64: exact).
std::vector<std::vector<std::int64_t>> matcher(const MatcherProblem& problem, DType threshold_dtype);

inline constexpr std::int64_t kBelowLowThreshold = -1;
inline constexpr std::int64_t kBetweenThresholds = -2;

}  // namespace detfuzz::oracles
