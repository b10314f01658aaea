// The batched_nms harness on the real ports: the mixed-dtype split-path check and the
// class-union property, judged the way a campaign judges.
#include <gtest/gtest.h>

#include "corpus/case_json.h"
#include "fuzz/ops/op_harness.h"

namespace detfuzz::fuzz {
namespace {

const OpHarness& harness() {
  static const auto op = make_batched_nms_harness(kernels::batched_nms_targets({}));
  return *op;
}

BatchedNmsProblem disjoint_boxes(std::size_t count, std::optional<DType> score_dtype) {
  BatchedNmsProblem problem;
  for (std::size_t i = 0; i < count; ++i) {
    problem.boxes.push_back({static_cast<double>(i), 0, i + 1.0, 1});
    problem.scores.push_back(round_to(DType::fp16, 1.0 / (1 + i % 50)));
    problem.classes.push_back(static_cast<std::int64_t>(i % 2));
  }
  problem.score_dtype = score_dtype;
  return problem;
}

TEST(BatchedNmsOp, MixedDtypesThatOnlyTheSplitPathRejectsAreADtypeFinding) {
  const auto judgement = harness().judge_json(corpus::to_json(disjoint_boxes(10000, DType::fp16)), "mmcv",
                                              DType::fp32, Device::cpu);
  ASSERT_EQ(judgement.verdicts.size(), 1u);
  EXPECT_EQ(judgement.verdicts[0].kind, FindingKind::dtype);
  EXPECT_EQ(judgement.verdicts[0].property, "mixed_dtypes_split_path");
  EXPECT_TRUE(harness().judge_json(corpus::to_json(disjoint_boxes(9999, DType::fp16)), "mmcv", DType::fp32,
                                   Device::cpu).consistent());
}

TEST(BatchedNmsOp, MixedDtypesRejectedAtEverySizeAreACleanContract) {
  // torchvision::nms checks that dets and scores share a dtype, whatever the count.
  for (std::size_t count : {4u, 2000u}) {
    const auto judgement = harness().judge_json(corpus::to_json(disjoint_boxes(count, DType::fp16)), "torchvision",
                                                DType::fp32, Device::cpu);
    EXPECT_TRUE(judgement.consistent()) << count << ": " << judgement.verdicts[0].message;
  }
}

TEST(BatchedNmsOp, NegativeCoordinatesBreakTheCoordinateTrickButNotTheClassLoop) {
  BatchedNmsProblem problem{{{0, 0, 1, 1}, {-2, -2, -1, -1}}, {0.9, 0.8}, {0, 1}, 0.5, std::nullopt, false, -1};
  const auto trick = harness().judge_json(corpus::to_json(problem), "torchvision:coordinate_trick", DType::fp32,
                                          Device::cpu);
  ASSERT_EQ(trick.verdicts.size(), 1u);
  EXPECT_EQ(trick.verdicts[0].property, "class_separation");
  EXPECT_TRUE(harness().judge_json(corpus::to_json(problem), "torchvision:vanilla", DType::fp32, Device::cpu).consistent());
}

}  // namespace
}  // namespace detfuzz::fuzz
