// The analytic loss gradients (oracles/loss_gradients.h) against central differences of the
// forward oracles on random problems away from kinks and ties, and by hand where the loss
// has no derivative: every subgradient at a zero residual, any share at a max / min tie, no
// true value where eps is 0 on empty boxes.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cmath>
#include <vector>

#include "oracles/giou.h"
#include "oracles/loss_gradients.h"
#include "oracles/losses.h"

namespace detfuzz::oracles {
namespace {

using Reduction = RegressionLossProblem::Reduction;

double loss_total(const std::vector<LossValue>& losses) {
  double total = 0;
  for (const auto& l : losses) total += l.value.value;
  return total;
}

double loss_total(const std::vector<OracleValue>& losses) {
  double total = 0;
  for (const auto& l : losses) total += l.value;
  return total;
}

// Residuals in eighths, beta in {1/9, 1, 2}: a step of 2^-20 crosses no kink unless a residual
// sits within it of 0 or beta, which the property skips.
RC_GTEST_PROP(LossGradients, RegressionLossGradientAgreesWithCentralDifferences, ()) {
  RegressionLossProblem p;
  p.loss = *rc::gen::element(RegressionLossProblem::Loss::smooth_l1, RegressionLossProblem::Loss::l1);
  p.beta = *rc::gen::element(1.0 / 9, 1.0, 2.0);
  p.reduction = *rc::gen::element(Reduction::none, Reduction::sum, Reduction::mean);
  const int n = *rc::gen::inRange(1, 6);
  for (int i = 0; i < n; ++i) {
    p.input.push_back(*rc::gen::inRange(-40, 41) / 8.0 + 1.0 / 3);
    p.target.push_back(*rc::gen::inRange(-40, 41) / 8.0);
  }
  const auto gradient = regression_loss_gradient(p, DType::fp64);
  RC_ASSERT(gradient.size() == p.input.size());
  const double h = 0x1p-20;
  for (std::size_t i = 0; i < p.input.size(); ++i) {
    const double d = p.input[i] - p.target[i];
    RC_PRE(std::fabs(d) > 4 * h && std::fabs(std::fabs(d) - p.beta) > 4 * h);
    RegressionLossProblem up = p, down = p;
    up.input[i] += h;
    down.input[i] -= h;
    const double numeric = (loss_total(regression_loss(up)) - loss_total(regression_loss(down))) / (2 * h);
    RC_ASSERT(std::fabs(numeric - gradient[i].value) <= 1e-6);
    RC_ASSERT(gradient[i].strict.low == gradient[i].value);
    RC_ASSERT(gradient[i].strict.high == gradient[i].value);
  }
}

TEST(LossGradients, AZeroResidualOfL1AcceptsEverySubgradientAndSmoothL1IsZeroThere) {
  RegressionLossProblem p{RegressionLossProblem::Loss::l1, {1.5, 2.0}, {1.5, 1.0}, 1.0, Reduction::mean};
  auto g = regression_loss_gradient(p, DType::fp32);
  EXPECT_EQ(g[0].value, 0.0);
  EXPECT_EQ(g[0].strict.low, -0.5);  // mean over 2: the subgradient [-1, 1] / 2
  EXPECT_EQ(g[0].strict.high, 0.5);
  EXPECT_EQ(g[1].value, 0.5);
  EXPECT_EQ(g[1].strict.low, 0.5);
  p.loss = RegressionLossProblem::Loss::smooth_l1;
  p.beta = 0;  // smooth L1 with beta 0 is L1: torch's CPU kernel gives -1 at zero residual, l1_loss 0
  g = regression_loss_gradient(p, DType::fp32);
  EXPECT_EQ(g[0].strict.low, -0.5);
  EXPECT_EQ(g[0].strict.high, 0.5);
  p.beta = 1;
  g = regression_loss_gradient(p, DType::fp32);
  EXPECT_EQ(g[0].strict.low, 0.0);  // smooth: d / beta = 0, no kink
  EXPECT_EQ(g[0].strict.high, 0.0);
  EXPECT_EQ(g[1].value, 0.5);  // |d| = beta: the linear branch, which the quadratic one meets
}

TEST(LossGradients, AResidualAtBetaThatRoundingMayMoveSpansBothBranches) {
  // |d| = 1 + 2^-20 beside beta 1: fp16's rounding may put it on either side, fp64's not.
  const RegressionLossProblem p{RegressionLossProblem::Loss::smooth_l1, {1 + 0x1p-20}, {0}, 1.0, Reduction::sum};
  const auto g = regression_loss_gradient(p, DType::fp16);
  EXPECT_EQ(g[0].value, 1.0);
  EXPECT_LT(g[0].storage.low, g[0].storage.high);
  EXPECT_EQ(g[0].storage.high, 1 + 0x1p-20);
}

// Boxes in quarters that neither touch nor tie (the property skips ties and shared edges):
// the GIoU loss is smooth there.
RC_GTEST_PROP(LossGradients, GiouLossGradientAgreesWithCentralDifferences, ()) {
  GiouLossProblem p;
  p.reduction = *rc::gen::element(Reduction::none, Reduction::sum, Reduction::mean);
  const int n = *rc::gen::inRange(1, 4);
  auto box = [] {
    const double x = *rc::gen::inRange(0, 40) / 4.0 + 1.0 / 7, y = *rc::gen::inRange(0, 40) / 4.0 + 1.0 / 11;
    return Box{x, y, x + *rc::gen::inRange(1, 30) / 4.0, y + *rc::gen::inRange(1, 30) / 4.0};
  };
  for (int i = 0; i < n; ++i) {
    p.boxes1.push_back(box());
    Box b = box();
    b.x1 += 1.0 / 64;  // off the quarter grid of boxes1: no coordinate of a pair ties
    b.y1 += 1.0 / 64;
    b.x2 += 1.0 / 32;
    b.y2 += 1.0 / 32;
    p.boxes2.push_back(b);
  }
  const auto gradient = giou_loss_gradient(p, DType::fp64);
  RC_ASSERT(gradient.size() == 8 * p.boxes1.size());
  const double h = 0x1p-24;
  for (std::size_t i = 0; i < p.boxes1.size(); ++i)
    for (int side = 0; side < 2; ++side)
      for (int k = 0; k < 4; ++k) {
        GiouLossProblem up = p, down = p;
        double* coordinate_up = &(side == 0 ? up.boxes1 : up.boxes2)[i].x1 + k;
        double* coordinate_down = &(side == 0 ? down.boxes1 : down.boxes2)[i].x1 + k;
        *coordinate_up += h;
        *coordinate_down -= h;
        const double numeric = (loss_total(giou_loss(up)) - loss_total(giou_loss(down))) / (2 * h);
        const GradientElement& g = gradient[4 * (side == 0 ? i : p.boxes1.size() + i) + static_cast<std::size_t>(k)];
        RC_ASSERT(std::fabs(numeric - g.value) <= 1e-6 * (1 + std::fabs(g.value)));
        RC_ASSERT(g.strict.low == g.value && g.strict.high == g.value);
      }
}

TEST(LossGradients, IdenticalBoxesTieEveryMaxAndMinAndAcceptAnyShare) {
  // Two identical boxes: every max / min of the loss ties, and IoU = 1 with no penalty.
  const GiouLossProblem p{{{0, 0, 2, 2}}, {{0, 0, 2, 2}}, 1e-7, Reduction::none};
  const auto g = giou_loss_gradient(p, DType::fp32);
  ASSERT_EQ(g.size(), 8u);
  for (const auto& e : g) {
    EXPECT_TRUE(std::isfinite(e.value));
    EXPECT_LE(e.strict.low, e.value);
    EXPECT_GE(e.strict.high, e.value);
    EXPECT_LT(e.strict.low, e.strict.high);  // a tie leaves a range of shares open
    EXPECT_FALSE(e.unconstrained);
  }
  // fp64's (and autograd's) half shares make the two boxes' gradients equal.
  for (int k = 0; k < 4; ++k) EXPECT_DOUBLE_EQ(g[static_cast<std::size_t>(k)].value, g[4 + static_cast<std::size_t>(k)].value);
}

TEST(LossGradients, EmptyBoxesWithEpsZeroHaveNoTrueGradientAndWithEpsAFiniteOne) {
  GiouLossProblem p{{{1, 1, 1, 1}}, {{1, 1, 1, 1}}, 0.0, Reduction::sum};
  for (const auto& e : giou_loss_gradient(p, DType::fp32)) EXPECT_TRUE(e.unconstrained);
  p.eps = 1e-7;
  for (const auto& e : giou_loss_gradient(p, DType::fp32)) {
    EXPECT_FALSE(e.unconstrained);
    EXPECT_TRUE(std::isfinite(e.value));
  }
}

TEST(LossGradients, DisjointBoxesGetTheEnclosingPenaltysGradientOnly) {
  // Apart along x: no intersection, so the gradient comes from the areas and the enclosing box.
  const GiouLossProblem p{{{0, 0, 1, 1}}, {{3, 0, 4, 1}}, 0.0, Reduction::none};
  const auto g = giou_loss_gradient(p, DType::fp64);
  // loss = 2 - I / U - U / C with I = 0, U = 2, C = 4 (x from 0 to 4, height 1). boxes1's x1
  // moves U and C alike (dU = dC = -dx1): d loss / d x1 = -(-C + U) / C^2 = 2 / 16.
  EXPECT_DOUBLE_EQ(g[0].value, 2.0 / 16);
  EXPECT_DOUBLE_EQ(g[6].value, -2.0 / 16);  // boxes2's x2, the mirror image
}

}  // namespace
}  // namespace detfuzz::oracles
