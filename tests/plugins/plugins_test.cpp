// The user's own kernels: a plugin library (tests/plugins/test_ops.cpp) loaded with --load,
// torchvision's Python ops exported as TorchScript (scripts/export_torchscript.py), each
// bound with --bind to an op family and fuzzed like any target.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "fuzz/ops/op_harness.h"
#include "kernels/target.h"
#include "model/error.h"
#include "support/run_binary.h"
#include "support/scratch_dir.h"

namespace {

namespace fs = std::filesystem;
using detfuzz::testing::detfuzz;
using detfuzz::testing::Result;

const std::string kPlugin = DETFUZZ_TEST_PLUGIN;
const std::string kScripts = DETFUZZ_TORCHSCRIPT_DIR;

std::string load() { return "--load " + kPlugin + " "; }

class Plugins : public detfuzz::testing::ScratchDirTest {
 protected:
  nlohmann::json report() const {
    std::ifstream file(dir_ / "report.json");
    return nlohmann::json::parse(file);
  }
  std::map<std::string, std::vector<nlohmann::json>> findings_by_target() const {
    std::map<std::string, std::vector<nlohmann::json>> by_target;
    const nlohmann::json json = report();  // not report()["findings"]: the temporary would die
    for (const auto& finding : json["findings"])
      by_target[finding["target"].get<std::string>()].push_back(finding);
    return by_target;
  }
};

TEST_F(Plugins, CorrectNmsAndRoiAlignProduceNoFindingOver10000CasesEach) {
  // 2,500 cases in each of the four dtypes: 10,000 per op, in worker processes that load the
  // plugin themselves (--load/--bind travel to them).
  Result r = detfuzz("run " + load() +
                     "--bind nms=detfuzz_test::nms --bind roi_align=detfuzz_test::roi_align --ops nms,roi_align "
                     "--targets detfuzz_test::nms,detfuzz_test::roi_align --dtypes fp16,bf16,fp32,fp64 --cases 2500 "
                     "--progress none --report " + dir());
  ASSERT_EQ(r.status, 0) << r.output;
  nlohmann::json json = report();
  EXPECT_EQ(json["findings"].size(), 0u) << json["findings"].dump(1).substr(0, 3000);
  std::map<std::string, std::uint64_t> cases_by_op;
  for (const auto& cell : json["cells"]) {
    EXPECT_EQ(cell["status"], "ok") << cell.dump();
    cases_by_op[cell["op"]] += cell["cases"].get<std::uint64_t>();
  }
  EXPECT_EQ(cases_by_op["nms"], 10000u);
  EXPECT_EQ(cases_by_op["roi_align"], 10000u);
  EXPECT_NE(json["environment"]["plugin_libraries"].get<std::string>().find("detfuzz_test_plugin"), std::string::npos);
  EXPECT_NE(json["environment"]["bindings"].get<std::string>().find("nms=detfuzz_test::nms"), std::string::npos);
}

TEST_F(Plugins, WrongTwinsAreCaughtMinimizedAndReplayable) {
  const std::string binds =
      load() + "--bind nms=detfuzz_test::nms_never_visits_last_box "
               "--bind roi_align=detfuzz_test::roi_align_ignores_aligned_offset ";
  Result r = detfuzz("run " + binds + "--ops nms,roi_align --targets "
                     "detfuzz_test::nms_never_visits_last_box,detfuzz_test::roi_align_ignores_aligned_offset "
                     "--dtypes fp32 --cases 300 --progress none --report " + dir());
  ASSERT_EQ(r.status, 1) << r.output;
  auto findings = findings_by_target();
  ASSERT_EQ(findings.count("detfuzz_test::nms_never_visits_last_box"), 1u) << r.output;
  ASSERT_EQ(findings.count("detfuzz_test::roi_align_ignores_aligned_offset"), 1u) << r.output;
  for (const auto& [target, list] : findings) {
    std::size_t failing = 0;
    for (const auto& finding : list) {
      if (!finding["fails"].get<bool>()) continue;  // e.g. the flaw seen where fp32 would overflow
      ++failing;
      EXPECT_EQ(finding["kind"], "mismatch") << finding.dump().substr(0, 2000);
      // Minimized: a box the loop never reaches needs one box; a wrong offset one RoI.
      EXPECT_EQ(finding["size"], 1u) << target << ": " << finding.dump().substr(0, 2000);
      EXPECT_LE(finding["size"].get<std::size_t>(), finding["original_size"].get<std::size_t>());
    }
    EXPECT_EQ(failing, 1u) << target;
  }
  // The stored case replays with the same bindings, and says what is missing without them.
  const std::string case_file = findings["detfuzz_test::nms_never_visits_last_box"].front()["case_file"].get<std::string>();
  ASSERT_TRUE(fs::exists(case_file)) << case_file;
  Result replayed = detfuzz("replay " + binds + case_file);
  EXPECT_EQ(replayed.status, 0) << replayed.output;
  Result unbound = detfuzz("replay " + case_file);
  EXPECT_EQ(unbound.status, 2) << unbound.output;
  EXPECT_NE(unbound.output.find("--bind nms="), std::string::npos) << unbound.output;
}

TEST_F(Plugins, SchemaMismatchIsRefusedWithBothSchemasSideBySide) {
  Result r = detfuzz("list " + load() + "--bind nms=detfuzz_test::nms_int_threshold");
  ASSERT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("does not match the nms contract"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("float iou_threshold"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("int iou_threshold"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("arg 2"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("<- differs"), std::string::npos) << r.output;
  // The first two arguments agree: only the third row is marked.
  EXPECT_EQ(r.output.find("<- differs"), r.output.rfind("<- differs")) << r.output;
  // A roi_align op bound to nms: every row but the first two differs.
  Result wrong_family = detfuzz("run " + load() + "--bind nms=detfuzz_test::roi_align --cases 1 --report " + dir());
  EXPECT_EQ(wrong_family.status, 2) << wrong_family.output;
  EXPECT_NE(wrong_family.output.find("bool aligned"), std::string::npos) << wrong_family.output;
  EXPECT_FALSE(fs::exists(dir_ / "report.json")) << "nothing should run with a bad binding";
}

TEST_F(Plugins, LoadAndBindErrorsNameTheProblemAndExit2) {
  struct Case {
    std::string arguments, expected;
  };
  const std::string not_a_library = dir() + "/not-a-library.so";
  fs::create_directories(dir_);
  std::ofstream(not_a_library) << "plain text\n";
  const std::vector<Case> cases = {
      {"--load /nonexistent/libops.so", "no such file"},
      {"--load " + not_a_library, "dlopen failed"},
      {load() + "--bind nonsense=detfuzz_test::nms", "'nonsense' is not an op family that takes bindings"},
      {load() + "--bind matcher=detfuzz_test::nms", "'matcher' is not an op family"},
      {load() + "--bind nms=detfuzz_test::no_such_op", "no loaded library registers detfuzz_test::no_such_op"},
      {"--bind nms=detfuzz_test::nms", "no loaded library registers detfuzz_test::nms"},
      {load() + "--bind nms", "no FAMILY= before the op"},
      {load() + "--bind nms=nms_v2", "is not NS::OP"},
      {load() + "--bind nms=detfuzz_test::nms --bind nms=detfuzz_test::nms", "bound twice"},
      {"--bind box_iou=script:/nonexistent/box_iou.pt", "does not exist"},
      {"--bind box_iou=script:" + not_a_library, "torch::jit::load"},
      {"--bind box_iou=script:" + kScripts + "/box_iou.pt:no_method", "has no method 'no_method'"},
  };
  for (const auto& c : cases) {
    Result r = detfuzz("list " + c.arguments);
    EXPECT_EQ(r.status, 2) << c.arguments << "\n" << r.output;
    EXPECT_NE(r.output.find(c.expected), std::string::npos) << c.arguments << "\n" << r.output;
  }
}

TEST_F(Plugins, ListShowsBoundTargetsAndTheContracts) {
  Result r = detfuzz("list --json " + load() + "--bind nms=detfuzz_test::nms --bind box_iou=script:" + kScripts +
                     "/box_iou.pt");
  ASSERT_EQ(r.status, 0) << r.output;
  nlohmann::json listing = nlohmann::json::parse(r.output);
  std::set<std::string> targets;
  for (const auto& op : listing["ops"])
    for (const auto& target : op["targets"]) targets.insert(op["name"].get<std::string>() + "/" + target["name"].get<std::string>());
  EXPECT_TRUE(targets.count("nms/detfuzz_test::nms"));
  EXPECT_TRUE(targets.count("box_iou/script:box_iou.pt"));
  EXPECT_EQ(listing["bind_contracts"]["roi_pool"],
            "roi_pool(Tensor input, Tensor rois, float spatial_scale, int pooled_height, int pooled_width) "
            "-> (Tensor, Tensor)");
}

// torchvision's own Python logic (TorchScript) against detfuzz's ATen ports of it, on the
// same generated inputs: outputs must agree bit for bit.
class TorchScriptExports : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    detfuzz::kernels::KernelConfig config;
    for (const char* family : {"box_iou", "box_area", "generalized_box_iou", "batched_nms", "box_coder"})
      config.bindings.push_back(std::string(family) + "=script:" + kScripts + "/" + family + ".pt");
    config.bindings.push_back("giou_loss=script:" + kScripts + "/generalized_box_iou_loss.pt");
    registry_ = new detfuzz::fuzz::Registry(detfuzz::fuzz::default_registry(config));
  }
  static void TearDownTestSuite() { delete registry_; }
  static detfuzz::fuzz::Registry* registry_;

  // The ops' first `cases` generated inputs in `dtype`, on the script target and on `port`.
  static std::vector<std::string> disagreements(const std::string& op_name, const std::string& script,
                                                const std::string& port, detfuzz::DType dtype, int cases) {
    const detfuzz::fuzz::OpHarness* op = registry_->find(op_name);
    EXPECT_NE(op, nullptr) << op_name;
    if (!op) return {};
    std::vector<std::string> differing;
    for (int i = 0; i < cases; ++i) {
      detfuzz::fuzz::CaseRequest request;
      request.target = port;
      request.dtype = dtype;
      request.case_seed = 0x5eed0000u + static_cast<std::uint64_t>(i);
      request.generator_size = i % 101;
      request.max_boxes = 48;
      const nlohmann::json input = op->generated_input(request);
      auto scripted = op->evaluate(input, script, dtype, detfuzz::Device::cpu);
      auto ported = op->evaluate(input, port, dtype, detfuzz::Device::cpu);
      if (scripted.output.dump() != ported.output.dump())
        differing.push_back(input.dump().substr(0, 400) + "\n script: " + scripted.output.dump().substr(0, 400) +
                            "\n port:   " + ported.output.dump().substr(0, 400));
    }
    return differing;
  }
};

detfuzz::fuzz::Registry* TorchScriptExports::registry_ = nullptr;

TEST_F(TorchScriptExports, AgreeBitForBitWithTheAtenPortsOfTheSameFunctions) {
  struct Pair {
    std::string op, script, port;
  };
  const std::vector<Pair> pairs = {
      {"box_iou", "script:box_iou.pt", "aten"},
      {"box_area", "script:box_area.pt", "aten"},
      {"generalized_box_iou", "script:generalized_box_iou.pt", "torchvision"},
      {"giou_loss", "script:generalized_box_iou_loss.pt", "torchvision"},
      {"box_coder", "script:box_coder.pt", "torchvision"},
      {"batched_nms", "script:batched_nms.pt", "torchvision"},
  };
  for (const auto& pair : pairs)
    for (detfuzz::DType dtype : {detfuzz::DType::fp16, detfuzz::DType::bf16, detfuzz::DType::fp32}) {
      auto differing = disagreements(pair.op, pair.script, pair.port, dtype, pair.op == "batched_nms" ? 40 : 150);
      EXPECT_TRUE(differing.empty()) << pair.op << " " << detfuzz::dtype_name(dtype) << ": " << differing.size()
                                     << " inputs differ, e.g.\n" << (differing.empty() ? "" : differing.front());
    }
}

TEST_F(Plugins, TorchScriptTargetRunsInACampaignThroughWorkers) {
  Result r = detfuzz("run --bind box_iou=script:" + kScripts + "/box_iou.pt --ops box_iou --targets script:box_iou.pt "
                     "--dtypes fp32,fp64 --cases 200 --progress none --report " + dir());
  ASSERT_TRUE(r.status == 0 || r.status == 1) << r.output;
  nlohmann::json json = report();
  ASSERT_EQ(json["cells"].size(), 2u);
  for (const auto& cell : json["cells"]) {
    EXPECT_EQ(cell["target"], "script:box_iou.pt");
    EXPECT_EQ(cell["cases"], 200u) << cell.dump();
    EXPECT_NE(cell["status"], "unsupported") << cell.dump();
  }
}

}  // namespace

namespace {

std::string faulty_nms_run(const std::string& fault, const std::string& flags, const std::string& dir) {
  return "DETFUZZ_TEST_FAULT=" + fault + " " + detfuzz::testing::binary() + " run " + load() +
         "--bind nms=detfuzz_test::nms_faulty --ops nms --targets detfuzz_test::nms_faulty --dtypes fp32 --jobs 1 "
         "--minimize-budget 1s --progress none " + flags + " --report " + dir;
}

// A case slower than its cell's calibrated limit (300 ms against a 50 ms floor over
// microsecond cases) is a suspect, run again with the ceiling: it answers, so it is no hang,
// on the first cases of a cell and after.
TEST_F(Plugins, ACorrectCaseSlowerThanItsCalibratedLimitIsNeverCalledHung) {
  Result r = detfuzz::testing::shell(faulty_nms_run("slow:5", "--cases 300 --case-timeout 3s", dir()));
  ASSERT_EQ(r.status, 0) << r.output;
  nlohmann::json json = report();
  EXPECT_EQ(json["findings"].size(), 0u) << json["findings"].dump(1).substr(0, 3000);
  ASSERT_EQ(json["cells"].size(), 1u);
  EXPECT_EQ(json["cells"][0]["cases"], 300);
}

// A kernel that hangs on a share of its inputs: the first hang pays the ceiling, the later
// ones the cell's calibrated limit; each is an occurrence of one hang finding whose message
// says which limit it ran past.
TEST_F(Plugins, LaterHangsOfACellCostItsCalibratedLimitNotTheCeiling) {
  Result r = detfuzz::testing::shell(faulty_nms_run("hang:10", "--cases 120 --case-timeout 2s", dir()));
  ASSERT_EQ(r.status, 1) << r.output;
  nlohmann::json json = report();
  std::vector<nlohmann::json> hangs;
  for (const auto& f : json["findings"])
    if (f["kind"] == "hang") hangs.push_back(f);
  ASSERT_EQ(hangs.size(), 1u) << json["findings"].dump(1).substr(0, 3000);
  const int occurrences = hangs[0]["occurrences"].get<int>();
  EXPECT_GT(occurrences, 5);
  EXPECT_EQ(json["cells"][0]["cases"], 120);
  // Its minimized case was judged under the calibrated limit, not the 2 s ceiling.
  const std::string message = hangs[0]["message"];
  EXPECT_NE(message.find("the cell's first such case ran past the full"), std::string::npos) << message;
  EXPECT_EQ(message.find("no answer within 2"), std::string::npos) << message;
}

}  // namespace
