// The class-aware comparator: what per-class NMS allows, what it refuses, and how it names
// the coordinate trick's failures.
#include <gtest/gtest.h>

#include <cmath>

#include "fuzz/compare/batched_nms_compare.h"
#include "model/dtype.h"
#include "oracles/batched_nms.h"

namespace detfuzz::compare {
namespace {

HostTensor keep_tensor(std::vector<double> keep) {
  return {{static_cast<std::int64_t>(keep.size())}, "int64", "cpu", std::move(keep)};
}

Judgement judge(const BatchedNmsProblem& problem, std::vector<double> keep, DType dtype = DType::fp32) {
  return judge_batched_nms_output(problem, {keep_tensor(std::move(keep))}, dtype, Device::cpu);
}

// Two identical boxes in two classes, and a third box of class 0 on top of the first.
BatchedNmsProblem two_classes() {
  return {{{0, 0, 10, 10}, {0, 0, 10, 10}, {0, 0, 10, 10}}, {0.9, 0.8, 0.7}, {0, 1, 0}, 0.5, std::nullopt, false, -1};
}

TEST(BatchedNmsOracle, ClassesNeverSuppressEachOther) {
  EXPECT_EQ(oracles::batched_nms(two_classes()), (std::vector<std::int64_t>{0, 1}));
  BatchedNmsProblem agnostic = two_classes();
  agnostic.class_agnostic = true;
  EXPECT_EQ(oracles::batched_nms(agnostic), (std::vector<std::int64_t>{0}));
}

TEST(BatchedNmsOracle, MaxNumKeepsTheHighestScores) {
  BatchedNmsProblem problem{{{0, 0, 1, 1}, {5, 5, 6, 6}, {9, 9, 10, 10}}, {0.2, 0.9, 0.5}, {0, 1, 2}, 0.5, std::nullopt, false, -1};
  problem.max_num = 2;
  EXPECT_EQ(oracles::batched_nms(problem), (std::vector<std::int64_t>{1, 2}));
}

TEST(BatchedNmsCompare, PerClassResultIsConsistent) {
  EXPECT_TRUE(judge(two_classes(), {0, 1}).consistent());
}

TEST(BatchedNmsCompare, SuppressionAcrossClassesIsAMismatch) {
  Judgement j = judge(two_classes(), {0});  // what class-agnostic NMS returns
  ASSERT_EQ(j.verdicts.size(), 1u);
  EXPECT_EQ(j.verdicts[0].kind, FindingKind::mismatch);
  EXPECT_NE(j.verdicts[0].message.find("of its class"), std::string::npos) << j.verdicts[0].message;
}

TEST(BatchedNmsCompare, SuppressionWithinAClassIsRequired) {
  Judgement j = judge(two_classes(), {0, 1, 2});
  ASSERT_EQ(j.verdicts.size(), 1u);
  EXPECT_EQ(j.verdicts[0].kind, FindingKind::mismatch);
  EXPECT_NE(j.verdicts[0].message.find("should have been suppressed"), std::string::npos);
}

TEST(BatchedNmsCompare, KeptBoxesOutOfScoreOrderAreAnOrderFinding) {
  Judgement j = judge(two_classes(), {1, 0});
  ASSERT_EQ(j.verdicts.size(), 1u);
  EXPECT_EQ(j.verdicts[0].kind, FindingKind::order);
}

TEST(BatchedNmsCompare, MaxNumCutMayDropLowerScoresButNotHigherOnes) {
  BatchedNmsProblem problem{{{0, 0, 1, 1}, {5, 5, 6, 6}, {9, 9, 10, 10}}, {0.2, 0.9, 0.5}, {0, 1, 2}, 0.5, std::nullopt, false, -1};
  problem.max_num = 2;
  EXPECT_TRUE(judge(problem, {1, 2}).consistent());
  EXPECT_FALSE(judge(problem, {1, 0}).consistent());   // dropped 0.5 and kept 0.2
  EXPECT_FALSE(judge(problem, {1, 2, 0}).consistent());  // more than max_num
}

// Negative coordinates: max + 1 = 2 shifts class 1 by 2, exactly onto class 0's box.
TEST(BatchedNmsCompare, OffsetsThatDoNotSeparateClassesAreNamed) {
  BatchedNmsProblem problem{{{0, 0, 1, 1}, {-2, -2, -1, -1}}, {0.9, 0.8}, {0, 1}, 0.5, std::nullopt, false, -1};
  Judgement j = judge(problem, {0});  // what the coordinate trick returns
  ASSERT_EQ(j.verdicts.size(), 1u);
  EXPECT_EQ(j.verdicts[0].kind, FindingKind::mismatch);
  EXPECT_EQ(j.verdicts[0].property, "class_separation");
}

// Class 1 shifted by 2^24 + 1 in fp32: its coordinates 0.5 apart collapse, IoU becomes 1.
TEST(BatchedNmsCompare, OffsetsThatRoundCoordinatesArePrecisionNamedCoordinateOffset) {
  const double big = std::ldexp(1.0, 24);
  BatchedNmsProblem problem{{{0, 0, big, 1}, {0, 0, 2, 2}, {0.5, 0.5, 2.5, 2.5}}, {0.9, 0.8, 0.7}, {0, 1, 1}, 0.5, std::nullopt, false, -1};
  // Per class: IoU([0,0,2,2], [.5,.5,2.5,2.5]) = 2.25 / 5.75 < 0.5, both kept. Shifted by
  // 2^24 + 1 rounded to fp32, the two boxes coincide (0.5 is below fp32's spacing there).
  ASSERT_TRUE(judge(problem, {0, 1, 2}).consistent());
  Judgement j = judge(problem, {0, 1});
  ASSERT_EQ(j.verdicts.size(), 1u);
  EXPECT_EQ(j.verdicts[0].kind, FindingKind::precision);
  EXPECT_EQ(j.verdicts[0].property, "coordinate_offset");
}

TEST(BatchedNmsCompare, DetsMustHoldTheKeptBoxesAndScores) {
  const BatchedNmsProblem problem = two_classes();
  HostTensor dets{{2, 5}, "fp32", "cpu", {0, 0, 10, 10, 0.9, 0, 0, 10, 10, 0.8}};
  EXPECT_TRUE(judge_batched_nms_output(problem, {keep_tensor({0, 1}), dets}, DType::fp32, Device::cpu).consistent());
  dets.values[9] = 0;  // a score lost on the way (a buffer that was never written)
  Judgement j = judge_batched_nms_output(problem, {keep_tensor({0, 1}), dets}, DType::fp32, Device::cpu);
  ASSERT_EQ(j.verdicts.size(), 1u);
  EXPECT_EQ(j.verdicts[0].property, "dets");
}

}  // namespace
}  // namespace detfuzz::compare
