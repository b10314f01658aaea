// GIoU: the oracle on exact cases, the torchvision ports agreeing with it, a loss without
// eps caught on degenerate boxes, and autograd of the loss against the analytic gradient.
#include <gtest/gtest.h>

#include <cmath>

#include "corpus/case_json.h"
#include "fuzz/ops/op_harness.h"
#include "support/in_process_campaign.h"
#include "oracles/giou.h"

namespace detfuzz::fuzz {
namespace {

TEST(GiouOracle, KnownValues) {
  // Disjoint unit boxes two apart: IoU 0, enclosing 3 x 1, union 2: GIoU = -1/3.
  const auto pairwise = oracles::generalized_box_iou({{{0, 0, 1, 1}}, {{2, 0, 3, 1}, {0, 0, 1, 1}}});
  EXPECT_DOUBLE_EQ(pairwise[0].value, -1.0 / 3);
  EXPECT_EQ(pairwise[1].value, 1.0);
  EXPECT_EQ(pairwise[1].bound(DType::fp16), 0.0);
  const auto loss = oracles::giou_loss({{{0, 0, 1, 1}, {0, 0, 0, 0}}, {{2, 0, 3, 1}, {0, 0, 0, 0}}, 1e-7,
                                        RegressionLossProblem::Reduction::none});
  EXPECT_NEAR(loss[0].value, 1 + 1.0 / 3, 1e-6);
  EXPECT_EQ(loss[1].value, 1.0);  // two points: eps keeps 0 / 0 away, the loss is 1
  EXPECT_FALSE(loss[1].undefined);
  EXPECT_EQ(oracles::giou_loss({{}, {}, 1e-7, RegressionLossProblem::Reduction::mean})[0].value, 0.0);
}

// The faithful loss with eps = 0 in its divisions: what "GIoU loss without eps" computes.
kernels::Target<GiouLossProblem> without_eps() {
  const auto faithful = kernels::giou_loss_targets({}).front();
  kernels::Target<GiouLossProblem> target = faithful;
  target.name = "no_eps";
  target.run = [faithful](GiouLossProblem p, DType dtype, Device device) {
    p.eps = 0;
    return faithful.run(p, dtype, device);
  };
  return target;
}

TEST(GiouLossOp, LossWithoutEpsIsCaughtOnDegenerateBoxes) {
  auto op = make_giou_loss_harness({kernels::giou_loss_targets({}).front(), without_eps()});
  const auto degenerate = corpus::to_json(GiouLossProblem{{{1, 1, 1, 1}}, {{1, 1, 1, 1}}, 1e-7,
                                                          RegressionLossProblem::Reduction::none});
  for (DType dtype : {DType::fp32, DType::fp64})
    EXPECT_TRUE(op->judge_json(degenerate, "torchvision", dtype, Device::cpu).consistent());
  const auto judgement = op->judge_json(degenerate, "no_eps", DType::fp32, Device::cpu);
  ASSERT_EQ(judgement.verdicts.size(), 1u);
  EXPECT_EQ(judgement.verdicts[0].kind, FindingKind::nan);
}

TEST(GeneralizedBoxIouOp, TorchvisionPortMatchesTheOracle) {
  auto op = make_generalized_box_iou_harness(kernels::generalized_box_iou_targets({}));
  const auto input = corpus::to_json(BoxIouProblem{{{0, 0, 1, 1}, {0.5, 0.25, 3, 2}}, {{2, 0, 3, 1}, {0, 0, 1, 1}}});
  for (DType dtype : {DType::fp32, DType::fp64}) {
    const auto judgement = op->judge_json(input, "torchvision", dtype, Device::cpu);
    EXPECT_TRUE(judgement.consistent()) << judgement.verdicts[0].message;
  }
}

// box_area computed in the boxes' dtype, without torchvision's _upcast.
kernels::Target<BoxAreaProblem> area_in_box_dtype() {
  kernels::Target<BoxAreaProblem> target;
  target.name = "no_upcast";
  target.availability = [](Device) { return kernels::Availability{}; };
  target.run = [](const BoxAreaProblem& p, DType dtype, Device) {
    HostTensor areas{{static_cast<std::int64_t>(p.boxes.size())}, std::string(dtype_name(accumulate_type(dtype))), "cpu", {}};
    for (const Box& b : p.boxes)
      areas.values.push_back(round_to(dtype, round_to(dtype, b.x2 - b.x1) * round_to(dtype, b.y2 - b.y1)));
    return std::vector<HostTensor>{areas};
  };
  return target;
}

TEST(BoxAreaOp, UpcastAreasStayFiniteAndFp16AreasOverflow) {
  auto op = make_box_area_harness({kernels::box_area_targets({}).front(), area_in_box_dtype()});
  const auto large = corpus::to_json(BoxAreaProblem{{{0, 0, 300, 300}, {0, 0, 2, 0.5}}});  // 90,000 > fp16's max
  const auto faithful = op->judge_json(large, "aten", DType::fp16, Device::cpu);
  EXPECT_TRUE(faithful.consistent()) << faithful.verdicts[0].message;
  EXPECT_EQ(faithful.outputs.at(0).dtype, "fp32");
  const auto judgement = op->judge_json(large, "no_upcast", DType::fp16, Device::cpu);
  ASSERT_EQ(judgement.verdicts.size(), 1u);
  EXPECT_EQ(judgement.verdicts[0].kind, FindingKind::nan);
}

// d sum(loss) / d boxes by LibTorch autograd against the analytic gradient: no failing
// finding on the generated pairs (identical, nested, touching, disjoint, degenerate) in any
// dtype, and the gradient without eps caught on two empty boxes.
TEST(GiouLossBackwardOp, AutogradRaisesNoFailingFindingOnGeneratedPairs) {
  CampaignOptions o;
  o.cases_per_cell = 600;
  const reports::Report report = detfuzz::testing::in_process_campaign(
      make_giou_loss_backward_harness({kernels::giou_loss_backward_targets({}).front()}), o);
  for (const auto& f : report.findings) EXPECT_FALSE(f.fails) << f.dtype << " " << f.kind << ": " << f.message;
  for (const auto& cell : report.cells) EXPECT_EQ(cell.cases, 600u) << cell.dtype << " " << cell.reason;
}

TEST(GiouLossBackwardOp, IdenticalBoxesGetAFiniteGradientAndWithoutEpsEmptyBoxesGetNan) {
  auto op = make_giou_loss_backward_harness(kernels::giou_loss_backward_targets({}));
  const auto identical = corpus::to_json(GiouLossProblem{{{0, 0, 2, 2}, {1, 1, 1, 1}}, {{0, 0, 2, 2}, {1, 1, 1, 1}}, 1e-7,
                                                         RegressionLossProblem::Reduction::mean});
  for (DType dtype : {DType::fp16, DType::fp32, DType::fp64}) {
    const auto judgement = op->judge_json(identical, "torchvision", dtype, Device::cpu);
    EXPECT_TRUE(judgement.consistent()) << dtype_name(dtype) << ": " << judgement.verdicts[0].message;
  }
  const auto judgement = op->judge_json(identical, "mutant:giou_loss_backward_without_eps", DType::fp32, Device::cpu);
  ASSERT_FALSE(judgement.verdicts.empty());
  EXPECT_EQ(judgement.verdicts[0].kind, FindingKind::nan);
}

}  // namespace
}  // namespace detfuzz::fuzz
