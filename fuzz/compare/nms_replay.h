// Discrete comparison of NMS by ambiguity-aware replay of the oracle's decisions.
//
// A decision "IoU(k, j) > threshold" is ambiguous when the fp64 IoU lies within its
// tolerance of the threshold (or the IoU is 0/0); scores equal in the dtype may be visited
// in any order. The kernel's keep list is consistent iff some resolution of the ambiguous
// decisions produces it exactly. Because each (kept, later) pair is decided once and
// independently, that existential reduces to three local conditions, checked in
// O(|keep|^2 + n |keep|):
//   1. keep lists valid, distinct indices in non-increasing score order;
//   2. no kept box is surely suppressed by a box kept before it;
//   3. every box left out may be suppressed by some kept box of higher or equal score.
// A list that only fails condition 1's order is an `order` finding.
#pragma once

#include <cstdint>
#include <vector>

#include "fuzz/compare/contract.h"
#include "fuzz/compare/verdict.h"
#include "model/dtype.h"
#include "model/problems.h"

namespace detfuzz::compare {

enum class Decision { suppress, keep, either };

struct DecisionPolicy {
  DType compute = DType::fp32;  // the arithmetic whose error bound makes decisions ambiguous
  bool lenient_out_of_range = false;  // range hazards may go either way
  BoxConvention convention = BoxConvention::continuous;
  // Decide pairs far from the threshold from a plain double IoU (see decide()); off only in
  // the test that proves the shortcut never changes a decision.
  bool shortcut = true;
  // Class-aware NMS: boxes whose classes differ never suppress each other.
  const std::vector<std::int64_t>* classes = nullptr;
  // Boxes that may be absent without a suppressor (a max_num cut removed them).
  const std::vector<bool>* may_be_missing = nullptr;
};

// What "IoU(kept, candidate) > threshold" must be under `policy`. For the canonical order
// the running error bound of an IoU is at most 16 u IoU to first order (widths u, areas
// 3u, sum 4u, union <= 8u + 3u + u relative to the union, quotient u), so the tolerance
// 2 (bound(compute) + bound(fp64)) + threshold rounding stays below 64 u + half an ulp of
// the threshold: a pair farther than that from the threshold is decided by its double IoU
// without tracking errors, which is most pairs and most of the oracle's time.
Decision decide(const Box& kept, const Box& candidate, double threshold, const DecisionPolicy& policy);

struct ReplayResult {
  bool consistent = false;
  bool order_only = false;  // the set is consistent, its order is not
  std::string explanation;  // why not, naming boxes, IoU, threshold and tolerance
  nlohmann::json trace;     // the deciding comparison(s)
};

ReplayResult replay_nms(const NmsProblem& problem, const std::vector<std::int64_t>& keep,
                        const DecisionPolicy& policy);

// What any keep list owes, even on hostile input where no kept set is wrong: a 1-D int64
// tensor on `device` of indices into `boxes`, each at most once.
std::optional<Verdict> check_keep_indices(const HostTensor& keep, std::size_t boxes, Device device);

// Contract (1-D int64 on the inputs' device), then replay in tiers: accumulate type (ok),
// storage dtype (precision), range hazards lenient (overflow), else mismatch/order.
Judgement judge_nms_output(const NmsProblem& problem, const HostTensor& output, DType dtype,
                           Device device, BoxConvention convention = BoxConvention::continuous);

// The first `count` entries of a list of box indices (a keep list, a visiting order): what
// a finding's details show of it.
std::vector<std::int64_t> first_indices(const std::vector<std::int64_t>& indices, std::size_t count = 64);

}  // namespace detfuzz::compare
