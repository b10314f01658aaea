// `detfuzz selftest`: the fuzzer's own scorecard. A campaign against each mutant of the
// catalog (kernels/mutants/catalog.h), over only its op and dtypes, until its first
// failing finding or its budget: caught or not, seconds and cases to the finding, size of
// the minimized case. Then the correct twins over the same generators: any failing
// finding there is a false alarm. A change to generators or comparators is better when
// this card is.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fuzz/ops/op_harness.h"
#include "fuzz/progress.h"
#include "kernels/mutants/catalog.h"
#include "reports/report.h"

namespace detfuzz::fuzz {

class CaseRunner;

struct SelftestOptions {
  std::vector<std::string> mutants;  // "mutant:<name>" or "<name>"; empty: the whole catalog
  double budget_per_mutant_s = 60;   // to find each mutant; each twin runs this long too
  std::uint64_t seed = 1;
  int max_boxes = 64;
  double minimize_budget_s = 10;
  std::string corpus_dir;  // minimized cases of the caught mutants ("" = nowhere)
  // The false-alarm measure: each correct twin's cells run exactly this many cases (in the
  // default, in-contract domain) instead of one mutant's budget; 0: the budget.
  std::uint64_t cases_per_correct_cell = 0;
  bool skip_mutants = false;  // only the correct twins (the false-alarm measure alone)
};

struct MutantScore {
  kernels::MutantSpec spec;
  bool caught = false;
  double found_after_s = 0;  // campaign wall time to the first failing finding
  std::uint64_t found_after_cases = 0;  // cases over all its cells until then
  std::size_t minimized_size = 0;       // boxes / RoIs in the minimized case
  std::size_t size_target = 3;          // <= 3, or the count threshold + 1
  reports::FindingRecord finding;       // the first failing finding (when caught)
  std::uint64_t cases = 0;
  std::vector<std::string> unsupported;  // cells that could not run, with the reason
};

struct TwinRun {
  std::string op, target;
  std::vector<DType> dtypes;
  std::uint64_t cases = 0;
  std::size_t false_alarms = 0;  // failing findings (distinct signatures) on this twin
  std::uint64_t false_alarm_cases = 0;  // cases that raised one of them (their occurrences)
};

struct SelftestResult {
  std::uint64_t seed = 0;
  double budget_per_mutant_s = 0;
  std::vector<MutantScore> mutants;
  std::vector<TwinRun> twins;
  std::vector<reports::FindingRecord> false_alarms;  // failing findings on correct twins
  // Non-failing findings on the twins (precision, overflow): hazards of the inputs, shown,
  // not counted as false alarms.
  std::vector<reports::FindingRecord> twin_hazards;
  std::uint64_t cases_on_correct_targets = 0;
  double elapsed_s = 0;

  bool passed() const;  // every mutant caught and no false alarm
};

// Error{usage} for a name that is not in the catalog (listing it).
std::vector<kernels::MutantSpec> select_mutants(const std::vector<std::string>& names);

SelftestResult run_selftest(const Registry& registry, const SelftestOptions& options, CaseRunner& runner,
                            std::ostream& log);

nlohmann::json to_json(const SelftestResult& result);
void print_scorecard(const SelftestResult& result, std::ostream& out);

}  // namespace detfuzz::fuzz
