// detfuzz's own kernels (kernels/native/): the NMS block boundaries, a clean campaign on every
// native target, and `list` saying why CUDA is unavailable. The device comes from
// DETFUZZ_TEST_DEVICE (default cpu, the host emulation; scripts/gpu-check.sh sets cuda).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <fstream>

#include <nlohmann/json.hpp>

#include "corpus/case_json.h"
#include "fuzz/ops/op_harness.h"
#include "support/run_binary.h"
#include "support/scratch_dir.h"

namespace detfuzz {
namespace {

Device test_device() {
  const char* device = std::getenv("DETFUZZ_TEST_DEVICE");
  return device && std::string(device) == "cuda" ? Device::cuda : Device::cpu;
}

// A chain of boxes two wide, each overlapping the next by one (IoU 1/3 > 0.3) and touching
// the one after (IoU 0), in score order; with `lead`, an isolated box first. NMS keeps every
// other box of the chain, so suppressions cross every 64-box block boundary: without the lead
// the kept box 64 suppresses 65, with it the kept box 63 suppresses 64 (a row of block 0
// removing a column of block 1).
NmsProblem chain(std::int64_t n, bool lead) {
  NmsProblem p;
  p.iou_threshold = 0.3;
  for (std::int64_t i = 0; i < n; ++i) {
    const double x = lead && i == 0 ? -10.0 : static_cast<double>(i);
    p.boxes.push_back({x, 0, x + 2, 1});
    p.scores.push_back(static_cast<double>(n - i));  // distinct and exact: <= 4097 in fp32, <= 129 in bf16
  }
  return p;
}

std::vector<double> expected_keep(std::int64_t n, bool lead) {
  std::vector<double> keep;
  for (std::int64_t i = 0; i < n; ++i)
    if ((lead && (i == 0 || i % 2 == 1)) || (!lead && i % 2 == 0)) keep.push_back(static_cast<double>(i));
  return keep;
}

TEST(NativeNms, KeepsEveryOtherBoxOfAChainAcrossTheBlockBoundaries) {
  const Device device = test_device();
  const auto registry = fuzz::default_registry({});
  const fuzz::OpHarness* nms = registry.find("nms");
  ASSERT_NE(nms, nullptr);
  if (!nms->availability("native", device).available)
    GTEST_SKIP() << nms->availability("native", device).reason;
  for (std::int64_t n : {1, 2, 63, 64, 65, 127, 128, 129, 4095, 4096, 4097})
    for (bool lead : {false, true})
      for (DType dtype : {DType::fp16, DType::bf16, DType::fp32, DType::fp64}) {
        if (n > 129 && (dtype == DType::fp16 || dtype == DType::bf16)) continue;  // coordinates past exact integers
        const nlohmann::json input = corpus::to_json(chain(n, lead));
        const fuzz::Evaluation evaluation = nms->evaluate(input, "native", dtype, device);
        SCOPED_TRACE(::testing::Message() << "n = " << n << (lead ? " after a lone box" : "") << ", "
                                          << dtype_name(dtype));
        EXPECT_TRUE(evaluation.judgement.consistent())
            << (evaluation.judgement.verdicts.empty() ? "" : evaluation.judgement.verdicts[0].message);
        ASSERT_EQ(evaluation.judgement.outputs.size(), 1u);
        EXPECT_EQ(evaluation.judgement.outputs[0].values, expected_keep(n, lead));
        EXPECT_EQ(evaluation.judgement.outputs[0].dtype, "int64");
      }
}

// native:fma is the host emulation compiled with FMA contraction (what nvcc --fmad=true does
// on the device). It must really contract (else it proves nothing), and stay correct.
class NativeFma : public ::testing::Test {
 protected:
  void SetUp() override {
    registry_ = std::make_unique<fuzz::Registry>(fuzz::default_registry({}));
    const fuzz::OpHarness* box_iou = registry_->find("box_iou");
    const auto targets = box_iou->target_names();
    if (std::find(targets.begin(), targets.end(), "native:fma") == targets.end())
      GTEST_SKIP() << "native:fma is not built here (x86-64 GCC/Clang only)";
    if (!box_iou->availability("native:fma", Device::cpu).available)
      GTEST_SKIP() << box_iou->availability("native:fma", Device::cpu).reason;
  }
  std::unique_ptr<fuzz::Registry> registry_;
};

TEST_F(NativeFma, ContractsRoiAlignArithmeticSoSomeFp64OutputsDiffer) {
  const fuzz::OpHarness* roi_align = registry_->find("roi_align");
  int differing = 0;
  for (int i = 0; i < 200 && differing == 0; ++i) {
    fuzz::CaseRequest request;
    request.target = "native";
    request.dtype = DType::fp64;
    request.case_seed = 0xf3a0000u + static_cast<std::uint64_t>(i);
    request.generator_size = 50;
    const nlohmann::json input = roi_align->generated_input(request);
    const auto plain = roi_align->evaluate(input, "native", DType::fp64, Device::cpu);
    const auto fused = roi_align->evaluate(input, "native:fma", DType::fp64, Device::cpu);
    EXPECT_TRUE(fused.judgement.consistent()) << fused.side_by_side;
    if (plain.output.dump() != fused.output.dump()) ++differing;
  }
  EXPECT_GT(differing, 0) << "the FMA build computed exactly what the plain build did: nothing was contracted";
}

TEST_F(NativeFma, BoxIouStaysSymmetricWhenItsAreasCouldBeFused) {
  // Found by native:fma: with `area_a + area_b - inter` fused, IoU(a, b) != IoU(b, a) here.
  const fuzz::OpHarness* box_iou = registry_->find("box_iou");
  const nlohmann::json input = corpus::to_json(BoxIouProblem{{{0, 0, 4, 0.5}}, {{0, 0, 0.683051586151123, 1.25390625}}});
  const auto judgement = box_iou->judge_json(input, "native:fma", DType::fp32, Device::cpu);
  EXPECT_TRUE(judgement.consistent()) << judgement.verdicts[0].message;
}

class NativeCli : public testing::ScratchDirTest,
                  public ::testing::WithParamInterface<std::string> {};

INSTANTIATE_TEST_SUITE_P(Targets, NativeCli, ::testing::Values("native", "native:fma"),
                         [](const auto& info) { return info.param == "native" ? "Plain" : "FmaContracted"; });

TEST_P(NativeCli, EveryNativeTargetRunsACleanCampaign) {
  const std::string device = test_device() == Device::cuda ? "cuda" : "cpu";
  if (GetParam() == "native:fma" && device == "cuda") GTEST_SKIP() << "native:fma is host emulation only";
  testing::Result listing = testing::detfuzz("list");
  if (listing.output.find("target " + GetParam() + ":") == std::string::npos ||
      listing.output.find("this CPU has no FMA") != std::string::npos)
    GTEST_SKIP() << GetParam() << " is not built or not runnable here";
  testing::Result r = testing::detfuzz("run --targets " + GetParam() + " --devices " + device +
                                       " --cases 300 --progress none --report " + dir());
  ASSERT_EQ(r.status, 0) << r.output;
  std::ifstream file(dir_ / "report.json");
  const nlohmann::json report = nlohmann::json::parse(file);
  ASSERT_EQ(report["cells"].size(), 20u);  // nms, box_iou, regression_loss, roi_align, roi_pool x 4 dtypes
  for (const auto& cell : report["cells"]) {
    EXPECT_EQ(cell["target"], GetParam());
    EXPECT_EQ(cell["status"], "ok") << cell.dump();
    EXPECT_EQ(cell["cases"], 300u) << cell.dump();
  }
  for (const auto& finding : report["findings"])  // only fp32-range overflows of the accumulate type
    EXPECT_FALSE(finding["fails"].get<bool>()) << finding.dump().substr(0, 2000);
}

class NativeList : public testing::ScratchDirTest {};

TEST_F(NativeList, ListSaysWhyCudaIsUnavailable) {
  testing::Result r = testing::detfuzz("list --json");
  ASSERT_EQ(r.status, 0) << r.output;
  const nlohmann::json listing = nlohmann::json::parse(r.output);
  int native_targets = 0;
  for (const auto& op : listing["ops"])
    for (const auto& target : op["targets"]) {
      if (target["name"] != "native") continue;
      ++native_targets;
      EXPECT_TRUE(target["devices"]["cpu"]["available"].get<bool>());
      const auto& cuda = target["devices"]["cuda"];
      if (!cuda["available"].get<bool>()) {
        const std::string reason = cuda["reason"];
        EXPECT_TRUE(reason.find("GPU") != std::string::npos || reason.find("CUDA") != std::string::npos) << reason;
      }
    }
  EXPECT_EQ(native_targets, 5);
}

}  // namespace
}  // namespace detfuzz
