// Loss mutants:
//
//   giou_loss_without_eps          generalized_box_iou_loss with eps = 0: two degenerate
//                                  (zero-area) boxes give 0 / 0 = NaN (torchvision added
//                                  the eps for exactly this); twin: its ATen port
//   giou_loss_backward_without_eps the gradient of that loss: NaN on the same pairs
//   giou_loss_backward_iou_only    the gradient of 1 - IoU, the enclosing-box penalty
//                                  dropped (a "GIoU" loss that is an IoU loss: disjoint
//                                  boxes get no gradient); twin: torchvision's, by autograd
//   regression_loss_backward_mean_as_sum   reduction "mean" differentiated as "sum": every
//                                  gradient N times too large; twin: torch's autograd
//   smooth_l1_backward_zero_beta_nan       smooth L1 with beta 0 differentiated as
//                                  torch < 2.1's CUDA kernel does, `grad * x / beta` at
//                                  x = 0: NaN at every zero residual (pytorch#96813)
//   fast_rcnn_loss_unguarded       the box loss divided by the number of positives, without
//                                  a guard: an image with no objects (all proposals
//                                  background) gives 0 / 0 = NaN and poisons the step;
//                                  twin: torchvision's fastrcnn_loss (ATen port), which
//                                  divides by the number of sampled proposals
#include <cmath>

#include "kernels/factories.h"

namespace detfuzz::kernels {

std::vector<Target<GiouLossProblem>> giou_loss_mutants() {
  return {
      rewriting<GiouLossProblem>(torchvision_giou_loss_target(), "giou_loss_without_eps",
                                 "torchvision's generalized_box_iou_loss (ATen port) with eps = 0",
                                 [](GiouLossProblem& p) { p.eps = 0; }),
  };
}

std::vector<Target<GiouLossProblem>> giou_loss_backward_mutants() {
  return {
      rewriting<GiouLossProblem>(torchvision_giou_loss_backward_target(), "giou_loss_backward_without_eps",
                                 "autograd of torchvision's generalized_box_iou_loss (ATen port) with eps = 0",
                                 [](GiouLossProblem& p) { p.eps = 0; }),
      renamed(torchvision_giou_loss_backward_target(false), "mutant:giou_loss_backward_iou_only",
              "autograd of torchvision's generalized_box_iou_loss (ATen port) without the enclosing-box penalty"),
  };
}

std::vector<Target<RegressionLossProblem>> regression_loss_backward_mutants() {
  return {
      rewriting<RegressionLossProblem>(aten_regression_loss_backward_target(), "regression_loss_backward_mean_as_sum",
                                       "torch's autograd of smooth_l1_loss / l1_loss with reduction mean taken as sum",
                                       [](RegressionLossProblem& p) {
                                         if (p.reduction == RegressionLossProblem::Reduction::mean)
                                           p.reduction = RegressionLossProblem::Reduction::sum;
                                       }),
      deviating<RegressionLossProblem>(
          aten_regression_loss_backward_target(), "mutant:smooth_l1_backward_zero_beta_nan",
          "torch's autograd of smooth_l1_loss, with torch < 2.1's CUDA 0/0 at a zero residual when beta = 0",
          [](const Target<RegressionLossProblem>& base, const RegressionLossProblem& p, DType dtype, Device device) {
            std::vector<HostTensor> outputs = base.run(p, dtype, device);
            if (p.loss == RegressionLossProblem::Loss::smooth_l1 && p.beta == 0)
              for (std::size_t i = 0; i < p.input.size() && i < outputs.front().values.size(); ++i)
                if (p.input[i] == p.target[i]) outputs.front().values[i] = std::nan("");
            return outputs;
          }),
  };
}

std::vector<Target<FastRcnnLossProblem>> fast_rcnn_loss_mutants() {
  return {renamed(torchvision_fast_rcnn_loss_target(BoxLossNormalizer::positives_unguarded),
                  "mutant:fast_rcnn_loss_unguarded",
                  "torchvision's fastrcnn_loss (ATen port) dividing the box loss by the number of positives")};
}

}  // namespace detfuzz::kernels
