// The mutant catalog: each mutant is a correct target (its twin) with ONE deviation that
// mirrors a real detection-numerics bug. `detfuzz selftest` measures the fuzzer against it
// (caught or not, how fast, how small) and counts the twins' findings as false alarms.
// Torch-free: the CLI and the tests read it without LibTorch's headers.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "model/dtype.h"

namespace detfuzz::kernels {

struct MutantSpec {
  std::string target;   // "mutant:<name>", a target of `op`
  std::string op;
  std::string twin;     // the correct target of `op` it deviates from
  std::vector<DType> dtypes;  // the cells it touches (where its twin is correct)
  std::string mirrors;  // the real bug, in a line
  // Count-dependent mutants show only from this many boxes on (0: any count): their
  // minimized case cannot be smaller.
  std::size_t count_threshold = 0;
};

const std::vector<MutantSpec>& mutant_catalog();

}  // namespace detfuzz::kernels
