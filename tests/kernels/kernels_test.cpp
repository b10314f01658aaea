// The LibTorch side: our dtype rounding agrees with c10's, the torchvision library loads
// and its nms runs through the dispatcher, the ATen box_iou port keeps torchvision's contract.
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cmath>
#include <cstring>

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

TEST(AtenBoxIou, EmptySetsGiveEmptyMatrices) {
  BoxIouProblem problem{{}, {{0, 0, 1, 1}}};
  HostTensor iou = aten_box_iou().run(problem, DType::fp32, Device::cpu).at(0);
  EXPECT_EQ(iou.shape, (std::vector<std::int64_t>{0, 1}));
}

}  // namespace
}  // namespace detfuzz::kernels
