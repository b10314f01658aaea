// What comparing one kernel output with its oracle concludes.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "model/finding_kind.h"
#include "model/problems.h"

namespace detfuzz::compare {

struct Verdict {
  FindingKind kind = FindingKind::mismatch;
  // Which check failed: "oracle" (the fp64 reference), "contract" (shape/dtype/device),
  // "scale_invariance", "permutation_invariance", "symmetry", "kernel" (it raised).
  std::string property = "oracle";
  std::string message;      // one line a person reads first
  nlohmann::json details;   // the evidence: elements, oracle vs kernel, tolerances, trace
};

struct Judgement {
  std::vector<Verdict> verdicts;  // empty: the output is consistent with the oracle
  // Largest |kernel - oracle| / tolerance(fp32-arithmetic tier) over compared elements;
  // negative when the op has no continuous output (NMS).
  double max_normalized_error = -1;
  // The kernel's outputs on the case itself (not the property re-runs), when it produced them.
  std::vector<HostTensor> outputs;

  bool consistent() const { return verdicts.empty(); }
};

}  // namespace detfuzz::compare
