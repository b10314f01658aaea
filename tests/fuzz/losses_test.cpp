// The loss oracles on exact cases, the harness catching a detection loss divided by the
// number of positives without a guard (0/0 on an image with no objects), and torch's
// autograd of the regression losses against the analytic gradient.
#include <gtest/gtest.h>

#include <cmath>

#include "corpus/case_json.h"
#include "fuzz/ops/op_harness.h"
#include "support/in_process_campaign.h"
#include "oracles/losses.h"

namespace detfuzz::fuzz {
namespace {

RegressionLossProblem regression(std::vector<double> input, std::vector<double> target, double beta,
                                 RegressionLossProblem::Reduction reduction) {
  RegressionLossProblem p;
  p.input = std::move(input);
  p.target = std::move(target);
  p.beta = beta;
  p.reduction = reduction;
  return p;
}

TEST(LossOracle, SmoothL1BranchesAtBetaAndIsL1AtBetaZero) {
  const auto none = RegressionLossProblem::Reduction::none;
  const auto values = oracles::regression_loss(regression({0.5, 3, -2}, {0, 0, 0}, 1, none));
  EXPECT_EQ(values[0].value.value, 0.125);  // 0.5 * 0.25 / 1
  EXPECT_EQ(values[1].value.value, 2.5);    // 3 - 0.5
  EXPECT_EQ(values[2].value.value, 1.5);
  EXPECT_EQ(values[0].value.bound(DType::fp16), 0.0);
  EXPECT_EQ(oracles::regression_loss(regression({0.5}, {0}, 0, none))[0].value.value, 0.5);
  const auto mean = oracles::regression_loss(regression({0.5, 3}, {0, 0}, 1, RegressionLossProblem::Reduction::mean));
  EXPECT_EQ(mean[0].value.value, 1.3125);
  EXPECT_TRUE(oracles::regression_loss(regression({}, {}, 1, RegressionLossProblem::Reduction::mean))[0].value.undefined);
}

FastRcnnLossProblem background_only() {
  FastRcnnLossProblem p;
  p.classes = 2;
  p.class_logits = {1, -1, 0.5, 0.5};
  p.labels = {0, 0};
  p.box_regression = std::vector<double>(16, 0.25);
  p.regression_targets = std::vector<double>(8, 0);
  return p;
}

TEST(LossOracle, FastRcnnBoxLossIsZeroWithoutPositives) {
  const auto losses = oracles::fast_rcnn_loss(background_only());
  EXPECT_EQ(losses[1].value.value, 0.0);
  EXPECT_FALSE(losses[1].value.undefined);
  EXPECT_NEAR(losses[0].value.value, (std::log(1 + std::exp(-2.0)) + std::log(2.0)) / 2, 1e-15);
}

// torchvision's fastrcnn_loss, except the box loss divided by the positives' count.
kernels::Target<FastRcnnLossProblem> divided_by_positives() {
  const auto faithful = kernels::fast_rcnn_loss_targets({}).front();
  kernels::Target<FastRcnnLossProblem> target = faithful;
  target.name = "per_positive";
  target.run = [faithful](const FastRcnnLossProblem& p, DType dtype, Device device) {
    auto outputs = faithful.run(p, dtype, device);
    double positives = 0;
    for (std::int64_t label : p.labels) positives += label > 0;
    outputs[1].values[0] = round_to(dtype, outputs[1].values[0] * static_cast<double>(p.labels.size()) / positives);
    return outputs;
  };
  return target;
}

TEST(FastRcnnLossOp, UnguardedDivisionByPositivesIsCaughtOnAnImageWithoutObjects) {
  auto op = make_fast_rcnn_loss_harness({kernels::fast_rcnn_loss_targets({}).front(), divided_by_positives()});
  const nlohmann::json input = corpus::to_json(background_only());
  for (DType dtype : {DType::fp32, DType::fp64})
    EXPECT_TRUE(op->judge_json(input, "torchvision", dtype, Device::cpu).consistent());
  const auto judgement = op->judge_json(input, "per_positive", DType::fp32, Device::cpu);
  ASSERT_EQ(judgement.verdicts.size(), 1u);
  EXPECT_EQ(judgement.verdicts[0].kind, FindingKind::nan);
  EXPECT_EQ(judgement.verdicts[0].property, "box_loss");
}

TEST(RegressionLossOp, TorchMatchesTheOracleOnBothBranchesAndEveryReduction) {
  auto op = make_regression_loss_harness(kernels::regression_loss_targets({}));
  for (auto reduction : {RegressionLossProblem::Reduction::none, RegressionLossProblem::Reduction::sum,
                         RegressionLossProblem::Reduction::mean})
    for (double beta : {1.0, 1.0 / 9, 0.0}) {
      const auto judgement = op->judge_json(corpus::to_json(regression({0.5, 3.25, -0.05, 0.1}, {0, 1, 0.05, 0.2}, beta, reduction)),
                                            "torch", DType::fp32, Device::cpu);
      EXPECT_TRUE(judgement.consistent()) << judgement.verdicts[0].message;
    }
}

// d sum(loss) / d input by LibTorch autograd against the analytic gradient: no failing
// finding on the generated problems (both branches, beta 0 and 1/9, zero residuals, every
// reduction) in any dtype the linked torch runs.
TEST(RegressionLossBackwardOp, TorchsAutogradRaisesNoFailingFindingOnGeneratedProblems) {
  CampaignOptions o;
  o.cases_per_cell = 600;
  const reports::Report report = detfuzz::testing::in_process_campaign(
      make_regression_loss_backward_harness({kernels::regression_loss_backward_targets({}).front()}), o);
  for (const auto& f : report.findings) EXPECT_FALSE(f.fails) << f.dtype << " " << f.kind << ": " << f.message;
  std::size_t ran = 0;
  for (const auto& cell : report.cells) ran += cell.cases;
  EXPECT_GE(ran, 1200u);  // fp32 and fp64 at least
}

TEST(RegressionLossBackwardOp, ANanGradientAtAZeroResidualWithBetaZeroIsCaught) {
  auto op = make_regression_loss_backward_harness(kernels::regression_loss_backward_targets({}));
  const auto input = corpus::to_json(regression({0.5, 3.0}, {0.5, 1.0}, 0.0, RegressionLossProblem::Reduction::sum));
  for (DType dtype : {DType::fp32, DType::fp64}) {
    const auto judgement = op->judge_json(input, "torch", dtype, Device::cpu);
    EXPECT_TRUE(judgement.consistent()) << judgement.verdicts[0].message;
  }
  const auto judgement = op->judge_json(input, "mutant:smooth_l1_backward_zero_beta_nan", DType::fp32, Device::cpu);
  ASSERT_EQ(judgement.verdicts.size(), 1u);
  EXPECT_EQ(judgement.verdicts[0].kind, FindingKind::nan);
}

}  // namespace
}  // namespace detfuzz::fuzz
