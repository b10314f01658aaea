#include <gtest/gtest.h>

#include <algorithm>

#include "fuzz/compare/nms_replay.h"
#include "oracles/nms.h"

namespace detfuzz::compare {
namespace {

HostTensor keep_tensor(std::vector<double> keep, std::string dtype = "int64", std::string device = "cpu") {
  return {{static_cast<std::int64_t>(keep.size())}, std::move(dtype), std::move(device), std::move(keep)};
}

Judgement judge(const NmsProblem& problem, std::vector<double> keep, DType dtype = DType::fp32) {
  return judge_nms_output(problem, keep_tensor(std::move(keep)), dtype, Device::cpu);
}

// Box B shifted so that IoU(A, B) = 0.5 up to the rounding of 10/3 in double: within the
// fp32 tolerance of the threshold, so either decision is honest.
NmsProblem near_threshold_pair() {
  const double shift = 10.0 / 3;
  return {{{0, 0, 10, 10}, {shift, 0, 10 + shift, 10}}, {0.9, 0.8}, 0.5};
}

TEST(NmsReplay, NearThresholdPairMayGoEitherWay) {
  EXPECT_TRUE(judge(near_threshold_pair(), {0}).consistent());
  EXPECT_TRUE(judge(near_threshold_pair(), {0, 1}).consistent());
}

TEST(NmsReplay, ClearDisagreementIsAMismatch) {
  NmsProblem identical{{{0, 0, 10, 10}, {0, 0, 10, 10}}, {0.9, 0.8}, 0.5};
  Judgement j = judge(identical, {0, 1});
  ASSERT_EQ(j.verdicts.size(), 1u);
  EXPECT_EQ(j.verdicts[0].kind, FindingKind::mismatch);
  EXPECT_NE(j.verdicts[0].message.find("should have been suppressed"), std::string::npos);
  EXPECT_EQ(j.verdicts[0].details["oracle_keep"], nlohmann::json({0}));
}

TEST(NmsReplay, MissingBoxIsAMismatchNamingTheBox) {
  NmsProblem disjoint{{{0, 0, 1, 1}, {5, 5, 6, 6}}, {0.9, 0.8}, 0.5};
  Judgement j = judge(disjoint, {0});
  ASSERT_EQ(j.verdicts.size(), 1u);
  EXPECT_EQ(j.verdicts[0].kind, FindingKind::mismatch);
  EXPECT_NE(j.verdicts[0].message.find("box 1"), std::string::npos);
  EXPECT_NE(j.verdicts[0].message.find("missing"), std::string::npos);
}

TEST(NmsReplay, EqualScoresAreAcceptedInAnyOrder) {
  NmsProblem disjoint{{{0, 0, 1, 1}, {5, 5, 6, 6}, {9, 9, 10, 10}}, {0.5, 0.5, 0.5}, 0.5};
  EXPECT_TRUE(judge(disjoint, {0, 1, 2}).consistent());
  EXPECT_TRUE(judge(disjoint, {2, 0, 1}).consistent());
  // Duplicates with equal scores: either one may survive.
  NmsProblem duplicates{{{0, 0, 4, 4}, {0, 0, 4, 4}}, {0.5, 0.5}, 0.5};
  EXPECT_TRUE(judge(duplicates, {0}).consistent());
  EXPECT_TRUE(judge(duplicates, {1}).consistent());
  EXPECT_FALSE(judge(duplicates, {0, 1}).consistent());
}

TEST(NmsReplay, RightSetInWrongOrderIsAnOrderFinding) {
  NmsProblem disjoint{{{0, 0, 1, 1}, {5, 5, 6, 6}}, {0.8, 0.9}, 0.5};
  EXPECT_TRUE(judge(disjoint, {1, 0}).consistent());
  Judgement j = judge(disjoint, {0, 1});
  ASSERT_EQ(j.verdicts.size(), 1u);
  EXPECT_EQ(j.verdicts[0].kind, FindingKind::order);
}

TEST(NmsReplay, ExactTieAtTheThresholdIsDecided) {
  // IoU is exactly 0.5 in every format: `>` keeps both; `>=` (a real bug class) does not.
  NmsProblem exact{{{0, 0, 3, 1}, {1, 0, 4, 1}}, {0.9, 0.8}, 0.5};
  EXPECT_TRUE(judge(exact, {0, 1}).consistent());
  Judgement j = judge(exact, {0});
  ASSERT_EQ(j.verdicts.size(), 1u);
  EXPECT_EQ(j.verdicts[0].kind, FindingKind::mismatch);
}

TEST(NmsReplay, DecisionFlippedOnlyByLowPrecisionArithmeticIsPrecision) {
  // IoU 999/1001 = 0.998002 against 0.998: clear with fp32 arithmetic, within what fp16
  // arithmetic can do. A kernel keeping both boxes rounded in fp16.
  NmsProblem problem{{{0, 0, 1000, 1}, {1, 0, 1001, 1}}, {0.9, 0.8}, 0.998};
  Judgement j = judge(problem, {0, 1}, DType::fp16);
  ASSERT_EQ(j.verdicts.size(), 1u);
  EXPECT_EQ(j.verdicts[0].kind, FindingKind::precision);
  // The same output from an fp32 kernel is a plain mismatch.
  Judgement j32 = judge(problem, {0, 1}, DType::fp32);
  ASSERT_EQ(j32.verdicts.size(), 1u);
  EXPECT_EQ(j32.verdicts[0].kind, FindingKind::mismatch);
}

TEST(NmsReplay, DecisionsBeyondTheComputeTypesRangeAreOverflow) {
  // Areas of 1e40 do not exist in fp32: an fp32 kernel gets inf/inf and keeps both.
  NmsProblem huge{{{0, 0, 1e20, 1e20}, {0, 0, 1e20, 1e20}}, {0.9, 0.8}, 0.5};
  Judgement j = judge(huge, {0, 1});
  ASSERT_EQ(j.verdicts.size(), 1u);
  EXPECT_EQ(j.verdicts[0].kind, FindingKind::overflow);
  EXPECT_TRUE(judge(huge, {0}).consistent());
}

// bf16 has fp32's range: its wide rounding bound excuses a decision near the threshold, but
// when the areas are past fp32's range the cause is the range (an fp32-computing kernel gets
// inf/inf = NaN and keeps both), not bf16 rounding: overflow, not precision.
TEST(NmsReplay, Bf16DecisionsPastFp32sRangeAreOverflowNotPrecision) {
  // IoU 51/99 = 0.515, areas that bf16 rounds; scaled by 2^60 they pass 3.4e38.
  const double scale = 0x1p60;
  NmsProblem huge{{{0, 0, 99 * scale, 99 * scale}, {0, 0, 99 * scale, 51 * scale}}, {0.9, 0.8}, 0.5};
  Judgement j = judge(huge, {0, 1}, DType::bf16);
  ASSERT_EQ(j.verdicts.size(), 1u);
  EXPECT_EQ(j.verdicts[0].kind, FindingKind::overflow) << j.verdicts[0].message;
  // The same pair at an in-range scale is bf16 precision, as before.
  NmsProblem small{{{0, 0, 99, 99}, {0, 0, 99, 51}}, {0.9, 0.8}, 0.5};
  Judgement in_range = judge(small, {0, 1}, DType::bf16);
  ASSERT_EQ(in_range.verdicts.size(), 1u);
  EXPECT_EQ(in_range.verdicts[0].kind, FindingKind::precision) << in_range.verdicts[0].message;
}

TEST(NmsReplay, InvalidAndDuplicateIndicesAreMismatches) {
  NmsProblem disjoint{{{0, 0, 1, 1}, {5, 5, 6, 6}}, {0.9, 0.8}, 0.5};
  EXPECT_EQ(judge(disjoint, {0, 7}).verdicts.at(0).kind, FindingKind::mismatch);
  EXPECT_EQ(judge(disjoint, {0, 0}).verdicts.at(0).kind, FindingKind::mismatch);
  EXPECT_EQ(judge(disjoint, {-1, 1}).verdicts.at(0).kind, FindingKind::mismatch);
}

TEST(NmsReplay, ContractBreachesAreTheirOwnKinds) {
  NmsProblem one{{{0, 0, 1, 1}}, {0.9}, 0.5};
  EXPECT_EQ(judge_nms_output(one, keep_tensor({0}, "int32"), DType::fp32, Device::cpu).verdicts.at(0).kind,
            FindingKind::dtype);
  HostTensor two_d{{1, 1}, "int64", "cpu", {0}};
  EXPECT_EQ(judge_nms_output(one, two_d, DType::fp32, Device::cpu).verdicts.at(0).kind, FindingKind::shape);
  EXPECT_EQ(judge_nms_output(one, keep_tensor({0}, "int64", "cuda:0"), DType::fp32, Device::cpu)
                .verdicts.at(0).kind,
            FindingKind::device);
}

TEST(NmsReplay, EmptyInputAcceptsOnlyEmptyOutput) {
  EXPECT_TRUE(judge(NmsProblem{}, {}).consistent());
  EXPECT_FALSE(judge(NmsProblem{}, {0}).consistent());
}

TEST(NmsReplay, ZeroAreaDuplicatesMayGoEitherWay) {
  // IoU 0/0 has no true value: torchvision keeps both (NaN > t is false), others may not.
  NmsProblem points{{{2, 2, 2, 2}, {2, 2, 2, 2}}, {0.9, 0.8}, 0.5};
  EXPECT_TRUE(judge(points, {0, 1}).consistent());
  EXPECT_TRUE(judge(points, {0}).consistent());
}

TEST(NmsReplay, FindingDetailsShowTheFirst64IndicesInOrder) {
  std::vector<std::int64_t> many(100);
  for (std::size_t i = 0; i < many.size(); ++i) many[i] = static_cast<std::int64_t>(99 - i);
  const auto shown = first_indices(many);
  ASSERT_EQ(shown.size(), 64u);
  EXPECT_EQ(shown.front(), 99);
  EXPECT_EQ(shown.back(), 36);
  EXPECT_EQ(first_indices({4, 2}), (std::vector<std::int64_t>{4, 2}));
  EXPECT_TRUE(first_indices({}).empty());
}

}  // namespace
}  // namespace detfuzz::compare

#include <rapidcheck/gtest.h>

#include "fuzz/gen/boxes.h"

namespace detfuzz::compare {
namespace {

// The shortcut decides far-from-threshold pairs without the error tracker; on generated
// pairs (near-threshold and exact ones included) it must decide exactly as the full path.
RC_GTEST_PROP(NmsReplay, ShortcutNeverChangesADecision, ()) {
  const DType dtype = *rc::gen::elementOf(kFloatDTypes);
  const NmsProblem problem = *gen::nms_problem({dtype, 12});
  DecisionPolicy fast{*rc::gen::element(dtype, accumulate_type(dtype)), false,
                      BoxConvention::continuous, true};
  DecisionPolicy full = fast;
  full.shortcut = false;
  for (const Box& a : problem.boxes)
    for (const Box& b : problem.boxes)
      RC_ASSERT(decide(a, b, problem.iou_threshold, fast) == decide(a, b, problem.iou_threshold, full));
}

// The sweep skips pairs that cannot overlap; on generated problems and kept lists near the
// oracle's (one box dropped, one added, two swapped), its verdict is the plain loop's.
RC_GTEST_PROP(NmsReplay, PrunedReplayAgreesWithThePlainLoop, ()) {
  const DType dtype = *rc::gen::elementOf(kFloatDTypes);
  const NmsProblem problem = *gen::nms_problem({dtype, 40});
  std::vector<std::int64_t> keep = oracles::nms_quadratic(problem).keep;
  const int edit = *rc::gen::inRange(0, 4);
  const auto n = static_cast<std::int64_t>(problem.boxes.size());
  if (edit == 1 && !keep.empty()) keep.erase(keep.begin() + *rc::gen::inRange<std::size_t>(0, keep.size()));
  if (edit == 2 && n > 0) {
    const std::int64_t extra = *rc::gen::inRange<std::int64_t>(0, n);
    if (std::find(keep.begin(), keep.end(), extra) == keep.end()) keep.push_back(extra);
  }
  if (edit == 3 && keep.size() > 1) std::swap(keep.front(), keep.back());
  DecisionPolicy fast{accumulate_type(dtype), false, BoxConvention::continuous, true};
  DecisionPolicy plain = fast;
  plain.shortcut = false;
  const ReplayResult a = replay_nms(problem, keep, fast), b = replay_nms(problem, keep, plain);
  RC_ASSERT(a.consistent == b.consistent);
  RC_ASSERT(a.order_only == b.order_only);
}

// Class-aware: one sweep per class. The plain loop compares every pair of the same class;
// the sweeps must reach the same verdicts, on kept lists near per-class NMS's.
RC_GTEST_PROP(NmsReplay, PrunedClassAwareReplayAgreesWithThePlainLoop, ()) {
  const DType dtype = *rc::gen::elementOf(kFloatDTypes);
  const NmsProblem problem = *gen::nms_problem({dtype, 40});
  const auto n = static_cast<std::int64_t>(problem.boxes.size());
  const std::vector<std::int64_t> classes = *rc::gen::container<std::vector<std::int64_t>>(
      problem.boxes.size(), rc::gen::inRange<std::int64_t>(0, 3));
  std::vector<std::int64_t> keep;
  for (std::int64_t c = 0; c < 3; ++c) {
    NmsProblem members{{}, {}, problem.iou_threshold};
    std::vector<std::int64_t> index;
    for (std::int64_t i = 0; i < n; ++i)
      if (classes[static_cast<std::size_t>(i)] == c) {
        members.boxes.push_back(problem.boxes[static_cast<std::size_t>(i)]);
        members.scores.push_back(problem.scores[static_cast<std::size_t>(i)]);
        index.push_back(i);
      }
    for (std::int64_t k : oracles::nms_quadratic(members).keep) keep.push_back(index[static_cast<std::size_t>(k)]);
  }
  std::stable_sort(keep.begin(), keep.end(), [&](std::int64_t a, std::int64_t b) {
    return problem.scores[static_cast<std::size_t>(a)] > problem.scores[static_cast<std::size_t>(b)];
  });
  const int edit = *rc::gen::inRange(0, 3);
  if (edit == 1 && !keep.empty()) keep.erase(keep.begin() + *rc::gen::inRange<std::size_t>(0, keep.size()));
  if (edit == 2 && n > 0) {
    const std::int64_t extra = *rc::gen::inRange<std::int64_t>(0, n);
    if (std::find(keep.begin(), keep.end(), extra) == keep.end()) keep.push_back(extra);
  }
  DecisionPolicy fast{accumulate_type(dtype), false, BoxConvention::continuous, true};
  fast.classes = &classes;
  DecisionPolicy plain = fast;
  plain.shortcut = false;
  const ReplayResult a = replay_nms(problem, keep, fast), b = replay_nms(problem, keep, plain);
  RC_ASSERT(a.consistent == b.consistent);
  RC_ASSERT(a.order_only == b.order_only);
  RC_TAG(a.consistent ? "consistent" : "not consistent");
}

RC_GTEST_PROP(NmsOracle, SweepKeepsWhatThePlainLoopKeeps, ()) {
  const DType dtype = *rc::gen::elementOf(kFloatDTypes);
  const NmsProblem problem = *gen::nms_problem({dtype, 60});
  RC_ASSERT(oracles::nms(problem).keep == oracles::nms_quadratic(problem).keep);
}

}  // namespace
}  // namespace detfuzz::compare
