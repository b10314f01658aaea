// The upgrade gate: the same campaign run against the old library (baseline) and the new
// one (candidate); a yes or no with the reasons.
//
// The candidate is worse, and the gate fails, when it has a failing finding signature (op,
// target, dtype, device, kind, property) the baseline lacks, when a cell became unsupported
// or went missing, or when a cell's max normalized error grew past the policy (crossed 1,
// or grew more than `max_error_growth` times above `error_floor`). A finding in a cell the
// baseline could not run (a new cell, or one now supported) is no regression: the old library
// was never tested there, so it is printed, worse, and fails only under
// `fail_on_findings_in_new_cells`. Everything else that changed is listed too, better or worse.
#pragma once

#include <iosfwd>
#include <map>
#include <string>
#include <vector>

#include "reports/report.h"

namespace detfuzz::reports {

struct GatePolicy {
  double max_error_growth = 2.0;
  double error_floor = 0.01;  // errors below this are noise: 0.001 -> 0.004 is no regression
  bool fail_on_new_findings = true;
  bool fail_on_unsupported = true;
  bool fail_on_error_growth = true;
  bool fail_on_findings_in_new_cells = false;
};

// A policy file: a JSON object with any of GatePolicy's fields; anything else is
// Error{input} naming the key.
GatePolicy read_gate_policy(const std::string& path);

struct GateOptions {
  GatePolicy policy;
  std::map<std::string, std::string> rename_target;  // baseline target -> candidate target
  bool allow_config_mismatch = false;
};

struct GateChange {
  std::string cell;     // op/target/dtype/device (the candidate's target)
  std::string what;     // "new finding", "finding gone", "max error", "unsupported", ...
  std::string baseline, candidate;
  bool worse = false;   // counts against the candidate
  bool fails = false;   // worse beyond the policy: the gate fails
  bool better = false;  // counts for it (neither: a plain note, such as a new cell)
};

struct GateResult {
  bool pass = true;
  std::vector<GateChange> changes;
};

// Error{input} when the two campaigns are not comparable (seed, matrix, cases, budget,
// max boxes... differ) unless options.allow_config_mismatch.
GateResult gate(const Report& baseline, const Report& candidate, const GateOptions& options);

void print_gate(const GateResult& result, std::ostream& out);

}  // namespace detfuzz::reports
