#include "reports/merge.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <set>
#include <tuple>

#include "corpus/atomic_file.h"
#include "model/error.h"

namespace detfuzz::reports {
namespace {

// How a run ran rather than what it covered: not part of a part's identity.
nlohmann::json identity_config(nlohmann::json config) {
  config.erase("jobs");
  config.erase("corpus");
  return config;
}

// What every shard of one campaign shares.
nlohmann::json campaign_config(const nlohmann::json& part_config) {
  nlohmann::json config = identity_config(part_config);
  if (config.contains("shard") && config["shard"].is_object()) config["shard"].erase("index");
  return config;
}

struct Part {
  std::string key;  // identity_config, serialized
  nlohmann::json json;
  Report report;
};

bool better_part(const Part& a, const Part& b) {  // the one a repeated shard keeps
  if (a.report.total_cases() != b.report.total_cases()) return a.report.total_cases() > b.report.total_cases();
  return a.json.dump() < b.json.dump();
}

}  // namespace

Report merge_reports(const std::vector<Report>& reports) {
  if (reports.empty()) throw Error(ErrorKind::usage, "merge needs at least one report");
  std::map<std::string, Part> parts;  // by key: sorted, so the inputs' order does not matter
  auto add_part = [&](const nlohmann::json& json) {
    Part part;
    part.json = json;
    part.json.erase("parts");
    part.report = report_from_json(part.json, "a merged part");
    part.key = identity_config(part.report.config).dump();
    auto [it, inserted] = parts.emplace(part.key, part);
    if (!inserted && better_part(part, it->second)) it->second = std::move(part);
  };
  for (const Report& report : reports) {
    if (report.parts.empty()) {
      add_part(to_json(report));
    } else {
      for (const auto& part : report.parts) add_part(part);
    }
  }

  const Part& first = parts.begin()->second;
  const nlohmann::json campaign = campaign_config(first.report.config);
  for (const auto& [key, part] : parts) {
    const auto differ = config_differences(campaign, campaign_config(part.report.config));
    if (!differ.empty())
      throw Error(ErrorKind::input,
                  fmt::format("cannot merge reports of different campaigns: their config differs in {}; merge the "
                              "shards of one campaign (same seed, matrix, cases or budget, shard count)",
                              fmt::join(differ, ", ")));
  }

  Report merged;
  merged.environment = first.report.environment;
  merged.config = campaign;
  std::vector<std::uint64_t> shard_indices;
  for (const auto& [key, part] : parts) {
    merged.parts.push_back(part.json);
    merged.elapsed_s = std::max(merged.elapsed_s, part.report.elapsed_s);
    merged.partial = merged.partial || part.report.partial;
    const auto& shard = part.report.config.value("shard", nlohmann::json::object());
    shard_indices.push_back(shard.value("index", std::uint64_t{0}));
  }
  if (merged.config.contains("shard")) merged.config["shard"]["merged"] = shard_indices;

  // Cells, in the order of their first appearance in the sorted parts.
  std::vector<std::string> order;
  std::map<std::string, CellSummary> cells;
  std::map<std::string, bool> all_unsupported;
  for (const auto& [key, part] : parts)
    for (const CellSummary& c : part.report.cells) {
      const std::string id = cell_id(c);
      auto [it, inserted] = cells.emplace(id, CellSummary{});
      CellSummary& into = it->second;
      if (inserted) {
        order.push_back(id);
        into.op = c.op;
        into.target = c.target;
        into.dtype = c.dtype;
        into.device = c.device;
        into.case_name = c.case_name;
        all_unsupported[id] = true;
      }
      into.cases += c.cases;
      into.elapsed_s += c.elapsed_s;
      into.max_normalized_error = std::max(into.max_normalized_error, c.max_normalized_error);
      for (const auto& [kind, n] : c.occurrences_by_kind) into.occurrences_by_kind[kind] += n;
      for (const auto& [phase, seconds] : c.profile_s) into.profile_s[phase] += seconds;
      if (!c.error_histogram.empty()) {
        into.error_histogram.resize(kErrorHistogramBins, 0);
        for (std::size_t bin = 0; bin < kErrorHistogramBins && bin < c.error_histogram.size(); ++bin)
          into.error_histogram[bin] += c.error_histogram[bin];
      }
      for (const auto& point : c.error_vs_magnitude)
        if (into.error_vs_magnitude.size() < kMaxMagnitudePoints) into.error_vs_magnitude.push_back(point);
      if (c.status == CellStatus::unsupported) {
        if (into.reason.empty()) into.reason = c.reason;
      } else {
        all_unsupported[id] = false;
      }
    }

  // Findings by signature: the smallest case represents them.
  std::map<std::string, FindingRecord> findings;
  std::map<std::string, std::uint64_t> occurrences;
  for (const auto& [key, part] : parts)
    for (const FindingRecord& f : part.report.findings) {
      occurrences[f.signature] += f.occurrences;
      auto it = findings.find(f.signature);
      if (it == findings.end() ||
          std::tie(f.size, f.case_index, f.case_file) < std::tie(it->second.size, it->second.case_index, it->second.case_file))
        findings[f.signature] = f;
    }
  for (const std::string& id : order) {
    CellSummary cell = cells.at(id);
    if (cell.max_normalized_error >= 0) cell.normalized_error_percentiles = {{"max", cell.max_normalized_error}};
    bool failed = false;
    for (auto& [signature, f] : findings) {
      if (!found_in(f, cell)) continue;
      f.occurrences = occurrences.at(signature);
      ++cell.findings;
      failed = failed || f.fails;
      merged.findings.push_back(f);
    }
    cell.status = all_unsupported.at(id) ? CellStatus::unsupported : failed ? CellStatus::failed : CellStatus::ok;
    if (cell.status != CellStatus::unsupported) cell.reason.clear();
    merged.cells.push_back(std::move(cell));
  }
  return merged;
}

std::vector<std::string> gather_corpus(Report& merged, const std::vector<std::string>& report_dirs,
                                       const std::string& corpus_dir) {
  namespace fs = std::filesystem;
  std::vector<std::string> missing;
  for (FindingRecord& f : merged.findings) {
    if (f.case_file.empty()) continue;
    const fs::path name = fs::path(f.case_file).filename();
    std::vector<fs::path> candidates{f.case_file};
    for (const auto& dir : report_dirs) candidates.push_back(fs::path(dir) / "corpus" / name);
    std::error_code error;
    auto found = std::find_if(candidates.begin(), candidates.end(),
                              [&](const fs::path& p) { return fs::is_regular_file(p, error); });
    if (found == candidates.end()) {
      missing.push_back(f.case_file);
      continue;
    }
    corpus::ensure_directory(corpus_dir);
    const fs::path target = fs::path(corpus_dir) / name;
    if (!fs::exists(target, error)) {  // same name, same content: already there
      std::ifstream in(*found, std::ios::binary);
      std::stringstream content;
      content << in.rdbuf();
      if (!in) throw Error(ErrorKind::input, "cannot read case file " + found->string());
      corpus::write_file_atomically(target.string(), content.str());
    }
    f.case_file = target.string();
  }
  return missing;
}

}  // namespace detfuzz::reports
