// Merging shard reports (a set union over parts), the JUnit and Markdown renderings, and
// the upgrade gate's rules, on reports built by hand.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>

#include "model/error.h"
#include "reports/gate.h"
#include "reports/merge.h"
#include "reports/render.h"
#include "support/scratch_dir.h"

namespace detfuzz::reports {
namespace {

CellSummary cell(const std::string& target, const std::string& dtype, std::uint64_t cases, double max_error,
                 const std::string& status = "ok") {
  CellSummary c;
  c.op = "nms";
  c.target = target;
  c.dtype = dtype;
  c.device = "cpu";
  c.cases = cases;
  c.status = *cell_status_from_string(status);
  c.max_normalized_error = max_error;
  c.elapsed_s = 1;
  if (status == "unsupported") c.reason = "no Half kernel";
  return c;
}

FindingRecord finding(const std::string& target, const std::string& dtype, const std::string& kind,
                      std::size_t size, std::uint64_t case_index, bool fails = true) {
  FindingRecord f;
  f.op = "nms";
  f.target = target;
  f.dtype = dtype;
  f.device = "cpu";
  f.kind = kind;
  f.property = "oracle";
  f.signature = "nms/" + target + "/" + dtype + "/cpu/" + kind + "/oracle";
  f.message = kind + " at case " + std::to_string(case_index);
  f.fails = fails;
  f.size = size;
  f.case_index = case_index;
  f.replay = "detfuzz replay --seed 1 --case-index " + std::to_string(case_index);
  return f;
}

Report shard(std::uint64_t index, std::uint64_t count) {
  Report r;
  r.config = {{"seed", 1}, {"ops", {"nms"}}, {"cases_per_cell", 10}, {"jobs", index + 1},
              {"shard", {{"index", index}, {"count", count}}}};
  r.elapsed_s = 2.0 + static_cast<double>(index);
  r.cells = {cell("torchvision", "fp32", 10, 0.25 * static_cast<double>(index + 1)),
             cell("torchvision", "fp16", 0, -1, "unsupported")};
  r.cells[0].occurrences_by_kind = {{"mismatch", index + 1}};
  r.findings = {finding("torchvision", "fp32", "mismatch", 5 - index, index)};
  r.findings[0].occurrences = index + 1;
  r.cells[0].findings = 1;
  r.cells[0].status = CellStatus::failed;
  return r;
}

using Files = detfuzz::testing::ScratchDirTest;

// Round trip through JSON, as `detfuzz merge` reads its inputs.
Report reread(const Report& report) { return report_from_json(to_json(report)); }

TEST(Merge, ShardsAddUpCasesAndKeepTheSmallestCaseOfEachSignature) {
  const Report merged = merge_reports({shard(0, 2), shard(1, 2)});
  ASSERT_EQ(merged.parts.size(), 2u);
  ASSERT_EQ(merged.cells.size(), 2u);
  EXPECT_EQ(merged.cells[0].cases, 20u);
  EXPECT_EQ(merged.cells[0].max_normalized_error, 0.5);
  EXPECT_EQ(merged.cells[0].occurrences_by_kind.at("mismatch"), 3u);
  EXPECT_EQ(merged.cells[0].status, CellStatus::failed);
  EXPECT_EQ(merged.cells[1].status, CellStatus::unsupported);
  ASSERT_EQ(merged.findings.size(), 1u);
  EXPECT_EQ(merged.findings[0].size, 4u);  // shard 1's case is smaller
  EXPECT_EQ(merged.findings[0].occurrences, 3u);
  EXPECT_EQ(merged.elapsed_s, 3.0);  // shards run side by side
  EXPECT_EQ(merged.config["shard"]["merged"], nlohmann::json({0, 1}));
  EXPECT_FALSE(merged.config.contains("jobs"));
}

TEST(ErrorHistogram, BinsAreUpperInclusiveDecadesWithZeroAndInfinityApart) {
  const auto counts = error_histogram({0, 1e-9, 0.5, 1, 2, 1e300 * 10, std::numeric_limits<double>::infinity()});
  ASSERT_EQ(counts.size(), kErrorHistogramBins);
  EXPECT_EQ(counts[0], 1u);   // exactly 0
  EXPECT_EQ(counts[1], 1u);   // (0, 1e-8]
  EXPECT_EQ(counts[9], 2u);   // (0.1, 1]: 0.5 and 1 pass
  EXPECT_EQ(counts[10], 1u);  // (1, 10]: 2 fails
  EXPECT_EQ(counts[kErrorHistogramBins - 1], 2u);  // beyond 1e8
  EXPECT_TRUE(error_histogram({}).empty());
}

TEST(Merge, HistogramsAddUpAndMagnitudePointsAreKept) {
  Report a = shard(0, 2), b = shard(1, 2);
  a.cells[0].error_histogram = error_histogram({0, 0.5});
  a.cells[0].error_vs_magnitude = {{{10, 0.5}}};
  b.cells[0].error_histogram = error_histogram({0.5, 3});
  b.cells[0].error_vs_magnitude = {{{100, 3}}};
  const Report merged = merge_reports({reread(b), reread(a)});
  EXPECT_EQ(merged.cells[0].error_histogram, error_histogram({0, 0.5, 0.5, 3}));
  EXPECT_EQ(merged.cells[0].error_vs_magnitude.size(), 2u);
}

TEST(Merge, IsCommutativeAssociativeAndIdempotent) {
  const Report a = shard(0, 3), b = shard(1, 3), c = shard(2, 3);
  const nlohmann::json abc = to_json(merge_reports({a, b, c}));
  EXPECT_EQ(to_json(merge_reports({c, a, b})), abc);
  EXPECT_EQ(to_json(merge_reports({reread(merge_reports({a, b})), c})), abc);
  EXPECT_EQ(to_json(merge_reports({a, reread(merge_reports({b, c}))})), abc);
  // Merging a report again, or a merged report with its own parts, changes nothing.
  const Report merged = reread(merge_reports({a, b, c}));
  EXPECT_EQ(to_json(merge_reports({merged, merged})), abc);
  EXPECT_EQ(to_json(merge_reports({merged, b})), abc);
  EXPECT_EQ(to_json(merge_reports({a, a, b, c, c})), abc);
}

TEST(Merge, AShardRunTwiceCountsOnceKeepingTheRunWithMoreCases) {
  Report rerun = shard(0, 2);
  rerun.cells[0].cases = 25;
  const Report merged = merge_reports({shard(0, 2), rerun, shard(1, 2)});
  EXPECT_EQ(merged.parts.size(), 2u);
  EXPECT_EQ(merged.cells[0].cases, 35u);
  EXPECT_EQ(to_json(merge_reports({rerun, shard(1, 2), shard(0, 2)})), to_json(merged));
}

TEST(Merge, RefusesReportsOfDifferentCampaigns) {
  Report other = shard(1, 2);
  other.config["seed"] = 2;
  try {
    merge_reports({shard(0, 2), other});
    FAIL() << "merged two seeds";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::input);
    EXPECT_NE(std::string(e.what()).find("differs in seed (1 vs 2)"), std::string::npos) << e.what();
  }
}

TEST_F(Files, MergedCorporaUniteByFileName) {
  const std::string a = dir() + "/a", out = dir() + "/out";
  std::filesystem::create_directories(a + "/corpus");
  std::ofstream(a + "/corpus/nms-fp32-mismatch-1234.json") << "{\"case\": 1}\n";
  Report r = shard(0, 1);
  r.findings[0].case_file = "/elsewhere/corpus/nms-fp32-mismatch-1234.json";  // moved since: found by name
  Report merged = merge_reports({r});
  EXPECT_TRUE(gather_corpus(merged, {a}, out).empty());
  EXPECT_EQ(merged.findings[0].case_file, out + "/nms-fp32-mismatch-1234.json");
  std::ifstream copied(out + "/nms-fp32-mismatch-1234.json");
  std::string line;
  std::getline(copied, line);
  EXPECT_EQ(line, "{\"case\": 1}");
  Report lost = merge_reports({shard(0, 1)});
  lost.findings[0].case_file = "/nowhere/x.json";
  EXPECT_EQ(gather_corpus(lost, {a}, out), std::vector<std::string>{"/nowhere/x.json"});
}

TEST(ReadReport, NamesTheBrokenFieldAndTheFile) {
  nlohmann::json json = to_json(shard(0, 1));
  json["cells"][0].erase("cases");
  try {
    report_from_json(json, "r.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::input);
    EXPECT_NE(std::string(e.what()).find("r.json: cells[0].cases is missing"), std::string::npos) << e.what();
  }
  json = to_json(shard(0, 1));
  json["cells"][0]["status"] = "fine";
  try {
    report_from_json(json, "r.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cells[0].status is 'fine', not ok, failed or unsupported"), std::string::npos)
        << e.what();
  }
  for (const char* status : {"ok", "failed", "unsupported"}) {
    json["cells"][0]["status"] = status;
    EXPECT_EQ(to_string(report_from_json(json, "r.json").cells[0].status), std::string(status));
  }
  json = to_json(shard(0, 1));
  json["schema_version"] = 99;
  EXPECT_THROW(report_from_json(json, "r.json"), Error);
  EXPECT_THROW(read_report("/no/such/report.json"), Error);
}

TEST_F(Files, JunitIsValidAgainstTheCommonSchemaWithOneTestcasePerCell) {
  Report r = shard(0, 1);
  r.findings.push_back(finding("torchvision", "fp32", "precision", 2, 7, false));
  r.findings[0].message = "kernel <1> & \"2\" differ\x01";  // escaped, control character dropped
  const std::string xml = junit_xml(r);
  EXPECT_NE(xml.find("<testcase classname=\"nms\" name=\"torchvision/fp32/cpu\""), std::string::npos) << xml;
  EXPECT_NE(xml.find("<failure message=\"[mismatch] oracle: kernel &lt;1&gt; &amp; &quot;2&quot; differ "),
            std::string::npos) << xml;
  EXPECT_NE(xml.find("<skipped message=\"no Half kernel\"/>"), std::string::npos) << xml;
  EXPECT_NE(xml.find("not failing: [precision]"), std::string::npos) << xml;
  EXPECT_NE(xml.find("failures=\"1\" errors=\"0\" skipped=\"1\""), std::string::npos) << xml;
  std::filesystem::create_directories(dir());
  const std::string path = dir() + "/junit.xml";
  std::ofstream(path) << xml;
  const std::string command = "xmllint --noout --schema tests/reports/junit.xsd " + path + " 2>&1";
  EXPECT_EQ(std::system(command.c_str()), 0) << xml;
}

TEST(Render, MarkdownHasTheCellTableAndEachFindingsReplay) {
  const std::string md = markdown_summary(shard(0, 1));
  EXPECT_NE(md.find("## detfuzz: 1 failing finding(s)"), std::string::npos) << md;
  EXPECT_NE(md.find("| nms | torchvision | fp32 | cpu | 10 | 0.25 | 1 | **failed** |"), std::string::npos) << md;
  EXPECT_NE(md.find("unsupported: no Half kernel"), std::string::npos) << md;
  EXPECT_NE(md.find("`detfuzz replay --seed 1 --case-index 0`"), std::string::npos) << md;
}

// Gate: a baseline of two cells, one finding.
Report baseline() {
  Report r;
  r.config = {{"seed", 1}, {"ops", {"nms"}}, {"targets", {"old"}}, {"cases_per_cell", 10}};
  r.cells = {cell("old", "fp32", 10, 0.3), cell("old", "fp16", 10, 0.004)};
  r.findings = {finding("old", "fp32", "mismatch", 2, 1)};
  return r;
}

Report renamed(Report r, const std::string& target) {
  r.config["targets"] = {target};
  for (auto& c : r.cells) c.target = target;
  for (auto& f : r.findings) {
    f.target = target;
    f.signature = "nms/" + target + "/" + f.dtype + "/cpu/" + f.kind + "/oracle";
  }
  return r;
}

GateOptions rename_old_to_new() {
  GateOptions options;
  options.rename_target = {{"old", "new"}};
  return options;
}

bool has_change(const GateResult& result, const std::string& what, bool fails) {
  for (const auto& c : result.changes)
    if (c.what == what && c.fails == fails) return true;
  return false;
}

TEST(Gate, TheSameCampaignTwicePasses) {
  const GateResult result = gate(baseline(), baseline(), {});
  EXPECT_TRUE(result.pass);
  EXPECT_TRUE(result.changes.empty());
  EXPECT_TRUE(gate(baseline(), renamed(baseline(), "new"), rename_old_to_new()).pass);
}

TEST(Gate, ANewFailingFindingFailsANewPrecisionFindingIsOnlyWorse) {
  Report candidate = renamed(baseline(), "new");
  candidate.findings.push_back(finding("new", "fp16", "nan", 2, 3));
  GateResult result = gate(baseline(), candidate, rename_old_to_new());
  EXPECT_FALSE(result.pass);
  EXPECT_TRUE(has_change(result, "new failing finding", true));
  candidate.findings.back() = finding("new", "fp16", "precision", 2, 3, false);
  result = gate(baseline(), candidate, rename_old_to_new());
  EXPECT_TRUE(result.pass);
  EXPECT_TRUE(has_change(result, "new finding (not failing)", false));
}

TEST(Gate, ErrorGrowthFailsPastThePolicyAndNoiseBelowTheFloorDoesNot) {
  Report candidate = renamed(baseline(), "new");
  candidate.cells[0].max_normalized_error = 0.61;  // 0.3 -> 0.61: more than x2
  EXPECT_TRUE(has_change(gate(baseline(), candidate, rename_old_to_new()), "max error grew", true));
  candidate.cells[0].max_normalized_error = 0.59;
  EXPECT_TRUE(gate(baseline(), candidate, rename_old_to_new()).pass);
  candidate.cells[1].max_normalized_error = 0.019;  // 0.004 -> 0.019: below 2 x the 0.01 floor
  EXPECT_TRUE(gate(baseline(), candidate, rename_old_to_new()).pass);
  candidate.cells[1].max_normalized_error = 0.021;
  EXPECT_FALSE(gate(baseline(), candidate, rename_old_to_new()).pass);
  GateOptions lenient = rename_old_to_new();
  lenient.policy.max_error_growth = 10;
  EXPECT_TRUE(gate(baseline(), candidate, lenient).pass);
  candidate.cells[1].max_normalized_error = 0.004;
  candidate.cells[0].max_normalized_error = 1.2;  // crossing 1 fails whatever the growth factor
  EXPECT_TRUE(has_change(gate(baseline(), candidate, lenient), "max error crossed 1", true));
  candidate.cells[0].max_normalized_error = 0.1;
  EXPECT_TRUE(has_change(gate(baseline(), candidate, rename_old_to_new()), "max error shrank", false));
}

TEST(Gate, ACellThatBecameUnsupportedOrWentMissingFails) {
  Report candidate = renamed(baseline(), "new");
  candidate.cells[1] = cell("new", "fp16", 0, -1, "unsupported");
  EXPECT_TRUE(has_change(gate(baseline(), candidate, rename_old_to_new()), "unsupported", true));
  candidate.cells.pop_back();
  EXPECT_TRUE(has_change(gate(baseline(), candidate, rename_old_to_new()), "cell missing", true));
}

TEST(Gate, AFindingWhereTheBaselineCouldNotRunIsPrintedButFailsOnlyUnderItsPolicy) {
  Report old_library = baseline();
  old_library.cells[1] = cell("old", "fp16", 0, -1, "unsupported");
  Report candidate = renamed(baseline(), "new");
  candidate.findings.push_back(finding("new", "fp16", "nan", 2, 3));
  GateResult result = gate(old_library, candidate, rename_old_to_new());
  EXPECT_TRUE(result.pass);
  EXPECT_TRUE(has_change(result, "now supported", false));
  EXPECT_TRUE(has_change(result, "failing finding, new cell", false));
  EXPECT_FALSE(has_change(result, "new failing finding", false));

  GateOptions strict = rename_old_to_new();
  strict.policy.fail_on_findings_in_new_cells = true;
  result = gate(old_library, candidate, strict);
  EXPECT_FALSE(result.pass);
  EXPECT_TRUE(has_change(result, "failing finding, new cell", true));

  // A cell the baseline never had is as new as one it could not run.
  old_library.cells.pop_back();
  result = gate(old_library, candidate, rename_old_to_new());
  EXPECT_TRUE(has_change(result, "new cell", false));
  EXPECT_TRUE(has_change(result, "failing finding, new cell", false));
  EXPECT_TRUE(result.pass);

  // The same finding where the baseline ran is a regression.
  result = gate(baseline(), candidate, rename_old_to_new());
  EXPECT_FALSE(result.pass);
  EXPECT_TRUE(has_change(result, "new failing finding", true));
}

TEST(Gate, WithoutTheRenameTheTargetsAreDifferentCells) {
  const GateResult result = gate(baseline(), renamed(baseline(), "new"), {});
  EXPECT_FALSE(result.pass);
  EXPECT_TRUE(has_change(result, "cell missing", true));
  EXPECT_TRUE(has_change(result, "new cell", false));
}

TEST(Gate, RefusesDifferentCampaignsUnlessTold) {
  Report candidate = baseline();
  candidate.config["seed"] = 2;
  try {
    gate(baseline(), candidate, {});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::input);
    EXPECT_NE(std::string(e.what()).find("seed (1 vs 2)"), std::string::npos) << e.what();
  }
  GateOptions told;
  told.allow_config_mismatch = true;
  EXPECT_TRUE(gate(baseline(), candidate, told).pass);
}

TEST_F(Files, GatePolicyFilesAcceptTheKnownKeysOnly) {
  std::filesystem::create_directories(dir());
  const std::string path = dir() + "/policy.json";
  std::ofstream(path) << R"({"max_error_growth": 4, "error_floor": 0.1, "fail_on_unsupported": false})";
  const GatePolicy policy = read_gate_policy(path);
  EXPECT_EQ(policy.max_error_growth, 4);
  EXPECT_EQ(policy.error_floor, 0.1);
  EXPECT_FALSE(policy.fail_on_unsupported);
  EXPECT_TRUE(policy.fail_on_new_findings);
  EXPECT_FALSE(policy.fail_on_findings_in_new_cells);
  std::ofstream(path) << R"({"fail_on_findings_in_new_cells": true})";
  EXPECT_TRUE(read_gate_policy(path).fail_on_findings_in_new_cells);
  std::ofstream(path) << R"({"max_error_grwoth": 4})";
  try {
    read_gate_policy(path);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'max_error_grwoth'"), std::string::npos) << e.what();
  }
  std::ofstream(path) << R"({"error_floor": -1})";
  EXPECT_THROW(read_gate_policy(path), Error);
}

}  // namespace
}  // namespace detfuzz::reports
