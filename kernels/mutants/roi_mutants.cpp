// RoI mutants: torchvision's own roi_align / roi_pool called with one argument dropped,
// the way a plugin or an export path loses it (twin: the torchvision op, same library):
//
//   roi_align_ignores_spatial_scale  spatial_scale treated as 1.0: RoIs in image
//                                    coordinates read a feature map 1/16 the size
//                                    (silently wrong features, no error)
//   roi_align_ignores_aligned        aligned=True treated as False: every sample half a
//                                    pixel off (the Detectron2 pixel-model fix undone)
//   roi_pool_ignores_spatial_scale   as for RoIAlign, in max pooling
#include "kernels/factories.h"

namespace detfuzz::kernels {
std::vector<Target<RoiAlignProblem>> roi_align_mutants(const KernelConfig& config) {
  return {
      rewriting<RoiAlignProblem>(torchvision_roi_align_target(config), "roi_align_ignores_spatial_scale",
                                 "torchvision::roi_align called with spatial_scale 1.0 whatever was asked",
                                 [](RoiAlignProblem& p) { p.spatial_scale = 1.0; }),
      rewriting<RoiAlignProblem>(torchvision_roi_align_target(config), "roi_align_ignores_aligned",
                                 "torchvision::roi_align called with aligned=False whatever was asked",
                                 [](RoiAlignProblem& p) { p.aligned = false; }),
  };
}

std::vector<Target<RoiPoolProblem>> roi_pool_mutants(const KernelConfig& config) {
  return {
      rewriting<RoiPoolProblem>(torchvision_roi_pool_target(config), "roi_pool_ignores_spatial_scale",
                                "torchvision::roi_pool called with spatial_scale 1.0 whatever was asked",
                                [](RoiPoolProblem& p) { p.spatial_scale = 1.0; }),
  };
}

}  // namespace detfuzz::kernels
