// Running a kernel that is known to write outside its tensors (a RoI naming an image the batch
// lacks, which torchvision's backward kernels scatter into without a check) in a forked child,
// so that the heap it corrupts is the child's: the worker goes on judging later cases with
// intact memory, and those cases' findings stay theirs.
#pragma once

#include <functional>
#include <string>
#include <variant>
#include <vector>

#include "fuzz/compare/verdict.h"
#include "model/problems.h"

namespace detfuzz::fuzz {

// `run`'s outputs as the child computed them, or the verdict when it raised (`exception`,
// its first line) or died (`crash`, with the signal). CPU kernels only: a forked child of a
// process that holds a CUDA context cannot use it.
std::variant<std::vector<HostTensor>, compare::Verdict> run_contained(const std::function<std::vector<HostTensor>()>& run,
                                                                      const std::string& property);

}  // namespace detfuzz::fuzz
