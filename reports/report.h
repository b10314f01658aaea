// The campaign's result as data, and its two renderings so far: report.json (the contract
// later tools read: merge, gate, HTML) and the summary printed at the end of a run.
// Depends on neither LibTorch nor CUDA: reports can be read and merged anywhere.
#pragma once

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <iosfwd>
#include <iterator>
#include <limits>
#include <map>
#include <string>
#include <optional>
#include <vector>

namespace detfuzz::reports {

inline constexpr int kSchemaVersion = 1;

// What became of a cell: every case ran and none failed (ok), one failed (failed), or the
// target does not run the cell's dtype on its device (unsupported; reason says why).
enum class CellStatus { ok, failed, unsupported };
const char* to_string(CellStatus status);
// nullopt for a name that is no status.
std::optional<CellStatus> cell_status_from_string(const std::string& name);

struct CellSummary {
  std::string op, target, dtype, device;
  std::string case_name;  // replay reports: the corpus case this cell replayed ("" in campaigns)
  std::uint64_t cases = 0;
  std::uint64_t findings = 0;          // distinct signatures found in this cell
  CellStatus status = CellStatus::ok;
  std::string reason;                  // why unsupported
  double max_normalized_error = -1;    // < 0: no continuous output compared
  // Percentiles of the per-case largest normalized error ("p50", "p90", "p99", "p99.9",
  // "max"); empty when no continuous output was compared.
  std::map<std::string, double> normalized_error_percentiles;
  double elapsed_s = 0;
  std::map<std::string, std::uint64_t> occurrences_by_kind;  // cases per finding kind
  // Seconds of elapsed_s by phase: generation, kernel, oracle, comparison, minimization,
  // io, other (harness overhead: scheduling, worker round trips, bookkeeping).
  std::map<std::string, double> profile_s;
  // Cases per normalized-error bin (bins: kErrorHistogramUpperEdges); empty when no
  // continuous output was compared. Sums under merge.
  std::vector<std::uint64_t> error_histogram;
  // (largest |input value|, normalized error) of sampled cases, at most
  // kMaxMagnitudePoints: what the HTML report plots error against.
  std::vector<std::array<double, 2>> error_vs_magnitude;
};

// A cell's status as every table shows it: its name, or "unsupported: REASON".
std::string status_text(const CellSummary& cell);

// Bin i of an error histogram holds the errors in (edge[i-1], edge[i]]; bin 0 exact zeros.
inline constexpr double kErrorHistogramUpperEdges[] = {0,    1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1,
                                                       1,    1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,
                                                       std::numeric_limits<double>::infinity()};
inline constexpr std::size_t kErrorHistogramBins = std::size(kErrorHistogramUpperEdges);
inline constexpr std::size_t kMaxMagnitudePoints = 300;

std::vector<std::uint64_t> error_histogram(const std::vector<double>& errors);

struct FindingRecord {
  std::string op, target, dtype, device;
  std::string kind, property, signature, message;
  bool fails = true;  // counts toward exit status 1 (precision/overflow only with --fail-on)
  // Empty when the case is inside the op's documented input contract; else why it is not
  // (such findings are listed apart and fail only with --fail-outside-contract, crashes aside).
  std::string outside_contract;
  std::uint64_t seed = 0, case_seed = 0, case_index = 0;
  int generator_size = 0;
  std::uint64_t found_after_cases = 0;
  double found_after_s = 0;
  std::uint64_t occurrences = 1;
  std::size_t size = 0, original_size = 0;  // boxes in the minimized / original case
  int shrink_steps = 0;
  bool shrink_complete = false;
  bool reproducible = true;  // false: re-running the case did not fail again
  nlohmann::json input;    // the minimized case's exact inputs
  nlohmann::json details;  // evidence: elements, oracle vs kernel, tolerances, trace
  std::string replay;      // a command line that regenerates the case
  std::string case_file;   // where its case file was stored ("" when no corpus)
  double minimize_s = 0;   // time spent minimizing it
};

struct Report {
  nlohmann::json environment = nlohmann::json::object();
  nlohmann::json config = nlohmann::json::object();
  double elapsed_s = 0;
  bool partial = false;
  std::vector<CellSummary> cells;
  std::vector<FindingRecord> findings;
  // A merged report: the reports it was merged from (report.json objects without their own
  // `parts`), what cells and findings above are derived from (reports/merge.h).
  std::vector<nlohmann::json> parts;

  std::uint64_t total_cases() const;
  bool has_failing_finding() const;
};

// The findings in the order every report format lists them: failing first, then the
// others inside the documented contract, then those outside it; stable within each group.
std::vector<const FindingRecord*> findings_in_display_order(const Report& report);

// "op/target/dtype/device", plus "/<case>" for a replayed corpus case: how merge and gate
// match cells.
std::string cell_id(const CellSummary& cell);
// Whether `finding` was found in `cell` (a replayed case's finding carries the case's name
// as its property).
bool found_in(const FindingRecord& finding, const CellSummary& cell);

nlohmann::json to_json(const Report& report);
// The inverse of to_json; a report that is not one (wrong schema_version, a field missing
// or of the wrong type) is detfuzz::Error{input} naming `source` and the field.
Report report_from_json(const nlohmann::json& json, const std::string& source = "report");
// Reads and parses a report.json (or a directory holding one).
Report read_report(const std::string& path);

// A JSON file's contents; Error{input} naming `what` and the path when it cannot be read or
// parsed, with `hint` (what to pass instead) appended.
nlohmann::json read_json_file(const std::string& path, const std::string& what, const std::string& hint);

// The top-level keys in which two configs differ, each as "key (a vs b)": what `merge` and
// `gate` print when they refuse to compare different campaigns.
std::vector<std::string> config_differences(const nlohmann::json& a, const nlohmann::json& b);
// Writes `dir`/report.json through a temporary file and a rename, creating `dir`.
// Returns the path written; detfuzz::Error{usage} naming the path otherwise.
std::string write_report(const Report& report, const std::string& dir);
void print_summary(const Report& report, std::ostream& out);
// Per cell: cases/s and the share of its wall time in each profile phase (`run --profile`).
void print_profile(const Report& report, std::ostream& out);

// The phases of CellSummary::profile_s, in the order they are shown.
inline constexpr const char* kProfilePhases[] = {"generation", "kernel",       "oracle", "comparison",
                                                 "minimization", "io", "other"};

}  // namespace detfuzz::reports
