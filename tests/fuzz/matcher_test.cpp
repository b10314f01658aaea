// matcher: the oracle's acceptable sets, the thresholds' rounding as `precision`, and a
// matcher with its two argmax axes swapped caught.
#include <gtest/gtest.h>

#include "corpus/case_json.h"
#include "fuzz/ops/op_harness.h"
#include "oracles/matcher.h"

namespace detfuzz::fuzz {
namespace {

// 2 ground truths x 3 predictions: prediction 0 matches gt 1 (0.8), prediction 1 is
// between (0.5) but is gt 0's best, so low-quality matching gives it gt 0; prediction 2 is
// below (0.125).
MatcherProblem two_by_three(bool allow_low_quality) {
  return {2, 3, {0.25, 0.5, 0.125, 0.8, 0.25, 0.0625}, 0.7, 0.3, allow_low_quality};
}

TEST(MatcherOracle, ThresholdsAndLowQualityMatches) {
  using Sets = std::vector<std::vector<std::int64_t>>;
  EXPECT_EQ(oracles::matcher(two_by_three(false), DType::fp64), (Sets{{1}, {-2}, {-1}}));
  // gt 0's best is prediction 1 (0.5): it gets gt 0 back; gt 1's best is prediction 0.
  EXPECT_EQ(oracles::matcher(two_by_three(true), DType::fp64), (Sets{{1}, {0}, {-1}}));
  MatcherProblem tie{2, 1, {0.75, 0.75}, 0.7, 0.3, false};
  EXPECT_EQ(oracles::matcher(tie, DType::fp64), (Sets{{0, 1}}));
}

kernels::Target<MatcherProblem> swapped_axes() {
  kernels::Target<MatcherProblem> target;
  target.name = "swapped";
  target.availability = [](Device) { return kernels::Availability{}; };
  target.run = [](const MatcherProblem& p, DType, Device) {
    // argmax over predictions for each ground truth, where it should be the reverse
    HostTensor matches{{p.ground_truths}, "int64", "cpu", {}};
    for (std::int64_t m = 0; m < p.ground_truths; ++m) {
      std::int64_t best = 0;
      for (std::int64_t n = 1; n < p.predictions; ++n)
        if (p.quality[m * p.predictions + n] > p.quality[m * p.predictions + best]) best = n;
      matches.values.push_back(static_cast<double>(best));
    }
    return std::vector<HostTensor>{matches};
  };
  return target;
}

TEST(MatcherOp, TorchvisionPortIsConsistentAndSwappedAxesAreCaught) {
  auto op = make_matcher_harness({kernels::matcher_targets({}).front(), swapped_axes()});
  for (bool allow : {false, true}) {
    const auto input = corpus::to_json(two_by_three(allow));
    EXPECT_TRUE(op->judge_json(input, "torchvision", DType::fp32, Device::cpu).consistent());
    const auto judgement = op->judge_json(input, "swapped", DType::fp32, Device::cpu);
    ASSERT_FALSE(judgement.consistent());
    EXPECT_EQ(judgement.verdicts[0].kind, FindingKind::shape);
  }
  // Square: the shape fits, the values do not.
  MatcherProblem square{2, 2, {0.75, 0.25, 0.875, 0.125}, 0.7, 0.3, false};
  const auto judgement = op->judge_json(corpus::to_json(square), "swapped", DType::fp32, Device::cpu);
  ASSERT_FALSE(judgement.consistent());
  EXPECT_EQ(judgement.verdicts[0].kind, FindingKind::mismatch);
}

TEST(MatcherOp, Bf16ThresholdRoundingIsPrecisionNotMismatch) {
  auto op = make_matcher_harness(kernels::matcher_targets({}));
  MatcherProblem at_bf16_threshold{1, 1, {round_to(DType::bf16, 0.7)}, 0.7, 0.3, false};  // 0.69921875 < 0.7
  const auto judgement = op->judge_json(corpus::to_json(at_bf16_threshold), "torchvision", DType::bf16, Device::cpu);
  ASSERT_EQ(judgement.verdicts.size(), 1u);
  EXPECT_EQ(judgement.verdicts[0].kind, FindingKind::precision);
  EXPECT_TRUE(op->judge_json(corpus::to_json(at_bf16_threshold), "torchvision", DType::fp32, Device::cpu).consistent());
}

TEST(MatcherOp, AnEmptyMatrixMayRaise) {
  auto op = make_matcher_harness(kernels::matcher_targets({}));
  EXPECT_TRUE(op->judge_json(corpus::to_json(MatcherProblem{0, 3, {}, 0.7, 0.3, true}), "torchvision", DType::fp32,
                             Device::cpu).consistent());
}

}  // namespace
}  // namespace detfuzz::fuzz
