// What comparing one kernel output with its oracle concludes.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "model/finding_kind.h"
#include "model/problems.h"

namespace detfuzz::compare {

struct Verdict {
  Verdict() = default;
  Verdict(FindingKind kind_found, std::string property_checked, std::string headline, nlohmann::json evidence = {})
      : kind(kind_found), property(std::move(property_checked)), message(std::move(headline)),
        details(std::move(evidence)) {}

  FindingKind kind = FindingKind::mismatch;
  // Which check failed: "oracle" (the fp64 reference), "contract" (shape/dtype/device),
  // "scale_invariance", "permutation_invariance", "symmetry", "kernel" (it raised).
  std::string property = "oracle";
  std::string message;      // one line a person reads first
  nlohmann::json details;   // the evidence: elements, oracle vs kernel, tolerances, trace
  // Empty when the input is inside the op's documented contract; else which input breaks it
  // and the documentation that says so (set by the op harness, never by a comparator).
  std::string outside_contract;
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
