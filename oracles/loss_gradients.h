// Reference gradients of the composite losses, analytic and in fp64: what LibTorch autograd
// owes the gradient of a loss with respect to its inputs. Each is the derivative of the
// forward oracle's own definition (oracles/losses.h, oracles/giou.h): smooth L1 / L1 of
// PyTorch's aten/src/ATen/native/Loss.cpp, torchvision 0.14.1 (= 0.26.0)
// ops/giou_loss.py generalized_box_iou_loss. Of a reduction "none" the gradient of the sum
// (autograd with ones as the upstream gradient), of "mean" the sum's divided by the count.
//
// Where the loss has no derivative, any subgradient is correct and the interval holds them
// all: |d| at d = 0 (L1, and smooth L1 with beta 0: PyTorch's CPU kernel returns -1 there,
// l1_loss's backward 0, both right; CUDA's 0/0 = NaN before torch 2.1 is pytorch#96813);
// max / min at a tie (identical and touching boxes; autograd gives each side half). A kink
// that rounding in a tier may cross (|x - y| within its rounding of beta) widens that tier to
// both branches.
//
// Precision policy: the value is fp64; each tier's bound is kGradientRoundings roundings of
// that tier's unit roundoff on every product term of the expanded derivative (an autograd
// graph evaluates the same terms in an order of its own, cancellation included), plus the
// subnormal floor.
#pragma once

#include <vector>

#include "model/dtype.h"
#include "model/problems.h"

namespace detfuzz::oracles {

// The roundings one product term of a derivative may see in any evaluation order (each
// factor's own, the products', the sums'): a generous count.
inline constexpr double kGradientRoundings = 16;

struct GradientTier {
  double low = 0, high = 0;  // the exact values over every subgradient and branch the tier leaves open
  double bound = 0;          // what the tier's rounding may add beyond them
};

struct GradientElement {
  double value = 0;           // fp64, subgradients resolved as fp64 decides (0 at a kink, half at a tie)
  GradientTier strict{};      // accumulate-type arithmetic
  GradientTier storage{};     // storage-dtype arithmetic
  bool range_ok = true;       // every intermediate within the accumulate type's range
  bool unconstrained = false; // a hostile value (NaN, infinite) reaches it: anything goes
};

// d sum(loss) / d input, one element per input value (the target's gradient is its negative).
std::vector<GradientElement> regression_loss_gradient(const RegressionLossProblem& problem, DType storage);

// d loss / d boxes1 and d boxes2, [N, 4] each (boxes1's first), for torchvision's GIoU loss
// with its eps in both divisions and no clamp on the enclosing box.
std::vector<GradientElement> giou_loss_gradient(const GiouLossProblem& problem, DType storage);

}  // namespace detfuzz::oracles
