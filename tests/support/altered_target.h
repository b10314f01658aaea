// A target that runs another and then changes its outputs: the wrong kernel a verdict test
// needs (one element off, an error that does not scale), without writing a kernel.
#pragma once

#include <utility>
#include <vector>

#include "kernels/target.h"

namespace detfuzz::testing {

// `change(problem, outputs)` edits what `base` returned; the target is named "altered".
template <class Problem, class Change>
kernels::Target<Problem> altered(kernels::Target<Problem> base, Change change) {
  kernels::Target<Problem> target = base;
  target.name = "altered";
  target.run = [base = std::move(base), change](const Problem& p, DType dtype, Device device) {
    auto outputs = base.run(p, dtype, device);
    change(p, outputs);
    return outputs;
  };
  return target;
}

}  // namespace detfuzz::testing
