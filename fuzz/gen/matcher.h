// RapidCheck generator of anchor-matching inputs: quality matrices whose values sit on
// the thresholds (0.7, 0.3 and their fp16/bf16 roundings), a few ulps around them, tie
// within columns and rows, plain dyadic values and zeros.
#pragma once

#include <rapidcheck.h>

#include "fuzz/gen/boxes.h"
#include "model/problems.h"

namespace detfuzz::gen {

rc::Gen<MatcherProblem> matcher_problem(const BoxGenOptions& options);

}  // namespace detfuzz::gen
