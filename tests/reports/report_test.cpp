#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "reports/html.h"
#include "reports/render.h"
#include "model/error.h"
#include "reports/report.h"

namespace detfuzz::reports {
namespace {

Report sample() {
  Report report;
  report.config = {{"seed", 7}};
  report.environment = {{"torch", "1.13.0"}};
  report.elapsed_s = 1.5;
  report.cells.push_back({"nms", "torchvision", "fp32", "cpu", "", 100, 1, CellStatus::failed, "", -1, {}, 1.0, {{"mismatch", 3}}, {}, {}, {}});
  report.cells.push_back({"nms", "torchvision", "fp16", "cpu", "", 0, 0, CellStatus::unsupported, "no Half kernel", -1, {}, 0, {}, {}, {}, {}});
  FindingRecord finding;
  finding.op = "nms";
  finding.target = "torchvision";
  finding.dtype = "fp32";
  finding.device = "cpu";
  finding.kind = "mismatch";
  finding.property = "oracle";
  finding.signature = "nms/torchvision/fp32/cpu/mismatch/oracle";
  finding.message = "box 1 is kept, but ...";
  finding.input = {{"boxes", {{0, 0, 1, 1}}}};
  finding.replay = "detfuzz run ...";
  report.findings.push_back(finding);
  return report;
}

TEST(Report, JsonCarriesTheContractFields) {
  nlohmann::json json = to_json(sample());
  EXPECT_EQ(json["schema_version"], kSchemaVersion);
  for (const char* key : {"environment", "config", "elapsed_s", "cells", "findings", "partial"})
    EXPECT_TRUE(json.contains(key)) << key;
  const auto& cell = json["cells"][0];
  for (const char* key : {"op", "target", "dtype", "device", "cases", "findings", "status", "max_normalized_error"})
    EXPECT_TRUE(cell.contains(key)) << key;
  EXPECT_TRUE(cell["max_normalized_error"].is_null());
  EXPECT_EQ(json["cells"][1]["reason"], "no Half kernel");
  const auto& finding = json["findings"][0];
  for (const char* key : {"op", "target", "dtype", "device", "kind", "signature", "seed", "found_after_cases",
                          "found_after_s", "size", "input", "replay"})
    EXPECT_TRUE(finding.contains(key)) << key;
  EXPECT_EQ(json["total_cases"], 100);
  EXPECT_TRUE(finding["case_seed"].is_string());  // jq reads numbers as doubles
}

TEST(Report, FailingFindingsDecideTheExitStatus) {
  Report report = sample();
  EXPECT_TRUE(report.has_failing_finding());
  report.findings[0].fails = false;
  EXPECT_FALSE(report.has_failing_finding());
}

TEST(Report, WritesAtomicallyIntoANewDirectory) {
  const auto dir = std::filesystem::temp_directory_path() / ("detfuzz-report-test-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::string path = write_report(sample(), (dir / "nested").string());
  std::ifstream file(path);
  nlohmann::json json = nlohmann::json::parse(file);
  EXPECT_EQ(json["config"]["seed"], 7);
  for (const auto& entry : std::filesystem::directory_iterator(dir / "nested"))
    EXPECT_EQ(entry.path().filename(), "report.json");  // no temporary left behind
  std::filesystem::remove_all(dir);
}

// A directory that cannot be written is the user's to fix (exit 2), so it is detfuzz::Error
// of kind usage, naming the path, like every other bad input.
TEST(Report, UnwritableDirectoryIsAUsageErrorNamingThePath) {
  try {
    write_report(sample(), "/proc/detfuzz-cannot-write-here");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::usage);
    EXPECT_NE(std::string(e.what()).find("/proc/detfuzz-cannot-write-here"), std::string::npos);
  }
}

TEST(Report, SummaryShowsCellsFindingsAndReplay) {
  std::ostringstream out;
  print_summary(sample(), out);
  const std::string text = out.str();
  EXPECT_NE(text.find("unsupported: no Half kernel"), std::string::npos);
  EXPECT_NE(text.find("[mismatch] nms/torchvision/fp32/cpu"), std::string::npos);
  EXPECT_NE(text.find("replay: detfuzz run"), std::string::npos);
  EXPECT_NE(text.find("failing"), std::string::npos);
}

// A finding's size is counted in its op's unit: RoIs for roi_align, not boxes.
TEST(Report, MinimizedSizesNameTheirOpsUnit) {
  Report report = sample();
  report.findings[0].size = 1;
  report.findings[0].original_size = 40;
  EXPECT_EQ(minimized_size(report.findings[0]), "1 boxes (from 40)");
  report.findings[0].op = "roi_align";
  EXPECT_EQ(minimized_size(report.findings[0]), "1 RoIs (from 40)");
  report.findings[0].op = "deform_conv2d";
  std::ostringstream out;
  print_summary(report, out);
  EXPECT_NE(out.str().find("1 output elements (from 40), seen in"), std::string::npos) << out.str();
  EXPECT_NE(markdown_summary(report).find("minimized to 1 output elements (from 40)"), std::string::npos);
}

// Findings recorded in the order they were found: a precision one first, then one outside
// the contract, then the failing one. Every format puts the failing one first and the
// outside-contract one last, under its own label.
TEST(Report, EveryFormatListsFailingFindingsFirstAndOutsideTheContractApart) {
  Report report = sample();
  FindingRecord failing = report.findings[0];
  failing.message = "FAILING-ONE";
  FindingRecord precision = failing;
  precision.kind = "precision";
  precision.fails = false;
  precision.message = "PRECISION-ONE";
  FindingRecord outside = failing;
  outside.kind = "dtype_overflow";
  outside.fails = false;
  outside.outside_contract = "boxes[0] = [-1, 0, 1, 1] has a negative coordinate";
  outside.message = "OUTSIDE-ONE";
  report.findings = {precision, outside, failing};

  std::ostringstream console;
  print_summary(report, console);
  for (const std::string& text : {console.str(), markdown_summary(report), html_report(report)}) {
    const auto failing_at = text.find("FAILING-ONE"), precision_at = text.find("PRECISION-ONE"),
               outside_at = text.find("OUTSIDE-ONE");
    ASSERT_NE(failing_at, std::string::npos) << text;
    EXPECT_LT(failing_at, precision_at) << text;
    EXPECT_LT(precision_at, outside_at) << text;
    EXPECT_NE(text.find("outside the", precision_at), std::string::npos) << "labelled apart: " << text;
    EXPECT_NE(text.find(outside.outside_contract), std::string::npos) << text;
  }
  // report.json keeps the label, and reading it back keeps it too.
  nlohmann::json json = to_json(report);
  EXPECT_EQ(json["findings"][1]["outside_contract"], outside.outside_contract);
  EXPECT_EQ(json["findings"][0]["outside_contract"], "");
}

}  // namespace
}  // namespace detfuzz::reports
