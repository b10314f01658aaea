// The binary as users and CI call it: exit statuses, report.json, errors on bad input.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <set>
#include <sstream>

extern char** environ;

#include <nlohmann/json.hpp>

#include "fuzz/cli/cli.h"
#include "fuzz/runner.h"
#include "fuzz/wire_format.h"
#include "model/error.h"
#include "support/run_binary.h"
#include "support/scratch_dir.h"

namespace {

namespace fs = std::filesystem;

using detfuzz::testing::binary;
using detfuzz::testing::detfuzz;
using detfuzz::testing::Result;
using detfuzz::testing::shell;

// Starts `args` as our own child (output discarded) and returns its pid.
pid_t spawn_process(std::vector<std::string> args);

class Cli : public detfuzz::testing::ScratchDirTest {
 protected:
  // A campaign (`run ARGUMENTS --jobs 2`) beside a CPU hog; its report, none of whose
  // findings may be a hang.
  nlohmann::json loaded_campaign_without_hangs(const std::string& arguments) {
    pid_t hog = spawn_process({"/bin/sh", "-c", "while :; do :; done"});
    EXPECT_GT(hog, 0);
    Result r = detfuzz("run " + arguments + " --jobs 2 --progress none --report " + dir());
    if (hog > 0) {
      ::kill(hog, SIGKILL);
      ::waitpid(hog, nullptr, 0);
    }
    EXPECT_TRUE(r.status == 0 || r.status == 1) << r.output;
    nlohmann::json json = report();
    for (const auto& f : json["findings"]) EXPECT_NE(f["kind"], "hang") << f.dump(1).substr(0, 2000);
    return json;
  }
  nlohmann::json report() const {
    std::ifstream file(dir_ / "report.json");
    return nlohmann::json::parse(file);
  }
};

TEST_F(Cli, CleanCampaignExitsZeroAndWritesTheReport) {
  Result r = detfuzz("run --ops nms --targets torchvision --dtypes fp16,fp32,fp64 --cases 50 --progress none --report " + dir());
  ASSERT_EQ(r.status, 0) << r.output;
  nlohmann::json json = report();
  EXPECT_EQ(json["schema_version"], 1);
  EXPECT_EQ(json["config"]["seed"], 1);
  EXPECT_EQ(json["config"]["cases_per_cell"], 50);
  EXPECT_NE(json["environment"]["torch"].get<std::string>(), "");
  EXPECT_NE(json["environment"]["torchvision"].get<std::string>(), "unavailable");
  // The allocator CMake linked (tcmalloc where libtcmalloc-minimal4 is installed) is the one
  // the process runs on, and the report says so.
  const std::string allocator = json["environment"]["allocator"];
  EXPECT_NE(allocator.find(std::string(DETFUZZ_EXPECTED_ALLOCATOR) == "tcmalloc" ? "libtcmalloc" : "libc.so"),
            std::string::npos)
      << allocator;
  ASSERT_EQ(json["cells"].size(), 3u);
  EXPECT_EQ(json["cells"][0]["status"], "unsupported");  // torchvision 0.14 CPU nms: no Half
  EXPECT_EQ(json["cells"][1]["cases"], 50);
  EXPECT_EQ(json["cells"][1]["status"], "ok");
  EXPECT_NE(r.output.find("report: "), std::string::npos);
  // The kernel and the oracle ran in a worker process: their times came back over the pipe.
  EXPECT_GT(json["cells"][1]["profile_s"]["kernel"].get<double>(), 0.0);
  EXPECT_GT(json["cells"][1]["profile_s"]["oracle"].get<double>(), 0.0);
  EXPECT_GE(json["cells"][1]["profile_s"]["other"].get<double>(), 0.0);
  EXPECT_EQ(r.output.find("where the time went"), std::string::npos);  // only with --profile
}

// Without a GPU (this machine; CI's) every cuda cell of a target that can run there is
// unsupported and says the device is missing, whichever LibTorch: CPU-only Debian 1.13 or
// PyPI's CUDA 13.0 build. The campaign completes and exits 0: nothing ran, nothing failed.
TEST_F(Cli, EveryCudaCellWithoutAGpuSaysNoCudaDevice) {
  Result listing = detfuzz("list --json");
  ASSERT_EQ(listing.status, 0) << listing.output;
  const nlohmann::json environment = nlohmann::json::parse(listing.output)["environment"];
  if (environment["cuda"] == "available") GTEST_SKIP() << "this machine has a GPU";
  EXPECT_EQ(environment["cuda"].get<std::string>().rfind("no CUDA device", 0), 0u) << environment.dump(2);
  EXPECT_NE(environment["torch_cuda"].get<std::string>(), "");
  EXPECT_NE(environment["torchvision_cuda"].get<std::string>(), "");
  Result r = detfuzz("run --targets torchvision,aten,native --devices cuda --cases 2 --progress none --report " + dir());
  ASSERT_EQ(r.status, 0) << r.output;
  const nlohmann::json json = report();
  ASSERT_GT(json["cells"].size(), 20u);
  for (const auto& cell : json["cells"]) {
    EXPECT_EQ(cell["status"], "unsupported") << cell.dump(2);
    EXPECT_EQ(cell["reason"].get<std::string>().rfind("no CUDA device", 0), 0u) << cell.dump(2);
  }
}

TEST_F(Cli, ProfilePrintsEachCellsShareOfTimeByPhase) {
  Result r = detfuzz("run --ops box_iou --dtypes fp32 --cases 40 --progress none --profile --report " + dir());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("where the time went"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("box_iou/aten/fp32"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("minimiza"), std::string::npos) << r.output;
}

TEST_F(Cli, FailingFindingExitsOneWithAMinimalReplayableCase) {
  // torchvision 0.14.1's CPU roi_align accumulates Half samples in Half: a bin whose samples
  // sum past 65504 returns -inf though its average fits. Seed 1 meets one within 500 cases.
  Result r = detfuzz("run --ops roi_align --targets torchvision --dtypes fp16 --cases 500 --progress none --report " +
                     dir());
  ASSERT_EQ(r.status, 1) << r.output;
  nlohmann::json json = report();
  bool found = false;
  for (const auto& finding : json["findings"]) {
    if (finding["kind"] != "dtype_overflow") continue;
    found = true;
    EXPECT_TRUE(finding["fails"].get<bool>());
    EXPECT_EQ(finding["outside_contract"], "");
    EXPECT_LE(finding["size"].get<int>(), 1);
    EXPECT_NE(finding["replay"].get<std::string>().find("--seed 1"), std::string::npos);
    // What, where and why: the intermediate, its exact value and fp16's limit.
    const std::string message = finding["message"];
    EXPECT_NE(message.find("the sum of a bin's samples"), std::string::npos) << message;
    EXPECT_NE(message.find("in fp16"), std::string::npos) << message;
    EXPECT_NE(message.find("largest finite 65504"), std::string::npos) << message;
    EXPECT_EQ(finding["details"]["overflowing_intermediate"]["dtype"], "fp16");
    EXPECT_EQ(finding["details"]["error"], "unbounded");
    EXPECT_FALSE(finding["details"]["intermediates_in_range"].get<bool>());
  }
  EXPECT_TRUE(found) << json["findings"].dump(2);
}

TEST_F(Cli, BoxIouInsideTheDocumentedContractRaisesNoFailingFinding) {
  // torchvision subtracts rb - lt in fp16 before _upcast: only negative coordinates, outside
  // the documented 0 <= x1 < x2, can make it overflow. The default domain stays inside.
  Result inside = detfuzz("run --ops box_iou --targets aten --dtypes fp16 --cases 500 --progress none --report " + dir());
  EXPECT_EQ(inside.status, 0) << inside.output;
  const nlohmann::json inside_report = report();
  for (const auto& finding : inside_report["findings"]) {
    EXPECT_FALSE(finding["fails"].get<bool>()) << finding.dump(2);
    EXPECT_EQ(finding["outside_contract"], "") << finding.dump(2);
  }
  // --hostile goes outside: the overflow is found, named, listed apart and fails only when asked.
  const std::string hostile = "run --ops box_iou --targets aten --dtypes fp16 --cases 500 --hostile --progress none";
  Result outside = detfuzz(hostile + " --report " + dir());
  EXPECT_EQ(outside.status, 0) << outside.output;
  bool found = false;
  const nlohmann::json outside_report = report();
  for (const auto& finding : outside_report["findings"]) {
    if (finding["kind"] != "dtype_overflow") continue;
    found = true;
    EXPECT_FALSE(finding["fails"].get<bool>());
    EXPECT_NE(finding["outside_contract"].get<std::string>().find("0 <= x1"), std::string::npos) << finding.dump(2);
    EXPECT_NE(finding["message"].get<std::string>().find("rb - lt"), std::string::npos) << finding.dump(2);
  }
  EXPECT_TRUE(found) << outside.output;
  EXPECT_NE(outside.output.find("outside the documented contract"), std::string::npos) << outside.output;
  EXPECT_EQ(detfuzz(hostile + " --fail-outside-contract --report " + dir()).status, 1);
}

TEST_F(Cli, PrecisionFindingsFailOnlyWhenAsked) {
  Result shown = detfuzz("run --ops box_iou --dtypes bf16 --cases 100 --progress none --report " + dir());
  EXPECT_EQ(shown.status, 0) << shown.output;
  EXPECT_NE(shown.output.find("[precision, not failing]"), std::string::npos) << shown.output;
  Result failed = detfuzz("run --ops box_iou --dtypes bf16 --cases 100 --progress none --fail-on precision --report " + dir());
  EXPECT_EQ(failed.status, 1) << failed.output;
}

TEST_F(Cli, SameSeedReproducesTheFindingsExactly) {
  auto findings = [&](const std::string& seed) {
    Result r = detfuzz("run --ops box_iou --dtypes fp16,bf16 --cases 150 --progress none --seed " + seed + " --report " + dir());
    EXPECT_LE(r.status, 1) << r.output;
    nlohmann::json json = report()["findings"];
    for (auto& f : json) {
      f.erase("found_after_s");  // timings are the only things allowed to differ
      f.erase("minimize_s");
    }
    return json;
  };
  nlohmann::json first = findings("3");
  EXPECT_FALSE(first.empty());
  EXPECT_EQ(first, findings("3"));
}

TEST_F(Cli, JobsChangeHowFastNotWhatIsFound) {
  auto campaign = [&](const std::string& jobs) {
    Result r = detfuzz("run --ops box_iou,nms --dtypes fp16,bf16,fp32 --cases 120 --seed 3 --progress none --profile --jobs " +
                       jobs + " --report " + dir());
    EXPECT_LE(r.status, 1) << r.output;
    EXPECT_NE(r.output.find("on " + jobs + " lane(s)"), std::string::npos) << r.output;
    nlohmann::json json = report();
    EXPECT_EQ(json["config"]["jobs"], std::stoi(jobs));
    for (auto& f : json["findings"]) {
      f.erase("found_after_s");
      f.erase("minimize_s");
    }
    for (auto& c : json["cells"]) {
      c.erase("elapsed_s");
      c.erase("profile_s");
      c.erase("cases_per_second");
    }
    return json;
  };
  nlohmann::json one = campaign("1"), two = campaign("2");
  EXPECT_FALSE(one["findings"].empty());
  EXPECT_EQ(one["findings"], two["findings"]);
  EXPECT_EQ(one["cells"], two["cells"]);
}

TEST_F(Cli, ShardsMergedCoverWhatOneRunWithTheirCasesCovers) {
  const std::string campaign = "run --ops box_iou --dtypes fp16,fp32 --progress none --seed 5 ";
  Result whole = detfuzz(campaign + "--cases 80 --report " + dir() + "/whole");
  ASSERT_LE(whole.status, 1) << whole.output;
  Result first = detfuzz(campaign + "--cases 40 --shard 0/2 --report " + dir() + "/s0");
  ASSERT_LE(first.status, 1) << first.output;
  // The second shard takes its index from a Slurm job array's environment.
  Result second = shell("SLURM_ARRAY_TASK_ID=3 SLURM_ARRAY_TASK_MIN=2 SLURM_ARRAY_TASK_COUNT=2 " + binary() + " " +
                        campaign + "--cases 40 --report " + dir() + "/s1");
  ASSERT_LE(second.status, 1) << second.output;
  Result merged = detfuzz("merge -o " + dir() + "/merged " + dir() + "/s1 " + dir() + "/s0/report.json " + dir() + "/s1");
  ASSERT_EQ(merged.status, whole.status) << merged.output;
  EXPECT_NE(merged.output.find("merged 2 part(s) from 3 report(s)"), std::string::npos) << merged.output;
  auto read = [](const std::string& path) { return nlohmann::json::parse(std::ifstream(path)); };
  const nlohmann::json a = read(dir() + "/whole/report.json"), b = read(dir() + "/merged/report.json");
  ASSERT_EQ(a["cells"].size(), b["cells"].size());
  for (std::size_t i = 0; i < a["cells"].size(); ++i) {
    EXPECT_EQ(a["cells"][i]["cases"], b["cells"][i]["cases"]);
    EXPECT_EQ(a["cells"][i]["max_normalized_error"], b["cells"][i]["max_normalized_error"]);
    EXPECT_EQ(a["cells"][i]["occurrences_by_kind"], b["cells"][i]["occurrences_by_kind"]);
  }
  std::map<std::string, int> whole_findings, merged_findings;
  for (const auto& f : a["findings"]) whole_findings[f["signature"]] = f["occurrences"];
  for (const auto& f : b["findings"]) {
    merged_findings[f["signature"]] = f["occurrences"];
    EXPECT_TRUE(fs::exists(f["case_file"].get<std::string>())) << f["case_file"];  // the union of the corpora
  }
  EXPECT_FALSE(whole_findings.empty());
  EXPECT_EQ(whole_findings, merged_findings);
  EXPECT_TRUE(fs::exists(dir() + "/merged/junit.xml"));
  EXPECT_TRUE(fs::exists(dir() + "/merged/summary.md"));
  // A Kubernetes Indexed Job says its index but not the count: that is asked for.
  Result k8s = shell("JOB_COMPLETION_INDEX=1 " + binary() + " " + campaign + "--cases 1 --report " + dir() + "/k");
  EXPECT_EQ(k8s.status, 2) << k8s.output;
  EXPECT_NE(k8s.output.find("pass --shard-count N"), std::string::npos) << k8s.output;
}

TEST_F(Cli, GateFailsAMutantCandidateAndPassesTheSameTargetTwice) {
  const std::string campaign = "run --ops roi_align --dtypes fp32 --cases 30 --progress none ";
  ASSERT_EQ(detfuzz(campaign + "--targets torchvision --report " + dir() + "/old").status, 0);
  ASSERT_EQ(detfuzz(campaign + "--targets torchvision --report " + dir() + "/again").status, 0);
  ASSERT_EQ(detfuzz(campaign + "--targets mutant:roi_align_ignores_spatial_scale --report " + dir() + "/new").status, 1);
  Result same = detfuzz("gate --baseline " + dir() + "/old --candidate " + dir() + "/again/report.json");
  EXPECT_EQ(same.status, 0) << same.output;
  EXPECT_NE(same.output.find("gate: PASS"), std::string::npos) << same.output;
  Result mutant = detfuzz("gate --baseline " + dir() + "/old --candidate " + dir() +
                          "/new --rename-target torchvision=mutant:roi_align_ignores_spatial_scale");
  EXPECT_EQ(mutant.status, 1) << mutant.output;
  EXPECT_NE(mutant.output.find("new failing finding"), std::string::npos) << mutant.output;
  EXPECT_NE(mutant.output.find("gate: FAIL"), std::string::npos) << mutant.output;
  ASSERT_EQ(detfuzz(campaign + "--targets torchvision --seed 9 --report " + dir() + "/seed9").status, 0);
  Result mismatch = detfuzz("gate --baseline " + dir() + "/old --candidate " + dir() + "/seed9");
  EXPECT_EQ(mismatch.status, 2) << mismatch.output;
  EXPECT_NE(mismatch.output.find("seed (1 vs 9)"), std::string::npos) << mismatch.output;
}

TEST_F(Cli, GateFailsACorpusCaseThatWentFromPassToFail) {
  // The corpus's RoIAlign case at spatial_scale 0.25, replayed on torchvision (passes) and on
  // the mutant that ignores spatial_scale (the same file, its target renamed).
  const std::string name = "roi_align-fp32-pass-5003f035c6e683e9.json";
  fs::create_directories(dir() + "/old");
  fs::create_directories(dir() + "/new");
  fs::copy_file("corpus/cases/" + name, dir() + "/old/" + name);
  nlohmann::json file = nlohmann::json::parse(std::ifstream("corpus/cases/" + name));
  ASSERT_EQ(file["input"]["spatial_scale"], 0.25);
  file["target"] = "mutant:roi_align_ignores_spatial_scale";
  std::ofstream(dir() + "/new/" + name) << file.dump(1);
  Result old_replay = detfuzz("replay " + dir() + "/old/" + name + " --report " + dir() + "/old-report");
  ASSERT_EQ(old_replay.status, 0) << old_replay.output;
  Result new_replay = detfuzz("replay " + dir() + "/new/" + name + " --report " + dir() + "/new-report");
  ASSERT_EQ(new_replay.status, 1) << new_replay.output;
  // A testcase per replayed case, failing where the case no longer matches its expect.
  std::stringstream junit;
  junit << std::ifstream(dir() + "/new-report/junit.xml").rdbuf();
  EXPECT_NE(junit.str().find("name=\"mutant:roi_align_ignores_spatial_scale/fp32/cpu " + name + "\""), std::string::npos)
      << junit.str();
  EXPECT_NE(junit.str().find("<failure message=\"[corpus] " + name + ": expected pass; got [mismatch]"), std::string::npos)
      << junit.str();
  Result worse = detfuzz("gate --baseline " + dir() + "/old-report --candidate " + dir() +
                         "/new-report --rename-target torchvision=mutant:roi_align_ignores_spatial_scale");
  EXPECT_EQ(worse.status, 1) << worse.output;
  EXPECT_NE(worse.output.find("new failing finding"), std::string::npos) << worse.output;
  EXPECT_NE(worse.output.find(name), std::string::npos) << worse.output;
  EXPECT_EQ(detfuzz("gate --baseline " + dir() + "/old-report --candidate " + dir() + "/old-report").status, 0);
}

TEST_F(Cli, HtmlReportRendersInAHeadlessBrowserWithEveryPicture) {
  Result run = detfuzz("run --ops nms,box_iou,roi_align --targets aten,mutant:nms_greater_equal,"
                       "mutant:roi_align_ignores_spatial_scale --dtypes fp16,fp32 --cases 60 --progress none --report " + dir());
  ASSERT_EQ(run.status, 1) << run.output;
  std::ifstream file(dir() + "/report.html");
  std::stringstream html;
  html << file.rdbuf();
  // Self-contained: nothing to fetch (no URL, no script, no external source or style).
  for (const char* forbidden : {"http:", "https:", "<script", "src=", "<link"})
    EXPECT_EQ(html.str().find(forbidden), std::string::npos) << forbidden;
  // Chromium parses and lays it out; the DOM it ends with has every part of the report.
  Result dom = shell("timeout 120 chromium --headless --no-sandbox --disable-gpu --dump-dom file://" + dir() +
                     "/report.html 2>/dev/null");
  ASSERT_EQ(dom.status, 0) << dom.output.substr(0, 2000);
  for (const char* element : {"<table id=\"cells\">", "<svg class=\"histogram\"", "<svg class=\"scatter\"",
                              "<svg class=\"boxes nms\"", "wrongly suppressed", "<svg class=\"boxes pairs\"",
                              "<svg class=\"roi roi-align\"", "<circle class=\"sample\"", "<code class=\"replay\">",
                              "<table class=\"values\">", "detfuzz replay --seed 1"})
    EXPECT_NE(dom.output.find(element), std::string::npos) << element;
}

// --repeat and --deterministic reach the worker processes (the kernels run there) and the
// report says how the kernels ran; torchvision's CPU backward kernels are deterministic, so
// three runs of each call under deterministic algorithms agree bit for bit.
TEST_F(Cli, RepeatedDeterministicRunsOfTheCpuBackwardKernelsAgreeAndTheReportSaysHowTheyRan) {
  Result r = detfuzz("run --ops roi_align_backward,ps_roi_pool_backward --targets torchvision --dtypes fp32,fp64 "
                     "--cases 60 --repeat 3 --deterministic --progress none --report " + dir());
  ASSERT_EQ(r.status, 0) << r.output;
  nlohmann::json json = report();
  EXPECT_EQ(json["environment"]["kernel_runs"], "3 per call (--repeat 3)");
  EXPECT_EQ(json["environment"]["deterministic_algorithms"], "on (--deterministic)");
  for (const auto& f : json["findings"]) EXPECT_NE(f["kind"], "nondeterministic") << f.dump(1).substr(0, 2000);
  ASSERT_EQ(json["cells"].size(), 4u);
  for (const auto& cell : json["cells"]) EXPECT_EQ(cell["cases"], 60) << cell.dump();
  Result plain = detfuzz("run --ops nms --targets torchvision --dtypes fp32 --cases 5 --progress none --report " + dir());
  ASSERT_EQ(plain.status, 0) << plain.output;
  EXPECT_EQ(report()["environment"]["kernel_runs"], "1 per call; backward ops on cuda: 2");
  EXPECT_EQ(report()["environment"]["deterministic_algorithms"], "off");
}

TEST_F(Cli, UsageErrorsExitTwoAndSayWhatToDo) {
  struct Case {
    std::string arguments, expected;
  };
  for (const Case& c : std::vector<Case>{
           {"run --ops roi_magic", "unknown op 'roi_magic'"},
           {"run --targets cudnn", "unknown target 'cudnn'"},
           {"run --dtypes fp8", "unknown dtype 'fp8'"},
           {"run --devices tpu", "unknown device 'tpu'"},
           {"run --max-boxes 100000000", "--max-boxes 100000000 is out of range"},
           {"run --jobs -3", "--jobs -3 is out of range"},
           {"run --shard 2/2", "shard 2/2 does not exist"},
           {"run --shard half", "--shard 'half' is not i/N"},
           {"merge -o /tmp/detfuzz-never /no/such/report.json", "cannot read report /no/such/report.json"},
           {"gate --baseline /no/a.json --candidate /no/b.json", "cannot read report /no/a.json"},
           {"gate --baseline /no/a.json --candidate /no/b.json --rename-target x", "is not OLD=NEW"},
           {"run --budget soon", "is not a duration"},
           {"run --fail-on everything", "unknown finding kind 'everything'"},
           {"run --cases lots", "--cases"},
           {"run --repeat 0", "--repeat"},
           {"run --repeat 1000", "--repeat"},
           {"run --cases 1 --report /proc/no-such-place", "pass a writable --report DIR"},
           {"frobnicate", "frobnicate"},
           {"replay --seed 1 --case-index 3", "needs --ops and --targets"},
           {"replay", "replay needs case files"},
           {"", "A subcommand is required"},
       }) {
    // A run writes its report somewhere harmless; other commands take no --report.
    bool add_report = c.arguments.rfind("run", 0) == 0 && c.arguments.find("--report") == std::string::npos;
    Result r = detfuzz(c.arguments + (add_report ? " --report " + dir() : ""));
    EXPECT_EQ(r.status, 2) << c.arguments << "\n" << r.output;
    EXPECT_NE(r.output.find(c.expected), std::string::npos) << c.arguments << "\n" << r.output;
  }
}

TEST_F(Cli, HelpAndListTellTheTruth) {
  Result help = detfuzz("run --help");
  EXPECT_EQ(help.status, 0);
  for (const char* option : {"--ops", "--targets", "--dtypes", "--devices", "--cases", "--budget", "--seed",
                             "--max-boxes", "--report", "--fail-on"})
    EXPECT_NE(help.output.find(option), std::string::npos) << option;
  Result list = detfuzz("list --json");
  ASSERT_EQ(list.status, 0) << list.output;
  nlohmann::json json = nlohmann::json::parse(list.output);
  std::vector<std::string> ops;
  for (const auto& op : json["ops"]) ops.push_back(op["name"]);
  EXPECT_EQ(ops, (std::vector<std::string>{"nms", "batched_nms", "box_iou", "box_area", "generalized_box_iou", "giou_loss",
                                           "box_coder", "regression_loss",
                                           "fast_rcnn_loss", "matcher", "roi_align", "roi_pool", "ps_roi_align",
                                           "ps_roi_pool", "roi_align_backward", "ps_roi_align_backward",
                                           "roi_pool_backward", "ps_roi_pool_backward", "regression_loss_backward",
                                           "giou_loss_backward", "deform_conv2d"}));
  EXPECT_NE(json["ops"][0]["targets"][0]["devices"]["cpu"]["dtypes"]["fp16"].get<std::string>().find("Half"),
            std::string::npos);
  EXPECT_EQ(json["ops"][0]["targets"][0]["devices"]["cpu"]["dtypes"]["fp32"], "supported");
  EXPECT_FALSE(json["ops"][0]["targets"][0]["devices"]["cuda"]["available"].get<bool>());
}

TEST_F(Cli, MissingTorchvisionLibraryMakesItsTargetUnavailableNotACrash) {
  Result list = detfuzz("--torchvision-lib /nonexistent/_C.so list");
  ASSERT_EQ(list.status, 0) << list.output;
  EXPECT_NE(list.output.find("unavailable: torchvision library /nonexistent/_C.so"), std::string::npos) << list.output;
  // The targets that need the library are unavailable; box_iou's ATen port and detfuzz's own
  // kernels (native) still run.
  Result run = detfuzz("--torchvision-lib /nonexistent/_C.so run --ops nms,batched_nms,roi_align,box_iou "
                       "--dtypes fp32,fp64 --cases 20 --progress none --report " + dir());
  EXPECT_EQ(run.status, 0) << run.output;
  nlohmann::json json = report();
  int ran = 0;
  for (const auto& cell : json["cells"]) {
    if (cell["op"] == "box_iou" || cell["target"].get<std::string>().rfind("native", 0) == 0)
      ran += cell["cases"].get<int>();
    else EXPECT_EQ(cell["status"], "unsupported") << cell.dump();
  }
  // box_iou's aten; native (and native:fma where built) of box_iou, nms, roi_align; 2 dtypes x 20.
  const bool fma_built = list.output.find("target native:fma") != std::string::npos;
  EXPECT_EQ(ran, (fma_built ? 7 : 4) * 40);
  EXPECT_EQ(setenv("DETFUZZ_TORCHVISION_LIB", "/also/missing.so", 1), 0);
  Result from_env = detfuzz("list");
  unsetenv("DETFUZZ_TORCHVISION_LIB");
  EXPECT_NE(from_env.output.find("/also/missing.so"), std::string::npos) << from_env.output;
}

std::string read_file(const fs::path& path) {
  std::ifstream file(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(file), {});
}

std::vector<fs::path> case_files(const fs::path& dir) {
  std::vector<fs::path> files;
  if (fs::exists(dir))
    for (const auto& entry : fs::directory_iterator(dir))
      if (entry.path().extension() == ".json") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

// A --report directory that cannot be written is the user's to fix: exit 2, the path and the
// fix named, not an internal error.
TEST_F(Cli, AnUnwritableReportDirectoryExitsTwoNamingIt) {
  Result r = detfuzz("run --ops box_area --dtypes fp32 --cases 5 --progress none --report /proc/detfuzz-cannot-write-here");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("/proc/detfuzz-cannot-write-here"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--report"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("internal error"), std::string::npos) << r.output;
}

TEST_F(Cli, RunWritesOneCaseFilePerFindingAndNamesItInTheReport) {
  Result r = detfuzz("run --ops roi_align --targets torchvision --dtypes fp16 --cases 500 --progress none --report " +
                     dir());
  ASSERT_EQ(r.status, 1) << r.output;
  nlohmann::json json = report();
  ASSERT_FALSE(json["findings"].empty());
  for (const auto& finding : json["findings"]) {
    const std::string path = finding["case_file"];
    ASSERT_TRUE(fs::exists(path)) << path;
    EXPECT_EQ(fs::path(path).parent_path(), dir_ / "corpus");
    nlohmann::json file = nlohmann::json::parse(read_file(path));
    EXPECT_EQ(file["expect"]["kind"], finding["kind"]);
    EXPECT_EQ(file["input"], finding["input"]);
    EXPECT_NE(file["origin"]["replay"].get<std::string>().find("--minimize"), std::string::npos);
  }
  EXPECT_EQ(case_files(dir_ / "corpus").size(), json["findings"].size());
  // Replaying the fresh corpus matches every expectation.
  Result replay = detfuzz("replay " + (dir_ / "corpus").string() + "/*.json");
  EXPECT_EQ(replay.status, 0) << replay.output;
  EXPECT_NE(replay.output.find("<<"), std::string::npos) << "differing elements are marked";
}

TEST_F(Cli, SameSeedGivesByteIdenticalCaseFilesAndReplayRebuildsThem) {
  const std::string run = "run --ops roi_align --targets torchvision --dtypes fp16 --cases 500 --progress none";
  ASSERT_EQ(detfuzz(run + " --report " + dir() + "/a").status, 1);
  ASSERT_EQ(detfuzz(run + " --report " + dir() + "/b").status, 1);
  auto first = case_files(dir_ / "a/corpus"), second = case_files(dir_ / "b/corpus");
  ASSERT_EQ(first.size(), second.size());
  ASSERT_FALSE(first.empty());
  for (std::size_t i = 0; i < first.size(); ++i) {
    EXPECT_EQ(first[i].filename(), second[i].filename());
    EXPECT_EQ(read_file(first[i]), read_file(second[i])) << first[i];
  }
  // The command a case file records regenerates and re-minimizes it to the same bytes.
  nlohmann::json file = nlohmann::json::parse(read_file(first[0]));
  std::string command = file["origin"]["replay"];
  command = command.substr(std::string("detfuzz ").size());
  command.replace(command.find("--corpus DIR"), 12, "--corpus " + dir() + "/c");
  Result replayed = detfuzz(command);
  EXPECT_LE(replayed.status, 1) << replayed.output;
  auto rebuilt = case_files(dir_ / "c");
  ASSERT_EQ(rebuilt.size(), 1u) << replayed.output;
  EXPECT_EQ(rebuilt[0].filename(), first[0].filename());
  EXPECT_EQ(read_file(rebuilt[0]), read_file(first[0]));
  // So does its reproduce string, without judging.
  Result reproduced = detfuzz("replay --ops roi_align --targets torchvision --dtypes fp16 --reproduce " +
                              file["origin"]["reproduce"].get<std::string>());
  EXPECT_NE(reproduced.output.find(file["input"].dump()), std::string::npos) << reproduced.output;
}

TEST_F(Cli, ReplayReportsEachFileAndTheWorstOutcome) {
  fs::create_directories(dir_);
  nlohmann::json pass = {{"format", "detfuzz-case"}, {"format_version", 1}, {"op", "nms"},
                         {"target", "torchvision"}, {"dtype", "fp32"}, {"device", "cpu"},
                         {"input", {{"boxes", {{0, 0, 3, 1}, {1, 0, 4, 1}}}, {"scores", {0.9, 0.8}}, {"iou_threshold", 0.5}}},
                         {"expect", {{"result", "pass"}}}};
  nlohmann::json wrong = pass;
  wrong["expect"] = {{"result", "fail"}, {"kind", "mismatch"}, {"property", "oracle"}};
  nlohmann::json elsewhere = pass;
  elsewhere["device"] = "cuda";
  std::ofstream(dir_ / "pass.json") << pass.dump();
  std::ofstream(dir_ / "wrong.json") << wrong.dump();
  std::ofstream(dir_ / "cuda.json") << elsewhere.dump();
  std::ofstream(dir_ / "broken.json") << pass.dump().substr(0, 40);

  EXPECT_EQ(detfuzz("replay " + dir() + "/pass.json").status, 0);
  Result mismatch = detfuzz("replay " + dir() + "/wrong.json");
  EXPECT_EQ(mismatch.status, 1) << mismatch.output;
  EXPECT_NE(mismatch.output.find("FAIL"), std::string::npos);
  EXPECT_EQ(detfuzz("replay " + dir() + "/cuda.json").status, 77);
  Result all = detfuzz("replay " + dir() + "/broken.json " + dir() + "/pass.json " + dir() + "/wrong.json");
  EXPECT_EQ(all.status, 2) << all.output;
  EXPECT_NE(all.output.find("broken.json: not valid JSON"), std::string::npos) << all.output;
  EXPECT_NE(all.output.find("PASS " + dir() + "/pass.json"), std::string::npos) << "later files still run";
  EXPECT_NE(all.output.find("1 matched, 1 did not, 0 skipped, 1 unreadable"), std::string::npos) << all.output;
}

TEST_F(Cli, EvalPrintsTheKernelOrTheOracleAsJson) {
  fs::create_directories(dir_);
  nlohmann::json file = {{"format", "detfuzz-case"}, {"format_version", 1}, {"op", "box_iou"},
                         {"target", "aten"}, {"dtype", "fp16"}, {"device", "cpu"},
                         {"input", {{"boxes1", {{0, 0, 2, 2}}}, {"boxes2", {{1, 1, 3, 3}}}}},
                         {"expect", {{"result", "pass"}}}};
  std::ofstream(dir_ / "iou.json") << file.dump();
  Result oracle = detfuzz("eval " + dir() + "/iou.json --target oracle");
  ASSERT_EQ(oracle.status, 0) << oracle.output;
  nlohmann::json answer = nlohmann::json::parse(oracle.output);
  EXPECT_DOUBLE_EQ(answer["output"]["iou"][0].get<double>(), 1.0 / 7);
  Result kernel = detfuzz("eval " + dir() + "/iou.json");
  ASSERT_EQ(kernel.status, 0) << kernel.output;
  nlohmann::json output = nlohmann::json::parse(kernel.output);
  EXPECT_EQ(output["output"]["dtype"], "fp32");
  EXPECT_EQ(output["verdicts"].size(), 0u);
  EXPECT_EQ(detfuzz("eval " + dir() + "/iou.json --target cudnn").status, 2);
  file["device"] = "cuda";
  std::ofstream(dir_ / "cuda.json") << file.dump();
  EXPECT_EQ(detfuzz("eval " + dir() + "/cuda.json").status, 77);
  EXPECT_EQ(detfuzz("eval " + dir() + "/cuda.json --target oracle").status, 0);
}

// 500 x 500 IoUs: an answer of several MiB from the worker, more than its answer pipe holds
// (1 MiB), which it writes while the campaign waits for the doorbell.
TEST_F(Cli, EvalAnswersLargerThanTheWorkerPipeArriveWhole) {
  fs::create_directories(dir_);
  nlohmann::json boxes = nlohmann::json::array();
  for (int i = 0; i < 500; ++i) boxes.push_back({i % 37, i % 23, i % 37 + 1 + i % 11, i % 23 + 1 + i % 13});
  nlohmann::json file = {{"format", "detfuzz-case"}, {"format_version", 1}, {"op", "box_iou"},
                         {"target", "aten"}, {"dtype", "fp32"}, {"device", "cpu"},
                         {"input", {{"boxes1", boxes}, {"boxes2", boxes}}}, {"expect", {{"result", "pass"}}}};
  std::ofstream(dir_ / "big.json") << file.dump();
  Result kernel = detfuzz("eval " + dir() + "/big.json");
  ASSERT_EQ(kernel.status, 0) << kernel.output.substr(0, 2000);
  EXPECT_GT(kernel.output.size(), std::size_t{1} << 21);
  nlohmann::json output = nlohmann::json::parse(kernel.output);
  ASSERT_EQ(output["output"]["values"].size(), 250000u);
  EXPECT_EQ(output["output"]["shape"], nlohmann::json::parse("[500, 500]"));
  EXPECT_DOUBLE_EQ(output["output"]["values"][0].get<double>(), 1.0) << "a box with itself";
  EXPECT_EQ(output["verdicts"].size(), 0u) << output["verdicts"].dump();
}

TEST_F(Cli, CorpusAddCanonicalizesValidCasesAndRejectsBrokenOnes) {
  fs::create_directories(dir_);
  nlohmann::json file = {{"format", "detfuzz-case"}, {"format_version", 1}, {"op", "nms"},
                         {"target", "torchvision"}, {"dtype", "fp32"}, {"device", "cpu"},
                         {"input", {{"boxes", nlohmann::json::array()}, {"scores", nlohmann::json::array()}, {"iou_threshold", 0.5}}},
                         {"expect", {{"result", "pass"}}}};
  std::ofstream(dir_ / "hand.json") << file.dump();
  Result added = detfuzz("corpus-add " + dir() + "/hand.json --corpus " + dir() + "/corpus");
  ASSERT_EQ(added.status, 0) << added.output;
  auto stored = case_files(dir_ / "corpus");
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_EQ(stored[0].filename().string().rfind("nms-fp32-pass-", 0), 0u);
  file["input"].erase("scores");
  std::ofstream(dir_ / "bad.json") << file.dump();
  Result rejected = detfuzz("replay " + dir() + "/bad.json");
  EXPECT_EQ(rejected.status, 2);
  EXPECT_NE(rejected.output.find("scores"), std::string::npos) << rejected.output;
}

TEST_F(Cli, CrashingAndHangingKernelsBecomeMinimizedFindingsAndTheCampaignGoesOn) {
  // mutant:nms_crash_7x3 raises SIGSEGV on a 7x3 box, mutant:nms_hang_5x9 never returns on a
  // 5x9 box (kernels/mutants/nms_mutants.cpp): roughly 1 case in 300 each.
  Result r = detfuzz("run --ops nms --targets mutant:nms_crash_7x3,mutant:nms_hang_5x9 --dtypes fp32 --cases 700 "
                     "--case-timeout 1s --progress none --report " + dir());
  ASSERT_EQ(r.status, 1) << r.output;
  nlohmann::json json = report();
  for (const auto& cell : json["cells"]) EXPECT_EQ(cell["cases"], 700) << "every case ran, before and after";
  std::map<std::string, nlohmann::json> by_kind;
  for (const auto& f : json["findings"])
    if (f["kind"] == "crash" || f["kind"] == "hang") {
      EXPECT_EQ(by_kind.count(f["kind"]), 0u) << "each distinct death is recorded once";
      by_kind[f["kind"]] = f;
    }
  ASSERT_EQ(by_kind.count("crash"), 1u) << json["findings"].dump(2);
  ASSERT_EQ(by_kind.count("hang"), 1u) << json["findings"].dump(2);
  EXPECT_EQ(by_kind["crash"]["property"], "SIGSEGV");
  // Each death is pinned on the case that caused it (the answers before it came back first).
  EXPECT_TRUE(by_kind["crash"]["reproducible"].get<bool>());
  EXPECT_TRUE(by_kind["hang"]["reproducible"].get<bool>());
  EXPECT_GT(by_kind["crash"]["occurrences"].get<int>(), 1);
  EXPECT_EQ(by_kind["crash"]["input"]["boxes"], nlohmann::json::parse("[[0.0, 0.0, 7.0, 3.0]]"));
  EXPECT_EQ(by_kind["hang"]["input"]["boxes"], nlohmann::json::parse("[[0.0, 0.0, 5.0, 9.0]]"));
  // Their case files replay: the crash is recognized in a fresh worker, not suffered.
  Result replay = detfuzz("replay --case-timeout 1s " + by_kind["crash"]["case_file"].get<std::string>() + " " +
                          by_kind["hang"]["case_file"].get<std::string>());
  EXPECT_EQ(replay.status, 0) << replay.output;
}

// A worker answers every case of a batch on a line of its own, also when it cannot read the
// batch's cell: the campaign counts one answer per case (fuzz/worker_server.cpp).
TEST_F(Cli, WorkerAnswersEveryCaseOfABatchItCannotRead) {
  fs::create_directories(dir_);
  std::ofstream(dir_ / "batches.jsonl")
      << R"({"cmd":"runs","op":"no_such_op","target":"x","dtype":"fp32","device":"cpu","cases":[["1",2],["3",4]]})"
      << "\n"
      << R"({"cmd":"runs","op":"box_area","cases":[["5",6],["7",8],["9",10]]})" << "\n"
      << R"({"cmd":"runs","op":"box_area","target":"aten","dtype":"fp32","device":"cpu","cases":[["11",12]]})"
      << "\n";
  Result r = detfuzz::testing::shell("(" + detfuzz::testing::binary() + " worker < " + dir() + "/batches.jsonl 2>/dev/null)");
  ASSERT_EQ(r.status, 0) << r.output;
  std::vector<std::string> answers;
  std::istringstream lines(r.output);
  for (std::string line; std::getline(lines, line);) answers.push_back(line);
  ASSERT_EQ(answers.size(), 6u) << r.output;
  for (int i = 0; i < 2; ++i)
    EXPECT_EQ(nlohmann::json::parse(answers[i]).value("error", ""), "unknown op no_such_op") << answers[i];
  for (int i = 2; i < 5; ++i)
    EXPECT_NE(nlohmann::json::parse(answers[i]).value("error", "").find("target"), std::string::npos) << answers[i];
  // The case that ran passed: its answer is the short line, with the times it took.
  const std::optional<detfuzz::fuzz::CaseOutcome> ran = detfuzz::fuzz::outcome_from_short_line(answers[5]);
  ASSERT_TRUE(ran) << answers[5];
  EXPECT_GT(ran->times.judge_s, 0) << answers[5];
  EXPECT_GT(ran->times.generation_s, 0) << answers[5];
}

pid_t spawn_process(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  return pid;
}

// Starts detfuzz with `arguments` as our own child (output discarded) and returns its pid.
pid_t spawn_detfuzz(const std::vector<std::string>& arguments) {
  const char* binary = std::getenv("DETFUZZ_BINARY");
  std::vector<std::string> args{binary ? binary : "build/detfuzz"};
  args.insert(args.end(), arguments.begin(), arguments.end());
  return spawn_process(args);
}

TEST_F(Cli, SigtermWritesAPartialReportAndExits143) {
  pid_t pid = spawn_detfuzz({"run", "--budget", "120s", "--progress", "none", "--report", dir()});
  ASSERT_GT(pid, 0);
  // Cases are under way once a batch has been written ahead (a loaded machine takes its
  // time to start workers and probe every cell); then a moment for some to finish.
  for (int i = 0; i < 600 && !fs::exists(dir_ / "workers" / "inflight-0.jsonl"); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  ASSERT_EQ(::kill(pid, SIGTERM), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 143);
  nlohmann::json json = report();
  EXPECT_TRUE(json["partial"].get<bool>());
  EXPECT_GT(json["total_cases"].get<int>(), 0);
}

std::string finding_signature(const nlohmann::json& file) {
  return file["op"].get<std::string>() + "/" + file["dtype"].get<std::string>() + "/" +
         file["expect"]["kind"].get<std::string>() + "/" + file["expect"]["property"].get<std::string>();
}

// kill -9 at random moments, 20 times, into one report folder: every file on disk parses,
// and every finding stored before a kill is still stored after it (as the same file, or as
// a smaller case of the same signature, which replaces it by design).
TEST_F(Cli, KillNineAtAnyMomentLosesAndCorruptsNothing) {
  fs::create_directories(dir_);
  std::set<std::string> seen;
  std::uint64_t state = 42;
  for (int round = 0; round < 20; ++round) {
    pid_t pid = spawn_detfuzz({"run", "--ops", "box_iou,roi_align", "--dtypes", "fp16,fp32", "--budget", "30s",
                               "--seed", std::to_string(round % 4), "--progress", "none", "--report", dir()});
    ASSERT_GT(pid, 0);
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    std::this_thread::sleep_for(std::chrono::milliseconds(300 + (state >> 33) % 1700));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    std::set<std::string> now;
    for (const auto& entry : fs::recursive_directory_iterator(dir_)) {
      if (!entry.is_regular_file()) continue;
      const std::string text = read_file(entry.path());
      if (entry.path().extension() == ".jsonl") {  // the write-ahead: one message (a batch of cases) per line
        std::istringstream lines(text);
        for (std::string line; std::getline(lines, line);)
          EXPECT_NO_THROW(nlohmann::json::parse(line)) << entry.path() << " is torn after round " << round;
        continue;
      }
      if (entry.path().extension() != ".json") continue;
      EXPECT_NO_THROW(nlohmann::json::parse(text)) << entry.path() << " is torn after round " << round;
      if (entry.path().parent_path() == dir_ / "corpus") {
        nlohmann::json file = nlohmann::json::parse(text);
        now.insert(finding_signature(file));
      }
    }
    for (const auto& signature : seen) EXPECT_TRUE(now.count(signature)) << signature << " was lost in round " << round;
    seen.insert(now.begin(), now.end());
  }
  // A last campaign runs to its end: on a loaded machine every killed one may have died before
  // its first finding, and "nothing lost" over nothing would prove nothing.
  pid_t pid = spawn_detfuzz({"run", "--ops", "box_iou", "--dtypes", "fp16", "--budget", "4s", "--seed", "0",
                             "--progress", "none", "--report", dir()});
  ASSERT_GT(pid, 0);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  std::set<std::string> final_signatures;
  for (const auto& entry : fs::directory_iterator(dir_ / "corpus")) {
    nlohmann::json file = nlohmann::json::parse(read_file(entry.path()));
    final_signatures.insert(finding_signature(file));
  }
  for (const auto& signature : seen) EXPECT_TRUE(final_signatures.count(signature)) << signature << " was lost";
  EXPECT_FALSE(final_signatures.empty()) << "the campaigns found nothing to keep";
}

// The pids whose parent is `parent` (from /proc).
std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> children;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    const auto after_name = line.rfind(')');
    if (after_name == std::string::npos) continue;
    std::istringstream fields(line.substr(after_name + 2));
    char state = 0;
    pid_t ppid = 0;
    fields >> state >> ppid;
    if (ppid == parent && state != 'Z') children.push_back(static_cast<pid_t>(std::stol(name)));
  }
  return children;
}

bool running(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const auto after_name = line.rfind(')');
  return after_name != std::string::npos && line.size() > after_name + 2 && line[after_name + 2] != 'Z';
}

// A campaign's worker processes come from its lane's zygote; kill -9 of the campaign takes
// the zygote and every worker with it (PR_SET_PDEATHSIG down the chain).
TEST_F(Cli, KillNineOfACampaignLeavesNoZygoteAndNoWorker) {
  pid_t pid = spawn_detfuzz({"run", "--ops", "nms", "--dtypes", "fp32", "--budget", "60s", "--jobs", "1",
                             "--progress", "none", "--report", dir()});
  ASSERT_GT(pid, 0);
  std::vector<pid_t> zygotes, workers;
  for (int i = 0; i < 300 && workers.empty(); ++i) {  // up to 30 s on a loaded machine
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    zygotes = children_of(pid);
    for (pid_t zygote : zygotes)
      for (pid_t worker : children_of(zygote)) workers.push_back(worker);
  }
  ASSERT_FALSE(workers.empty()) << "no worker forked from a zygote of the campaign";
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  std::vector<pid_t> left;
  for (int i = 0; i < 100; ++i) {
    left.clear();
    for (pid_t p : zygotes) if (running(p)) left.push_back(p);
    for (pid_t p : workers) if (running(p)) left.push_back(p);
    if (left.empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(left.empty()) << left.size() << " processes outlived the campaign";
}

// Calibrated timeouts on a loaded machine: two lanes on this machine's cores with a CPU hog
// beside them, the largest cases there are (batched_nms up to 10,001 boxes, roi_align on
// large maps) and every cell's first cases: a correct target is never called hung.
TEST_F(Cli, CorrectTargetsAreNeverCalledHungOnALoadedMachine) {
  nlohmann::json json = loaded_campaign_without_hangs("--ops nms,batched_nms,roi_align --dtypes fp32 --cases 300");
  for (const auto& cell : json["cells"])
    if (cell["status"] == "ok") {
      EXPECT_EQ(cell["cases"], 300) << cell.dump().substr(0, 500);
    }
}

// The largest NMS cases there are (case 100 has the largest generator size: sets up to
// 30,000 boxes, about a second each) beside a CPU hog:
// their limits come from the cost model, pairs of boxes, so none is called hung.
TEST_F(Cli, ThirtyThousandBoxNmsOnALoadedMachineIsNeverCalledHung) {
  nlohmann::json json =
      loaded_campaign_without_hangs("--ops nms --targets torchvision --dtypes fp32 --cases 101 --max-boxes 30000");
  ASSERT_EQ(json["cells"].size(), 1u);
  EXPECT_EQ(json["cells"][0]["cases"], 101);
}

TEST(Duration, ParsesUnitsAndRejectsTheRest) {
  EXPECT_EQ(detfuzz::cli::parse_duration("90", "--budget"), 90);
  EXPECT_EQ(detfuzz::cli::parse_duration("90s", "--budget"), 90);
  EXPECT_EQ(detfuzz::cli::parse_duration("1500ms", "--budget"), 1.5);
  EXPECT_EQ(detfuzz::cli::parse_duration("5m", "--budget"), 300);
  EXPECT_EQ(detfuzz::cli::parse_duration("1h", "--budget"), 3600);
  EXPECT_THROW(detfuzz::cli::parse_duration("-5s", "--budget"), detfuzz::Error);
  EXPECT_THROW(detfuzz::cli::parse_duration("5 parsecs", "--budget"), detfuzz::Error);
  EXPECT_THROW(detfuzz::cli::parse_duration("", "--budget"), detfuzz::Error);
}

}  // namespace
