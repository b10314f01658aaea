// Matcher mutants (twin: the ATen port of torchvision's det_utils.Matcher):
//
//   matcher_swapped_low_quality_axis  set_low_quality_matches_ takes the best quality per
//                                     prediction (max over dim 0) instead of per ground
//                                     truth: every prediction is re-matched to its best
//                                     ground truth, so below-threshold anchors silently
//                                     become positives and a ground truth's only anchor
//                                     is no longer guaranteed one (the axes of the two
//                                     argmaxes mixed up)
#include "kernels/factories.h"

namespace detfuzz::kernels {

std::vector<Target<MatcherProblem>> matcher_mutants() {
  return {renamed(torchvision_matcher_target(LowQualityAxis::swapped), "mutant:matcher_swapped_low_quality_axis",
                  "torchvision's Matcher (ATen port) with the low-quality argmax over the wrong axis")};
}

}  // namespace detfuzz::kernels
