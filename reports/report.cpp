#include "reports/report.h"

#include <algorithm>

#include "corpus/atomic_file.h"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <filesystem>
#include <fstream>
#include <ostream>
#include <set>
#include <sstream>
#include <stdexcept>

#include "model/error.h"
#include "reports/render.h"

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

std::vector<const FindingRecord*> findings_in_display_order(const Report& report) {
  std::vector<const FindingRecord*> ordered;
  for (const FindingRecord& f : report.findings) ordered.push_back(&f);
  auto group = [](const FindingRecord* f) { return f->fails ? 0 : f->outside_contract.empty() ? 1 : 2; };
  std::stable_sort(ordered.begin(), ordered.end(),
                   [&](const FindingRecord* a, const FindingRecord* b) { return group(a) < group(b); });
  return ordered;
}

std::vector<std::uint64_t> error_histogram(const std::vector<double>& errors) {
  if (errors.empty()) return {};
  std::vector<std::uint64_t> counts(kErrorHistogramBins, 0);
  for (double e : errors) {
    std::size_t bin = 0;
    while (bin + 1 < kErrorHistogramBins && e > kErrorHistogramUpperEdges[bin]) ++bin;
    ++counts[bin];
  }
  return counts;
}

namespace {
constexpr std::pair<CellStatus, const char*> kCellStatusNames[] = {
    {CellStatus::ok, "ok"}, {CellStatus::failed, "failed"}, {CellStatus::unsupported, "unsupported"}};
}  // namespace

const char* to_string(CellStatus status) {
  for (const auto& [value, name] : kCellStatusNames)
    if (value == status) return name;
  return "ok";
}

std::optional<CellStatus> cell_status_from_string(const std::string& name) {
  for (const auto& [value, known] : kCellStatusNames)
    if (name == known) return value;
  return std::nullopt;
}

std::string status_text(const CellSummary& cell) {
  return cell.status == CellStatus::unsupported ? "unsupported: " + cell.reason : to_string(cell.status);
}

std::string cell_id(const CellSummary& cell) {
  std::string id = cell.op + "/" + cell.target + "/" + cell.dtype + "/" + cell.device;
  return cell.case_name.empty() ? id : id + "/" + cell.case_name;
}

bool found_in(const FindingRecord& finding, const CellSummary& cell) {
  return finding.op == cell.op && finding.target == cell.target && finding.dtype == cell.dtype &&
         finding.device == cell.device && (cell.case_name.empty() || finding.property == cell.case_name);
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
                           {"status", to_string(c.status)},
                           {"elapsed_s", c.elapsed_s},
                           {"cases_per_second", c.elapsed_s > 0 ? c.cases / c.elapsed_s : 0.0},
                           {"occurrences_by_kind", c.occurrences_by_kind}};
    cell["max_normalized_error"] =
        c.max_normalized_error < 0 ? nlohmann::json(nullptr) : nlohmann::json(c.max_normalized_error);
    if (!c.reason.empty()) cell["reason"] = c.reason;
    if (!c.case_name.empty()) cell["case"] = c.case_name;
    if (!c.normalized_error_percentiles.empty()) cell["normalized_error_percentiles"] = c.normalized_error_percentiles;
    if (!c.profile_s.empty()) cell["profile_s"] = c.profile_s;
    if (!c.error_histogram.empty()) cell["error_histogram"] = c.error_histogram;
    if (!c.error_vs_magnitude.empty()) cell["error_vs_magnitude"] = c.error_vs_magnitude;
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
                        {"outside_contract", f.outside_contract},
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
  nlohmann::json json = {{"schema_version", kSchemaVersion},
                         {"environment", report.environment},
                         {"config", report.config},
                         {"elapsed_s", report.elapsed_s},
                         {"partial", report.partial},
                         {"total_cases", report.total_cases()},
                         {"cells", cells},
                         {"findings", findings}};
  if (!report.parts.empty()) json["parts"] = report.parts;
  return json;
}

namespace {

// Field access that says which field of which report is wrong.
class Reader {
 public:
  explicit Reader(std::string source) : source_(std::move(source)) {}

  template <class T>
  T get(const nlohmann::json& object, const char* key, const std::string& where) const {
    if (!object.is_object() || !object.contains(key))
      fail(where + "." + key + " is missing");
    try {
      return object.at(key).get<T>();
    } catch (const nlohmann::json::exception&) {
      fail(where + "." + key + " has the wrong type (" + std::string(object.at(key).type_name()) + ")");
    }
  }
  template <class T>
  T get_or(const nlohmann::json& object, const char* key, const std::string& where, T fallback) const {
    if (!object.is_object() || !object.contains(key) || object.at(key).is_null()) return fallback;
    return get<T>(object, key, where);
  }
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(ErrorKind::input, source_ + ": " + what + "; is it a detfuzz report.json (schema_version " +
                                      std::to_string(kSchemaVersion) + ")?");
  }

 private:
  std::string source_;
};

}  // namespace

Report report_from_json(const nlohmann::json& json, const std::string& source) {
  const Reader r(source);
  if (!json.is_object()) r.fail("the top level is not an object");
  const int version = r.get<int>(json, "schema_version", "report");
  if (version != kSchemaVersion)
    r.fail("schema_version " + std::to_string(version) + " is not the one this detfuzz reads");
  Report report;
  report.environment = json.value("environment", nlohmann::json::object());
  report.config = r.get<nlohmann::json>(json, "config", "report");
  if (!report.config.is_object()) r.fail("report.config is not an object");
  report.elapsed_s = r.get_or<double>(json, "elapsed_s", "report", 0.0);
  report.partial = r.get_or<bool>(json, "partial", "report", false);
  const auto cells = r.get<nlohmann::json>(json, "cells", "report");
  if (!cells.is_array()) r.fail("report.cells is not an array");
  for (std::size_t i = 0; i < cells.size(); ++i) {
    const auto& c = cells[i];
    const std::string at = "cells[" + std::to_string(i) + "]";
    CellSummary cell;
    cell.op = r.get<std::string>(c, "op", at);
    cell.target = r.get<std::string>(c, "target", at);
    cell.dtype = r.get<std::string>(c, "dtype", at);
    cell.device = r.get<std::string>(c, "device", at);
    cell.cases = r.get<std::uint64_t>(c, "cases", at);
    cell.findings = r.get_or<std::uint64_t>(c, "findings", at, 0);
    const std::string status = r.get<std::string>(c, "status", at);
    const std::optional<CellStatus> parsed_status = cell_status_from_string(status);
    if (!parsed_status) r.fail(at + ".status is '" + status + "', not ok, failed or unsupported");
    cell.status = *parsed_status;
    cell.reason = r.get_or<std::string>(c, "reason", at, "");
    cell.case_name = r.get_or<std::string>(c, "case", at, "");
    cell.max_normalized_error = r.get_or<double>(c, "max_normalized_error", at, -1.0);
    cell.normalized_error_percentiles =
        r.get_or<std::map<std::string, double>>(c, "normalized_error_percentiles", at, {});
    cell.elapsed_s = r.get_or<double>(c, "elapsed_s", at, 0.0);
    cell.occurrences_by_kind = r.get_or<std::map<std::string, std::uint64_t>>(c, "occurrences_by_kind", at, {});
    cell.profile_s = r.get_or<std::map<std::string, double>>(c, "profile_s", at, {});
    cell.error_histogram = r.get_or<std::vector<std::uint64_t>>(c, "error_histogram", at, {});
    if (!cell.error_histogram.empty() && cell.error_histogram.size() != kErrorHistogramBins)
      r.fail(at + ".error_histogram has " + std::to_string(cell.error_histogram.size()) + " bins, not " +
             std::to_string(kErrorHistogramBins));
    cell.error_vs_magnitude = r.get_or<std::vector<std::array<double, 2>>>(c, "error_vs_magnitude", at, {});
    report.cells.push_back(std::move(cell));
  }
  const auto findings = r.get<nlohmann::json>(json, "findings", "report");
  if (!findings.is_array()) r.fail("report.findings is not an array");
  for (std::size_t i = 0; i < findings.size(); ++i) {
    const auto& f = findings[i];
    const std::string at = "findings[" + std::to_string(i) + "]";
    FindingRecord finding;
    finding.op = r.get<std::string>(f, "op", at);
    finding.target = r.get<std::string>(f, "target", at);
    finding.dtype = r.get<std::string>(f, "dtype", at);
    finding.device = r.get<std::string>(f, "device", at);
    finding.kind = r.get<std::string>(f, "kind", at);
    finding.property = r.get<std::string>(f, "property", at);
    finding.signature = r.get<std::string>(f, "signature", at);
    finding.message = r.get_or<std::string>(f, "message", at, "");
    finding.fails = r.get<bool>(f, "fails", at);
    finding.outside_contract = r.get_or<std::string>(f, "outside_contract", at, "");
    finding.seed = r.get_or<std::uint64_t>(f, "seed", at, 0);
    const std::string case_seed = r.get_or<std::string>(f, "case_seed", at, "0");
    try {
      finding.case_seed = std::stoull(case_seed);
    } catch (const std::exception&) {
      r.fail(at + ".case_seed '" + case_seed + "' is not a number");
    }
    finding.case_index = r.get_or<std::uint64_t>(f, "case_index", at, 0);
    finding.generator_size = r.get_or<int>(f, "generator_size", at, 0);
    finding.found_after_cases = r.get_or<std::uint64_t>(f, "found_after_cases", at, 0);
    finding.found_after_s = r.get_or<double>(f, "found_after_s", at, 0.0);
    finding.occurrences = r.get_or<std::uint64_t>(f, "occurrences", at, 1);
    finding.size = r.get_or<std::size_t>(f, "size", at, 0);
    finding.original_size = r.get_or<std::size_t>(f, "original_size", at, 0);
    const auto shrink = f.value("shrink", nlohmann::json::object());
    finding.shrink_steps = r.get_or<int>(shrink, "steps", at + ".shrink", 0);
    finding.shrink_complete = r.get_or<bool>(shrink, "complete", at + ".shrink", false);
    finding.reproducible = r.get_or<bool>(f, "reproducible", at, true);
    finding.input = f.value("input", nlohmann::json());
    finding.details = f.value("details", nlohmann::json());
    finding.replay = r.get_or<std::string>(f, "replay", at, "");
    finding.case_file = r.get_or<std::string>(f, "case_file", at, "");
    finding.minimize_s = r.get_or<double>(f, "minimize_s", at, 0.0);
    report.findings.push_back(std::move(finding));
  }
  if (json.contains("parts")) {
    if (!json.at("parts").is_array()) r.fail("report.parts is not an array");
    for (std::size_t i = 0; i < json.at("parts").size(); ++i) {
      const auto& part = json.at("parts")[i];
      report_from_json(part, source + " parts[" + std::to_string(i) + "]");  // validated now, not when used
      report.parts.push_back(part);
    }
  }
  return report;
}

nlohmann::json read_json_file(const std::string& path, const std::string& what, const std::string& hint) {
  std::ifstream in(path);
  if (!in) throw Error(ErrorKind::input, "cannot read " + what + " " + path + ": no such file or not readable; " + hint);
  std::stringstream text;
  text << in.rdbuf();
  try {
    return nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorKind::input, what + " " + path + " is not JSON (" + e.what() + "); " + hint);
  }
}

std::vector<std::string> config_differences(const nlohmann::json& a, const nlohmann::json& b) {
  std::set<std::string> keys;
  for (const auto& [key, value] : a.items()) keys.insert(key);
  for (const auto& [key, value] : b.items()) keys.insert(key);
  std::vector<std::string> differ;
  for (const auto& key : keys) {
    const nlohmann::json left = a.value(key, nlohmann::json()), right = b.value(key, nlohmann::json());
    if (left != right) differ.push_back(fmt::format("{} ({} vs {})", key, left.dump(), right.dump()));
  }
  return differ;
}

Report read_report(const std::string& path) {
  std::filesystem::path file(path);
  std::error_code error;
  if (std::filesystem::is_directory(file, error)) file /= "report.json";
  return report_from_json(
      read_json_file(file.string(), "report", "pass a report.json written by detfuzz or the --report DIR of a run"),
      file.string());
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
    std::string status = status_text(c);
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
      // A merged report keeps only the max: the other percentiles do not merge.
      auto at = [&](const char* q) {
        auto it = c.normalized_error_percentiles.find(q);
        return it == c.normalized_error_percentiles.end() ? std::string("-") : fmt::format("{:.3g}", it->second);
      };
      fmt::print(out, "{:<9} {:<12} {:<5} {:>10} {:>10} {:>10} {:>10} {:>10}\n", c.op, c.target, c.dtype, at("p50"),
                 at("p90"), at("p99"), at("p99.9"), at("max"));
    }
  }
  if (!report.findings.empty()) fmt::print(out, "\nfindings (minimized; failing first):\n");
  for (const FindingRecord* finding : findings_in_display_order(report)) {
    const FindingRecord& f = *finding;
    fmt::print(out, "  [{}{}{}] {}/{}/{}/{} {}: {}\n", f.kind, f.fails ? "" : ", not failing",
               f.outside_contract.empty() ? "" : ", outside the documented contract", f.op, f.target, f.dtype,
               f.device, f.property, f.message);
    if (!f.outside_contract.empty()) fmt::print(out, "      outside the contract: {}\n", f.outside_contract);
    fmt::print(out, "      {}, seen in {} case(s), first after {} cases / {:.1f} s\n", minimized_size(f),
               f.occurrences, f.found_after_cases, f.found_after_s);
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
    if (c.status == CellStatus::unsupported || c.elapsed_s <= 0) continue;
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
