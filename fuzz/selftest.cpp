#include "fuzz/selftest.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <ostream>

#include "fuzz/campaign.h"
#include "model/error.h"

namespace detfuzz::fuzz {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

CampaignOptions campaign_for(const SelftestOptions& options, const std::string& op, const std::string& target,
                             const std::vector<DType>& dtypes) {
  CampaignOptions campaign;
  campaign.ops = {op};
  campaign.targets = {target};
  campaign.dtypes = dtypes;
  campaign.budget_s = options.budget_per_mutant_s;
  campaign.seed = options.seed;
  campaign.max_boxes = options.max_boxes;
  campaign.minimize_budget_s = options.minimize_budget_s;
  // A hang costs a case timeout per shrink candidate: bounded, not unbounded.
  campaign.slow_minimize_budget_s = 3 * options.minimize_budget_s;
  campaign.corpus_dir = options.corpus_dir;
  return campaign;
}

std::vector<std::string> unsupported_cells(const reports::Report& report) {
  std::vector<std::string> cells;
  for (const auto& cell : report.cells)
    if (cell.status == reports::CellStatus::unsupported) cells.push_back(fmt::format("{}: {}", cell.dtype, cell.reason));
  return cells;
}

std::vector<std::string> dtype_names(const std::vector<DType>& dtypes) {
  std::vector<std::string> names;
  for (DType d : dtypes) names.emplace_back(dtype_name(d));
  return names;
}

nlohmann::json finding_json(const reports::FindingRecord& f) {
  return {{"signature", f.signature}, {"kind", f.kind},       {"property", f.property},
          {"message", f.message},     {"size", f.size},       {"replay", f.replay},
          {"case_file", f.case_file}, {"fails", f.fails}};
}

}  // namespace

bool SelftestResult::passed() const {
  return false_alarms.empty() &&
         std::all_of(mutants.begin(), mutants.end(), [](const MutantScore& m) { return m.caught; });
}

std::vector<kernels::MutantSpec> select_mutants(const std::vector<std::string>& names) {
  const auto& catalog = kernels::mutant_catalog();
  if (names.empty()) return catalog;
  std::vector<kernels::MutantSpec> selected;
  for (const std::string& name : names) {
    const std::string target = name.rfind("mutant:", 0) == 0 ? name : "mutant:" + name;
    auto spec = std::find_if(catalog.begin(), catalog.end(), [&](const auto& s) { return s.target == target; });
    if (spec == catalog.end()) {
      std::vector<std::string> known;
      for (const auto& s : catalog) known.push_back(s.target.substr(7));
      throw Error(ErrorKind::usage, fmt::format("unknown mutant '{}' in --mutants; the catalog has: {}", name,
                                                fmt::join(known, ", ")));
    }
    selected.push_back(*spec);
  }
  return selected;
}

SelftestResult run_selftest(const Registry& registry, const SelftestOptions& options, CaseRunner& runner,
                            std::ostream& log) {
  const auto start = std::chrono::steady_clock::now();
  const std::vector<kernels::MutantSpec> specs = select_mutants(options.mutants);
  auto quiet = make_progress(ProgressMode::none);
  SelftestResult result;
  result.seed = options.seed;
  result.budget_per_mutant_s = options.budget_per_mutant_s;

  for (const kernels::MutantSpec& spec : specs) {
    if (stop_requested() || options.skip_mutants) break;
    CampaignOptions campaign = campaign_for(options, spec.op, spec.target, spec.dtypes);
    campaign.stop_at_first_failure = true;
    reports::Report report = run_campaign(registry, campaign, *quiet, runner);
    MutantScore score;
    score.spec = spec;
    score.size_target = spec.count_threshold ? spec.count_threshold + 1 : 3;
    score.cases = report.total_cases();
    score.unsupported = unsupported_cells(report);
    auto failing = std::find_if(report.findings.begin(), report.findings.end(),
                                [](const reports::FindingRecord& f) { return f.fails; });
    if (failing != report.findings.end()) {
      score.caught = true;
      score.finding = *failing;
      // The campaign stopped right after this finding's minimization.
      score.found_after_s = std::max(0.0, report.elapsed_s - failing->minimize_s);
      score.found_after_cases = report.total_cases();
      score.minimized_size = failing->size;
    }
    log << fmt::format("selftest: {:<44} {}\n", spec.target,
                       score.caught ? fmt::format("caught after {:.2f} s, {} cases: {} (minimized to {} {})",
                                                  score.found_after_s, score.found_after_cases,
                                                  score.finding.signature, score.minimized_size,
                                                  op_size_unit(spec.op))
                                    : fmt::format("NOT caught in {} cases ({:.0f} s)", score.cases, report.elapsed_s));
    log.flush();
    result.mutants.push_back(std::move(score));
  }

  // Each twin over the union of its mutants' dtypes, as long as one mutant's budget.
  std::vector<TwinRun> twins;
  for (const kernels::MutantSpec& spec : specs) {
    auto twin = std::find_if(twins.begin(), twins.end(),
                             [&](const TwinRun& t) { return t.op == spec.op && t.target == spec.twin; });
    if (twin == twins.end()) twin = twins.insert(twins.end(), TwinRun{spec.op, spec.twin, {}, 0});
    for (DType d : spec.dtypes)
      if (std::find(twin->dtypes.begin(), twin->dtypes.end(), d) == twin->dtypes.end()) twin->dtypes.push_back(d);
  }
  for (TwinRun& twin : twins) {
    if (stop_requested()) break;
    CampaignOptions campaign = campaign_for(options, twin.op, twin.target, twin.dtypes);
    if (options.cases_per_correct_cell) {
      campaign.budget_s.reset();
      campaign.cases_per_cell = options.cases_per_correct_cell;
    }
    reports::Report report = run_campaign(registry, campaign, *quiet, runner);
    twin.cases = report.total_cases();
    result.cases_on_correct_targets += twin.cases;
    for (const auto& finding : report.findings) {
      (finding.fails ? result.false_alarms : result.twin_hazards).push_back(finding);
      if (!finding.fails) continue;
      ++twin.false_alarms;
      twin.false_alarm_cases += finding.occurrences;
    }
    log << fmt::format("selftest: twin {}/{} ({}): {} cases, {} false alarms in {} cases (rate {:.3g})\n", twin.op,
                       twin.target, fmt::join(dtype_names(twin.dtypes), ","), twin.cases, twin.false_alarms,
                       twin.false_alarm_cases,
                       twin.cases ? static_cast<double>(twin.false_alarm_cases) / static_cast<double>(twin.cases) : 0.0);
    log.flush();
    result.twins.push_back(twin);
  }
  result.elapsed_s = seconds_since(start);
  return result;
}

nlohmann::json to_json(const SelftestResult& result) {
  nlohmann::json mutants = nlohmann::json::array();
  for (const MutantScore& m : result.mutants) {
    nlohmann::json entry = {{"name", m.spec.target},
                            {"op", m.spec.op},
                            {"twin", m.spec.twin},
                            {"dtypes", dtype_names(m.spec.dtypes)},
                            {"mirrors", m.spec.mirrors},
                            {"caught", m.caught},
                            {"cases", m.cases},
                            {"size_target", m.size_target},
                            {"unsupported_cells", m.unsupported}};
    if (m.caught) {
      entry["found_after_s"] = m.found_after_s;
      entry["found_after_cases"] = m.found_after_cases;
      entry["minimized_size"] = m.minimized_size;
      entry["finding"] = finding_json(m.finding);
    } else {
      entry["found_after_s"] = nullptr;
      entry["found_after_cases"] = nullptr;
      entry["minimized_size"] = nullptr;
    }
    mutants.push_back(entry);
  }
  nlohmann::json twins = nlohmann::json::array(), alarms = nlohmann::json::array(), hazards = nlohmann::json::array();
  for (const TwinRun& t : result.twins)
    twins.push_back({{"op", t.op},
                     {"target", t.target},
                     {"dtypes", dtype_names(t.dtypes)},
                     {"cases", t.cases},
                     {"false_alarms", t.false_alarms},
                     {"false_alarm_cases", t.false_alarm_cases},
                     {"false_alarm_rate", t.cases ? static_cast<double>(t.false_alarm_cases) / t.cases : 0.0}});
  for (const auto& f : result.false_alarms) alarms.push_back(finding_json(f));
  for (const auto& f : result.twin_hazards) hazards.push_back(finding_json(f));
  return {{"format", "detfuzz-selftest"},
          {"format_version", 1},
          {"seed", result.seed},
          {"budget_per_mutant_s", result.budget_per_mutant_s},
          {"passed", result.passed()},
          {"elapsed_s", result.elapsed_s},
          {"mutants", mutants},
          {"false_alarms", alarms},
          {"cases_on_correct_targets", result.cases_on_correct_targets},
          {"correct_targets", twins},
          {"hazards_on_correct_targets", hazards}};
}

void print_scorecard(const SelftestResult& result, std::ostream& out) {
  out << fmt::format("{:<42} {:<15} {:<7} {:>8} {:>8} {:>6}\n", "mutant", "op", "caught", "after_s", "cases",
                     "size");
  std::size_t missed = 0, oversized = 0;
  for (const MutantScore& m : result.mutants) {
    if (!m.caught) {
      ++missed;
      out << fmt::format("{:<42} {:<15} {:<7} {:>8} {:>8} {:>6}\n", m.spec.target, m.spec.op, "NO", "-", m.cases, "-");
      continue;
    }
    const bool small = m.minimized_size <= m.size_target;
    oversized += small ? 0 : 1;
    out << fmt::format("{:<42} {:<15} {:<7} {:>8.2f} {:>8} {:>6}{}\n", m.spec.target, m.spec.op, "yes",
                       m.found_after_s, m.found_after_cases, m.minimized_size,
                       small ? "" : fmt::format(" (> {})", m.size_target));
  }
  out << fmt::format("correct twins: {} targets, {} cases, {} false alarms, {} non-failing hazards\n",
                     result.twins.size(), result.cases_on_correct_targets, result.false_alarms.size(),
                     result.twin_hazards.size());
  for (const auto& f : result.false_alarms) out << fmt::format("  false alarm {}: {}\n    {}\n", f.signature, f.message, f.replay);
  out << fmt::format("selftest: {} ({} of {} mutants caught, {} minimized above target, {} false alarms, {:.0f} s)\n",
                     result.passed() ? "passed" : "FAILED", result.mutants.size() - missed, result.mutants.size(),
                     oversized, result.false_alarms.size(), result.elapsed_s);
}

}  // namespace detfuzz::fuzz
