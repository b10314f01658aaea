// The LibTorch side: our dtype rounding agrees with c10's, the torchvision library loads
// and its nms runs through the dispatcher, the ATen box_iou port keeps torchvision's contract,
// --deterministic sets LibTorch's switch.
#include <ATen/Context.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>
#include <torch/csrc/api/include/torch/version.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/factories.h"
#include "kernels/run_policy.h"
#include "kernels/target.h"
#include "model/error.h"

namespace detfuzz::kernels {
namespace {

float float_from_bits(std::uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

// Every float is exact in double, so rounding it to fp16/bf16 directly and through c10's
// float conversions (round-to-nearest-even) must agree bit for bit.
RC_GTEST_PROP(DTypeRounding, AgreesWithC10HalfAndBFloat16, (std::uint32_t bits)) {
  const float value = float_from_bits(bits);
  RC_PRE(std::isfinite(value));
  const double half = static_cast<float>(c10::Half(value));
  const double bfloat = static_cast<float>(c10::BFloat16(value));
  const double ours_half = round_to(DType::fp16, value);
  const double ours_bfloat = round_to(DType::bf16, value);
  RC_ASSERT(half == ours_half || (std::isinf(half) && half == ours_half));
  RC_ASSERT(bfloat == ours_bfloat);
}

TEST(DTypeRounding, AgreesWithC10OnTiesAndTheEdgesOfTheRange) {
  for (double v : {2049.0, 2051.0, 65504.0, 65519.0, 65520.0, 1e-8, 6.0e-8, 3.0e-5, 0.1, -0.1})
    EXPECT_EQ(round_to(DType::fp16, v), static_cast<float>(c10::Half(static_cast<float>(v)))) << v;
}

const Target<NmsProblem>& torchvision_nms() {
  static const auto targets = nms_targets({});
  return targets.at(0);
}

TEST(TorchvisionNms, LoadsFromThePackageAndReportsItsVersion) {
  const LibraryStatus& status = load_torchvision({});
  ASSERT_TRUE(status.loaded) << status.error;
  EXPECT_NE(status.path.find("torchvision"), std::string::npos);
  EXPECT_NE(status.version, "unknown");
  EXPECT_TRUE(torchvision_nms().availability(Device::cpu).available);
  EXPECT_FALSE(torchvision_nms().availability(Device::cuda).available);
  EXPECT_FALSE(torchvision_nms().availability(Device::cuda).reason.empty());
}

TEST(TorchvisionNms, RunsThroughTheDispatcher) {
  NmsProblem problem{{{0, 0, 10, 10}, {1, 1, 11, 11}, {50, 50, 60, 60}}, {0.5, 0.9, 0.7}, 0.5};
  for (DType dtype : {DType::fp32, DType::fp64}) {
    HostTensor keep = torchvision_nms().run(problem, dtype, Device::cpu).at(0);
    EXPECT_EQ(keep.dtype, "int64");
    EXPECT_EQ(keep.device, "cpu");
    EXPECT_EQ(keep.values, (std::vector<double>{1, 2}));
  }
}

TEST(TorchvisionNms, MissingHalfKernelIsUnsupportedNotAnException) {
  NmsProblem problem{{{0, 0, 1, 1}}, {0.5}, 0.5};
  try {
    torchvision_nms().run(problem, DType::fp16, Device::cpu);
    FAIL() << "torchvision 0.14's CPU nms has no Half kernel";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::unsupported);
    EXPECT_NE(std::string(e.what()).find("Half"), std::string::npos);
  }
}

TEST(TorchvisionNms, EmptyInputGivesAnEmptyInt64Output) {
  HostTensor keep = torchvision_nms().run(NmsProblem{}, DType::fp32, Device::cpu).at(0);
  EXPECT_EQ(keep.shape, (std::vector<std::int64_t>{0}));
  EXPECT_EQ(keep.dtype, "int64");
}

const Target<BoxIouProblem>& aten_box_iou() {
  static const auto targets = box_iou_targets({});
  return targets.at(0);
}

TEST(AtenBoxIou, MatchesHandComputedValues) {
  BoxIouProblem problem{{{0, 0, 2, 2}, {0, 0, 4, 4}}, {{1, 1, 3, 3}, {0, 0, 2, 2}, {9, 9, 10, 10}}};
  HostTensor iou = aten_box_iou().run(problem, DType::fp64, Device::cpu).at(0);
  EXPECT_EQ(iou.shape, (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(iou.dtype, "fp64");
  EXPECT_DOUBLE_EQ(iou.values[0], 1.0 / 7);
  EXPECT_EQ(iou.values[1], 1.0);
  EXPECT_EQ(iou.values[2], 0.0);
  EXPECT_EQ(iou.values[4], 0.25);
}

TEST(AtenBoxIou, UpcastsLowPrecisionToFp32LikeTorchvision) {
  BoxIouProblem problem{{{0, 0, 2, 2}}, {{1, 1, 3, 3}}};
  EXPECT_EQ(aten_box_iou().run(problem, DType::fp16, Device::cpu).at(0).dtype, "fp32");
  EXPECT_EQ(aten_box_iou().run(problem, DType::bf16, Device::cpu).at(0).dtype, "fp32");
}

TEST(AtenBoxIou, SubtractsIntersectionWidthsInFp16BeforeUpcasting) {
  // The width 73688 does not exist in fp16: torchvision's `rb - lt` overflows before
  // _upcast, so the IoU of this box with itself is NaN in fp16 and 1 in fp32.
  BoxIouProblem problem{{{-16376, -8188, 57312, 8188}}, {{-16376, -8188, 57312, 8188}}};
  EXPECT_TRUE(std::isnan(aten_box_iou().run(problem, DType::fp16, Device::cpu).at(0).values[0]));
  EXPECT_EQ(aten_box_iou().run(problem, DType::fp32, Device::cpu).at(0).values[0], 1.0);
}

// The declaration the verdicts judge range by (Target::arithmetic), pinned against the
// kernel: rb - lt in the storage dtype (above), the areas in fp32: two boxes of 90,000 and
// 45,000 px, past fp16's 65504, still give their exact IoU of 0.5 in fp16.
TEST(AtenBoxIou, DeclaresRbMinusLtInTheStorageDtypeAndComputesTheAreasInFp32) {
  EXPECT_TRUE(aten_box_iou().arithmetic.in_storage("rb - lt"));
  EXPECT_FALSE(aten_box_iou().arithmetic.in_storage("area"));
  BoxIouProblem large{{{0, 0, 300, 300}}, {{0, 0, 300, 150}}};
  EXPECT_EQ(aten_box_iou().run(large, DType::fp16, Device::cpu).at(0).values[0], 0.5);
}

TEST(AtenBoxIou, EmptySetsGiveEmptyMatrices) {
  BoxIouProblem problem{{}, {{0, 0, 1, 1}}};
  HostTensor iou = aten_box_iou().run(problem, DType::fp32, Device::cpu).at(0);
  EXPECT_EQ(iou.shape, (std::vector<std::int64_t>{0, 1}));
}

// torchvision 0.14.1's roi_align accumulates in T (its declared arithmetic "*"): 16 samples
// of -2048 sum to -32768 and average back exactly, 16 of -4096 sum past fp16 to -inf.
TEST(TorchvisionRoiAlign, AccumulatesHalfInHalfAsDeclared) {
  static const auto targets = roi_align_targets({});
  const auto tv = std::find_if(targets.begin(), targets.end(), [](const auto& t) { return t.name == "torchvision"; });
  ASSERT_NE(tv, targets.end());
  EXPECT_TRUE(tv->arithmetic.in_storage("the sum of a bin's samples"));
  auto run = [&](double value) {
    RoiAlignProblem p{{1, 1, 1, 1, {value}}, {{0, 0, 0, 0, 0}}, 1.0, 1, 1, 4, false};
    return tv->run(p, DType::fp16, Device::cpu).at(0).values.at(0);
  };
  EXPECT_EQ(run(-2048), -2048);
  EXPECT_EQ(run(-4096), -INFINITY);
}

}  // namespace
}  // namespace detfuzz::kernels

namespace detfuzz::kernels {
namespace {

const Target<BatchedNmsProblem>& batched_target(const std::string& name) {
  static const auto targets = batched_nms_targets({});
  for (const auto& target : targets)
    if (target.name == name) return target;
  throw std::runtime_error("no batched_nms target " + name);
}

// Box 0 of class 0 at [0,0,1,1]; box 1 of class 1 at [-2,-2,-1,-1], which the coordinate
// trick's offset (max + 1) * 1 = 2 moves exactly onto box 0; then zero-area fillers of
// class 0 up to `count` boxes (IoU 0 with everything).
BatchedNmsProblem trick_breaker(std::size_t count) {
  BatchedNmsProblem problem{{{0, 0, 1, 1}, {-2, -2, -1, -1}}, {0.9, 0.8}, {0, 1}, 0.5, std::nullopt, false, -1};
  while (problem.boxes.size() < count) {
    problem.boxes.push_back({0, 0, 0, 0});
    problem.scores.push_back(0.1);
    problem.classes.push_back(0);
  }
  return problem;
}

bool keeps(const HostTensor& keep, double index) {
  return std::find(keep.values.begin(), keep.values.end(), index) != keep.values.end();
}

TEST(TorchvisionBatchedNms, UsesTheCoordinateTrickUpTo1000BoxesOnCpuAndOneNmsPerClassAbove) {
  const auto& switching = batched_target("torchvision");
  EXPECT_FALSE(keeps(switching.run(trick_breaker(1000), DType::fp32, Device::cpu).at(0), 1));
  EXPECT_TRUE(keeps(switching.run(trick_breaker(1001), DType::fp32, Device::cpu).at(0), 1));
  EXPECT_FALSE(keeps(batched_target("torchvision:coordinate_trick").run(trick_breaker(1001), DType::fp32, Device::cpu).at(0), 1));
  EXPECT_TRUE(keeps(batched_target("torchvision:vanilla").run(trick_breaker(10), DType::fp32, Device::cpu).at(0), 1));
}

// torchvision/ops/boxes.py batched_nms, release by release: 0.14.1 switches to one nms per
// class above 4,000 coordinates on CPU and 20,000 on CUDA; pytorch/vision#8925 (0.22) moved
// CUDA's to 100,000. The port follows the loaded library's release.
TEST(TorchvisionBatchedNms, SwitchesStrategyAtTheSizeOfEachRelease) {
  EXPECT_EQ(batched_nms_vanilla_above({0, 14, 1}, Device::cpu), 4000);
  EXPECT_EQ(batched_nms_vanilla_above({0, 14, 1}, Device::cuda), 20000);
  EXPECT_EQ(batched_nms_vanilla_above({0, 21, 0}, Device::cuda), 20000);
  EXPECT_EQ(batched_nms_vanilla_above({0, 22, 0}, Device::cuda), 100000);
  EXPECT_EQ(batched_nms_vanilla_above({0, 26, 0}, Device::cpu), 4000);
  EXPECT_EQ(batched_nms_vanilla_above({0, 26, 0}, Device::cuda), 100000);
  EXPECT_EQ(batched_nms_vanilla_above({1, 0, 0}, Device::cuda), 100000);
}

TEST(TorchvisionRelease, ParsesWheelDebianAndShortVersionsAndRejectsOtherText) {
  const auto wheel = parse_torchvision_release("0.26.0+cu130");
  ASSERT_TRUE(wheel);
  EXPECT_EQ(wheel->minor, 26);
  EXPECT_TRUE(wheel->at_least(0, 22));
  const auto debian = parse_torchvision_release("0.14.1a0");
  ASSERT_TRUE(debian);
  EXPECT_EQ(debian->patch, 1);
  EXPECT_FALSE(debian->at_least(0, 15));
  EXPECT_TRUE(debian->at_least(0, 14));
  EXPECT_EQ(parse_torchvision_release("0.3")->patch, 0);
  EXPECT_FALSE(parse_torchvision_release("unknown"));
}

// torchvision's BoxCoder.decode_single in fp16: LibTorch 1.13 has no Half clamp_max on the
// CPU, so the cell is unsupported there; 2.x runs it, in fp16 throughout, and
// pred_h = exp(7 / 5) * 16376 = 66405 overflows where the true corners (8188 +- 33203) fit.
TEST(TorchvisionBoxCoder, Fp16DecodeIsUnsupportedBeforeTorch2AndOverflowsPredHFrom2On) {
  const auto target = box_coder_targets({}).at(0);
  ASSERT_EQ(target.name, "torchvision");
  BoxCoderProblem tall;
  tall.boxes = {{0, 0, 0, 16376}};
  tall.deltas = {{0, 0, 0, 7}};
  tall.weights = {10, 10, 5, 5};
#if TORCH_VERSION_MAJOR < 2
  try {
    target.run(tall, DType::fp16, Device::cpu);
    FAIL() << "LibTorch 1.13's CPU clamp_max has no Half kernel";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::unsupported);
    EXPECT_NE(std::string(e.what()).find("Half"), std::string::npos) << e.what();
  }
#else
  const HostTensor decoded = target.run(tall, DType::fp16, Device::cpu).at(0);
  ASSERT_EQ(decoded.values.size(), 4u);
  EXPECT_EQ(decoded.values[0], 0);
  EXPECT_EQ(decoded.values[2], 0);
  EXPECT_FALSE(std::isfinite(decoded.values[1]));
  EXPECT_FALSE(std::isfinite(decoded.values[3]));
  EXPECT_TRUE(target.arithmetic.in_storage("pred_h = exp(dh) * heights"));
#endif
}

BatchedNmsProblem disjoint_boxes(std::size_t count, std::optional<DType> score_dtype) {
  BatchedNmsProblem problem;
  for (std::size_t i = 0; i < count; ++i) {
    problem.boxes.push_back({static_cast<double>(i), 0, i + 1.0, 1});
    problem.scores.push_back(round_to(DType::fp16, 1.0 / (1 + i % 100)));
    problem.classes.push_back(static_cast<std::int64_t>(i % 3));
  }
  problem.score_dtype = score_dtype;
  return problem;
}

// mmcv 1.7's split path writes fp32 dets scores into scores.new_zeros(), an fp16 buffer.
TEST(MmcvBatchedNms, SplitPathAt10000BoxesRaisesOnFloatBoxesWithHalfScores) {
  const auto& mmcv = batched_target("mmcv");
  auto below = mmcv.run(disjoint_boxes(9999, DType::fp16), DType::fp32, Device::cpu);
  EXPECT_EQ(below.at(0).values.size(), 9999u);
  EXPECT_EQ(below.at(1).shape, (std::vector<std::int64_t>{9999, 5}));
  try {
    mmcv.run(disjoint_boxes(10000, DType::fp16), DType::fp32, Device::cpu);
    FAIL() << "mmcv's split path accepted fp16 scores with fp32 boxes";
  } catch (const std::exception& error) {
    EXPECT_NE(std::string(error.what()).find("Index put requires the source and destination dtypes match"),
              std::string::npos) << error.what();
  }
  EXPECT_EQ(mmcv.run(disjoint_boxes(10000, std::nullopt), DType::fp32, Device::cpu).at(0).values.size(), 10000u);
}

// mmcv 1.7's nms_cpu reads boxes.data_ptr<float>(): every other box dtype raises there, so
// those cells are unsupported, with mmcv's own words, not findings of behaviour mmcv lacks.
TEST(MmcvBatchedNms, RejectsEveryBoxDtypeButFp32AsMmcvsKernelDoes) {
  BatchedNmsProblem two{{{0, 0, 2, 2}, {1, 1, 3, 3}}, {0.9, 0.8}, {0, 0}, 0.5, std::nullopt, false, -1};
  for (DType dtype : {DType::fp16, DType::bf16, DType::fp64}) {
    try {
      batched_target("mmcv").run(two, dtype, Device::cpu);
      ADD_FAILURE() << "mmcv's nms accepted " << dtype_name(dtype) << " boxes";
    } catch (const Error& error) {
      EXPECT_EQ(error.kind(), ErrorKind::unsupported);
      EXPECT_NE(std::string(error.what()).find("expected scalar type Float but found"), std::string::npos)
          << error.what();
    }
  }
  EXPECT_EQ(batched_target("mmcv").run(two, DType::fp32, Device::cpu).at(0).values.size(), 2u);  // IoU 1/7
}

// NMSop passes float(iou_threshold) to a `float` parameter and compares in float. A
// threshold just below 0.375 rounds up to it as a float: mmcv keeps a pair of IoU exactly
// 0.375 (0.375 > 0.375 is false), torchvision, comparing in double, suppresses it.
TEST(MmcvBatchedNms, ComparesTheIouWithTheThresholdRoundedToFloat) {
  BatchedNmsProblem pair{{{0, 0, 8, 1}, {0, 0, 3, 1}}, {0.9, 0.8}, {0, 0}, 0.375 - 0x1p-30, std::nullopt, true, -1};
  ASSERT_EQ(static_cast<float>(pair.iou_threshold), 0.375f);
  EXPECT_EQ(batched_target("mmcv").run(pair, DType::fp32, Device::cpu).at(0).values, (std::vector<double>{0, 1}));
  EXPECT_EQ(batched_target("torchvision").run(pair, DType::fp32, Device::cpu).at(0).values, (std::vector<double>{0}));
}

TEST(MmcvBatchedNms, EmptyInputRaisesUnlessClassAgnosticAsUpstream) {
  BatchedNmsProblem empty{{}, {}, {}, 0.5, std::nullopt, false, -1};
  EXPECT_THROW(batched_target("mmcv").run(empty, DType::fp32, Device::cpu), std::exception);
  empty.class_agnostic = true;
  EXPECT_TRUE(batched_target("mmcv").run(empty, DType::fp32, Device::cpu).at(0).values.empty());
  EXPECT_TRUE(batched_target("torchvision").run(empty, DType::fp32, Device::cpu).at(0).values.empty());
}

}  // namespace
}  // namespace detfuzz::kernels

namespace detfuzz::kernels {
namespace {

// --deterministic is LibTorch's own switch (torch.use_deterministic_algorithms), set and
// cleared; under it torchvision's CPU backward kernels run and three runs agree bit for bit.
TEST(RunPolicy, DeterministicSetsLibTorchsSwitchAndTheCpuBackwardKernelsAreStableUnderIt) {
  KernelConfig config;
  config.deterministic = true;
  config.repeats = 3;
  apply_determinism(config);
  EXPECT_TRUE(at::globalContext().deterministicAlgorithms());
  const auto targets = under_run_policy(ps_roi_pool_backward_targets(config), config, "ps_roi_pool_backward");
  const PsRoiPoolBackwardProblem p{{{1, 4, 5, 5, {}}, {{0, 0.5, 0.5, 4.5, 3.5}, {0, 1, 1, 5, 5}}, 0.5, 2, 2},
                                   {0.1, -2, 3, 4, 5, 6, -7, 8}};
  std::vector<HostTensor> out;
  EXPECT_NO_THROW(out = targets.front().run(p, DType::fp32, Device::cpu)) << targets.front().name;
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out.front().shape, (std::vector<std::int64_t>{1, 4, 5, 5}));
  config.deterministic = false;
  apply_determinism(config);
  EXPECT_FALSE(at::globalContext().deterministicAlgorithms());
}

}  // namespace
}  // namespace detfuzz::kernels
