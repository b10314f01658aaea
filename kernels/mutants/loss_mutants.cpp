// Loss mutants:
//
//   giou_loss_without_eps          generalized_box_iou_loss with eps = 0: two degenerate
//                                  (zero-area) boxes give 0 / 0 = NaN (torchvision added
//                                  the eps for exactly this); twin: its ATen port
//   fast_rcnn_loss_unguarded       the box loss divided by the number of positives, without
//                                  a guard: an image with no objects (all proposals
//                                  background) gives 0 / 0 = NaN and poisons the step;
//                                  twin: torchvision's fastrcnn_loss (ATen port), which
//                                  divides by the number of sampled proposals
#include "kernels/factories.h"

namespace detfuzz::kernels {

std::vector<Target<GiouLossProblem>> giou_loss_mutants() {
  return {
      rewriting<GiouLossProblem>(torchvision_giou_loss_target(), "giou_loss_without_eps",
                                 "torchvision's generalized_box_iou_loss (ATen port) with eps = 0",
                                 [](GiouLossProblem& p) { p.eps = 0; }),
  };
}

std::vector<Target<FastRcnnLossProblem>> fast_rcnn_loss_mutants() {
  return {renamed(torchvision_fast_rcnn_loss_target(BoxLossNormalizer::positives_unguarded),
                  "mutant:fast_rcnn_loss_unguarded",
                  "torchvision's fastrcnn_loss (ATen port) dividing the box loss by the number of positives")};
}

}  // namespace detfuzz::kernels
