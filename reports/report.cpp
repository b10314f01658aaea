#include "reports/report.h"

#include "corpus/atomic_file.h"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <filesystem>
#include <ostream>
#include <stdexcept>

namespace detfuzz::reports {

std::uint64_t Report::total_cases() const {
  std::uint64_t total = 0;
  for (const auto& cell : cells) total += cell.cases;
  return total;
}

bool Report::has_failing_finding() const {
  for (const auto& finding : findings)
    if (finding.fails) return true;
  return false;
}

nlohmann::json to_json(const Report& report) {
  nlohmann::json cells = nlohmann::json::array();
  for (const auto& c : report.cells) {
    nlohmann::json cell = {{"op", c.op},
                           {"target", c.target},
                           {"dtype", c.dtype},
                           {"device", c.device},
                           {"cases", c.cases},
                           {"findings", c.findings},
                           {"status", c.status},
                           {"elapsed_s", c.elapsed_s},
                           {"cases_per_second", c.elapsed_s > 0 ? c.cases / c.elapsed_s : 0.0},
                           {"occurrences_by_kind", c.occurrences_by_kind}};
    cell["max_normalized_error"] =
        c.max_normalized_error < 0 ? nlohmann::json(nullptr) : nlohmann::json(c.max_normalized_error);
    if (!c.reason.empty()) cell["reason"] = c.reason;
    if (!c.normalized_error_percentiles.empty()) cell["normalized_error_percentiles"] = c.normalized_error_percentiles;
    if (!c.profile_s.empty()) cell["profile_s"] = c.profile_s;
    cells.push_back(cell);
  }
  nlohmann::json findings = nlohmann::json::array();
  for (const auto& f : report.findings) {
    findings.push_back({{"op", f.op},
                        {"target", f.target},
                        {"dtype", f.dtype},
                        {"device", f.device},
                        {"kind", f.kind},
                        {"property", f.property},
                        {"signature", f.signature},
                        {"message", f.message},
                        {"fails", f.fails},
                        {"seed", f.seed},
                        // A string: 64-bit seeds do not survive JSON readers that use doubles (jq).
                        {"case_seed", std::to_string(f.case_seed)},
                        {"case_index", f.case_index},
                        {"generator_size", f.generator_size},
                        {"found_after_cases", f.found_after_cases},
                        {"found_after_s", f.found_after_s},
                        {"occurrences", f.occurrences},
                        {"size", f.size},
                        {"original_size", f.original_size},
                        {"shrink", {{"steps", f.shrink_steps}, {"complete", f.shrink_complete}}},
                        {"reproducible", f.reproducible},
                        {"input", f.input},
                        {"details", f.details},
                        {"replay", f.replay},
                        {"case_file", f.case_file},
                        {"minimize_s", f.minimize_s}});
  }
  return {{"schema_version", kSchemaVersion},
          {"environment", report.environment},
          {"config", report.config},
          {"elapsed_s", report.elapsed_s},
          {"partial", report.partial},
          {"total_cases", report.total_cases()},
          {"cells", cells},
          {"findings", findings}};
}

std::string write_report(const Report& report, const std::string& dir) {
  corpus::ensure_directory(dir);
  const std::string path = (std::filesystem::path(dir) / "report.json").string();
  corpus::write_file_atomically(path, to_json(report).dump(2) + "\n");
  return path;
}

void print_summary(const Report& report, std::ostream& out) {
  fmt::print(out, "{:<8} {:<12} {:<5} {:<6} {:>9} {:>8} {:>10} {:>9}  {}\n", "op", "target",
             "dtype", "device", "cases", "cases/s", "max_err", "findings", "status");
  for (const auto& c : report.cells) {
    std::string max_error = c.max_normalized_error < 0 ? "-" : fmt::format("{:.3g}", c.max_normalized_error);
    std::string rate = c.elapsed_s > 0 ? fmt::format("{:.0f}", c.cases / c.elapsed_s) : "-";
    std::string status = c.status == "unsupported" ? "unsupported: " + c.reason : c.status;
    if (status.size() > 90) status = status.substr(0, 87) + "...";
    fmt::print(out, "{:<8} {:<12} {:<5} {:<6} {:>9} {:>8} {:>10} {:>9}  {}\n", c.op, c.target,
               c.dtype, c.device, c.cases, rate, max_error, c.findings, status);
  }
  bool any_percentiles = false;
  for (const auto& c : report.cells) any_percentiles = any_percentiles || !c.normalized_error_percentiles.empty();
  if (any_percentiles) {
    fmt::print(out, "\nnormalized error per case (|kernel - oracle| / tolerance, accumulate-type tier):\n");
    fmt::print(out, "{:<9} {:<12} {:<5} {:>10} {:>10} {:>10} {:>10} {:>10}\n", "op", "target", "dtype", "p50", "p90",
               "p99", "p99.9", "max");
    for (const auto& c : report.cells) {
      if (c.normalized_error_percentiles.empty()) continue;
      const auto& p = c.normalized_error_percentiles;
      fmt::print(out, "{:<9} {:<12} {:<5} {:>10.3g} {:>10.3g} {:>10.3g} {:>10.3g} {:>10.3g}\n", c.op, c.target, c.dtype,
                 p.at("p50"), p.at("p90"), p.at("p99"), p.at("p99.9"), p.at("max"));
    }
  }
  if (!report.findings.empty()) fmt::print(out, "\nfindings (minimized):\n");
  for (const auto& f : report.findings) {
    fmt::print(out, "  [{}{}] {}/{}/{}/{} {}: {}\n", f.kind, f.fails ? "" : ", not failing",
               f.op, f.target, f.dtype, f.device, f.property, f.message);
    fmt::print(out, "      {} boxes (from {}), seen in {} case(s), first after {} cases / {:.1f} s\n",
               f.size, f.original_size, f.occurrences, f.found_after_cases, f.found_after_s);
    std::string input = f.input.dump();
    if (input.size() > 300) input = input.substr(0, 297) + "...";
    fmt::print(out, "      input: {}\n      replay: {}\n", input, f.replay);
    if (!f.case_file.empty()) fmt::print(out, "      case file: {}\n", f.case_file);
  }
  fmt::print(out, "\n{} cases in {:.1f} s, {} finding(s){}{}\n", report.total_cases(),
             report.elapsed_s, report.findings.size(),
             report.has_failing_finding() ? ", failing" : "",
             report.partial ? " (partial: interrupted)" : "");
}

void print_profile(const Report& report, std::ostream& out) {
  fmt::print(out, "\nwhere the time went (share of each cell's wall time):\n");
  fmt::print(out, "{:<44} {:>9} {:>8}", "cell", "cases/s", "wall s");
  for (const char* phase : kProfilePhases) fmt::print(out, " {:>8.8}", phase);
  fmt::print(out, "\n");
  std::map<std::string, double> total;
  double total_elapsed = 0;
  std::uint64_t total_cases = 0;
  for (const auto& c : report.cells) {
    if (c.status == "unsupported" || c.elapsed_s <= 0) continue;
    fmt::print(out, "{:<44.44} {:>9.0f} {:>8.1f}", fmt::format("{}/{}/{}", c.op, c.target, c.dtype),
               c.cases / c.elapsed_s, c.elapsed_s);
    for (const char* phase : kProfilePhases) {
      const auto it = c.profile_s.find(phase);
      const double seconds = it == c.profile_s.end() ? 0.0 : it->second;
      total[phase] += seconds;
      fmt::print(out, " {:>7.1f}%", 100 * seconds / c.elapsed_s);
    }
    total_elapsed += c.elapsed_s;
    total_cases += c.cases;
    fmt::print(out, "\n");
  }
  if (total_elapsed <= 0) return;
  fmt::print(out, "{:<44} {:>9.0f} {:>8.1f}", "all cells (per lane)", total_cases / total_elapsed, total_elapsed);
  for (const char* phase : kProfilePhases) fmt::print(out, " {:>7.1f}%", 100 * total[phase] / total_elapsed);
  fmt::print(out, "\n");
  // Lanes run cells side by side: the cells' wall times add up to lanes x the campaign's.
  const double lanes = report.config.value("jobs", 1.0);
  if (report.elapsed_s > 0)
    fmt::print(out, "campaign: {} cases in {:.1f} s = {:.0f} cases/s on {} lane(s), busy {:.0f}% of the time\n",
               total_cases, report.elapsed_s, static_cast<double>(total_cases) / report.elapsed_s, lanes,
               100 * total_elapsed / (lanes * report.elapsed_s));
}

}  // namespace detfuzz::reports
