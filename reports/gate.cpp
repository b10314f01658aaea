#include "reports/gate.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <fmt/ostream.h>

#include <map>
#include <ostream>
#include <set>

#include "model/error.h"

namespace detfuzz::reports {
namespace {

// What makes two campaigns comparable: their configs without how they ran and without
// their targets (compared after renaming).
nlohmann::json comparable_config(nlohmann::json config) {
  for (const char* key : {"jobs", "corpus", "targets", "minimize_budget_s"}) config.erase(key);
  if (config.contains("shard") && config["shard"].is_object()) config["shard"].erase("merged");
  return config;
}

std::string format_error(double e) { return e < 0 ? "-" : fmt::format("{:.3g}", e); }

}  // namespace

GatePolicy read_gate_policy(const std::string& path) {
  const nlohmann::json json = read_json_file(path, "gate policy", "see `detfuzz gate --help` for its keys");
  if (!json.is_object()) throw Error(ErrorKind::input, "gate policy " + path + " must be a JSON object");
  GatePolicy policy;
  const std::map<std::string, double*> numbers{{"max_error_growth", &policy.max_error_growth},
                                               {"error_floor", &policy.error_floor}};
  const std::map<std::string, bool*> flags{{"fail_on_new_findings", &policy.fail_on_new_findings},
                                           {"fail_on_unsupported", &policy.fail_on_unsupported},
                                           {"fail_on_error_growth", &policy.fail_on_error_growth},
                                           {"fail_on_findings_in_new_cells", &policy.fail_on_findings_in_new_cells}};
  for (const auto& [key, value] : json.items()) {
    if (auto n = numbers.find(key); n != numbers.end() && value.is_number() && value.get<double>() >= 0) {
      *n->second = value.get<double>();
    } else if (auto f = flags.find(key); f != flags.end() && value.is_boolean()) {
      *f->second = value.get<bool>();
    } else {
      throw Error(ErrorKind::input,
                  fmt::format("gate policy {}: '{}' is not a known key with a valid value; known: max_error_growth "
                              "(number >= 0), error_floor (number >= 0), fail_on_new_findings, fail_on_unsupported, "
                              "fail_on_error_growth, fail_on_findings_in_new_cells (true/false)",
                              path, key));
    }
  }
  return policy;
}

GateResult gate(const Report& baseline, const Report& candidate, const GateOptions& options) {
  auto renamed = [&](const std::string& target) {
    auto it = options.rename_target.find(target);
    return it == options.rename_target.end() ? target : it->second;
  };
  if (!options.allow_config_mismatch) {
    const auto differ = config_differences(comparable_config(baseline.config), comparable_config(candidate.config));
    if (!differ.empty())
      throw Error(ErrorKind::input,
                  fmt::format("the baseline and the candidate ran different campaigns, so comparing them means "
                              "little: {}; run both with the same settings, or pass --allow-config-mismatch",
                              fmt::join(differ, "; ")));
  }
  const GatePolicy& policy = options.policy;
  GateResult result;
  auto add = [&](GateChange change) {
    result.pass = result.pass && !change.fails;
    result.changes.push_back(std::move(change));
  };

  // Cells, matched by (op, target, dtype, device) with the baseline's targets renamed.
  auto key = [](const std::string& op, const std::string& target, const std::string& dtype, const std::string& device) {
    return op + "/" + target + "/" + dtype + "/" + device;
  };
  std::map<std::string, const CellSummary*> before;
  for (const auto& c : baseline.cells) {
    CellSummary as_candidate = c;
    as_candidate.target = renamed(c.target);
    before[cell_id(as_candidate)] = &c;
  }
  // Campaign cells only: a replay report's cell is one corpus case, and its findings do not
  // name the case, so a newly supported case must not excuse its neighbours' findings.
  std::set<std::string> seen, newly_supported;
  for (const auto& c : candidate.cells) {
    const std::string id = cell_id(c);
    seen.insert(id);
    auto it = before.find(id);
    if (it == before.end()) {
      if (c.case_name.empty()) newly_supported.insert(id);
      add({id, "new cell", "-", to_string(c.status), false, false, false});
      continue;
    }
    const CellSummary& b = *it->second;
    const bool was_supported = b.status != CellStatus::unsupported, is_supported = c.status != CellStatus::unsupported;
    if (was_supported && !is_supported) {
      add({id, "unsupported", "supported", "unsupported: " + c.reason, true, policy.fail_on_unsupported, false});
      continue;
    }
    if (!was_supported && is_supported) {
      if (c.case_name.empty()) newly_supported.insert(id);
      add({id, "now supported", "unsupported", "supported", false, false, true});
    }
    const double e0 = b.max_normalized_error, e1 = c.max_normalized_error;
    if (e0 >= 0 && e1 >= 0 && e0 != e1) {
      const bool crossed = e0 <= 1 && e1 > 1;
      const bool grew = e1 > policy.max_error_growth * std::max(e0, policy.error_floor);
      const bool shrank = e0 > policy.max_error_growth * std::max(e1, policy.error_floor) || (e0 > 1 && e1 <= 1);
      if (crossed || grew)
        add({id, crossed ? "max error crossed 1" : "max error grew", format_error(e0), format_error(e1), true,
             policy.fail_on_error_growth, false});
      else if (shrank)
        add({id, "max error shrank", format_error(e0), format_error(e1), false, false, true});
    }
  }
  for (const auto& [id, cell] : before)
    if (!seen.count(id)) add({id, "cell missing", to_string(cell->status), "-", true, policy.fail_on_unsupported, false});

  // Findings, matched by signature with the baseline's targets renamed.
  auto signature = [&](const FindingRecord& f, const std::string& target) {
    return key(f.op, target, f.dtype, f.device) + " " + f.kind + "/" + f.property;
  };
  std::map<std::string, const FindingRecord*> old_findings, new_findings;
  for (const auto& f : baseline.findings) old_findings[signature(f, renamed(f.target))] = &f;
  for (const auto& f : candidate.findings) new_findings[signature(f, f.target)] = &f;
  for (const auto& [sig, f] : new_findings) {
    if (old_findings.count(sig)) continue;
    const bool in_new_cell = newly_supported.count(key(f->op, f->target, f->dtype, f->device)) > 0;
    const char* what = in_new_cell ? (f->fails ? "failing finding, new cell" : "finding, new cell (not failing)")
                                   : (f->fails ? "new failing finding" : "new finding (not failing)");
    add({sig, what, "-", f->message, true,
         f->fails && policy.fail_on_new_findings && (!in_new_cell || policy.fail_on_findings_in_new_cells), false});
  }
  for (const auto& [sig, f] : old_findings)
    if (!new_findings.count(sig)) add({sig, "finding gone", f->message, "-", false, false, true});
  return result;
}

void print_gate(const GateResult& result, std::ostream& out) {
  if (result.changes.empty()) fmt::print(out, "no change between baseline and candidate\n");
  for (const auto& c : result.changes) {
    const char* verdict = c.fails ? "FAIL" : c.worse ? "worse" : c.better ? "better" : "note";
    std::string candidate = c.candidate.size() > 100 ? c.candidate.substr(0, 97) + "..." : c.candidate;
    std::string baseline = c.baseline.size() > 60 ? c.baseline.substr(0, 57) + "..." : c.baseline;
    fmt::print(out, "{:<6} {:<26} {}\n         baseline: {}\n         candidate: {}\n", verdict, c.what, c.cell, baseline,
               candidate);
  }
  std::size_t failing = 0;
  for (const auto& c : result.changes) failing += c.fails;
  fmt::print(out, "gate: {}{}\n", result.pass ? "PASS" : "FAIL",
             result.pass ? "" : fmt::format(" ({} change(s) beyond the policy)", failing));
}

}  // namespace detfuzz::reports
