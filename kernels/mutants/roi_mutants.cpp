// RoI mutants: torchvision's own roi_align / roi_pool called with one argument dropped,
// the way a plugin or an export path loses it (twin: the torchvision op, same library):
//
//   roi_align_ignores_spatial_scale  spatial_scale treated as 1.0: RoIs in image
//                                    coordinates read a feature map 1/16 the size
//                                    (silently wrong features, no error)
//   roi_align_ignores_aligned        aligned=True treated as False: every sample half a
//                                    pixel off (the Detectron2 pixel-model fix undone)
//   roi_pool_ignores_spatial_scale   as for RoIAlign, in max pooling
//
// PSRoIAlign's twin is the plain-C++ RoIAlign in its position-sensitive mode ("twin:ps_roi_align"):
// torchvision's sums fp16 in fp16, so it is a clean twin in fp32 and fp64 only.
//   ps_roi_align_ignores_spatial_scale   as for RoIAlign
//   ps_roi_align_channel_off_by_one      each bin reads the next input channel
//
// PSRoIPool's twin is the plain-C++ port (kernels/mutants/emulated_targets.cpp, "twin:ps_roi_pool"):
// torchvision's own kernel drops the map's last row and column (oracles/ps_roi_pool.h), so it
// is no clean twin.
//   ps_roi_pool_ignores_spatial_scale    as for RoIAlign
//   ps_roi_pool_channel_off_by_one       each bin reads the next input channel (an index
//                                        c_out * PH * PW + ph * PW + pw + 1, the R-FCN
//                                        score-map layout misread)
//   ps_roi_pool_clips_before_last_pixel  bin ends clipped to height - 1 and width - 1: what
//                                        torchvision's own forward does
//
// The backward twins are plain-C++ ports of torchvision's backward kernels in the accumulate
// type ("twin:roi_align_backward", "twin:ps_roi_align_backward"; torchvision adds into
// grad_input in T, so it is a clean twin in fp32 and fp64 only):
//   roi_align_backward_drops_corner              the (y_high, x_high) corner's g4 never added
//   roi_align_backward_ignores_spatial_scale     as for the forward
//   ps_roi_align_backward_channel_off_by_one     each bin's gradient lands in the next channel
//   ps_roi_align_backward_drops_corner           as for RoIAlign's
// RoIPool's backward twin, likewise ("twin:roi_pool_backward"):
//   roi_pool_backward_assigns                    `=` for `+=`: bins (of one RoI or of
//                                                several) sharing an argmax pixel keep the
//                                                last one's gradient only
//   roi_pool_backward_channel_off_by_one         each gradient lands in the next channel
// PSRoIPool's backward twin, likewise ("twin:ps_roi_pool_backward"):
//   ps_roi_pool_backward_channel_off_by_one      each bin's share lands in the next channel
//   ps_roi_pool_backward_clips_before_last_pixel bins clipped to height - 1 and width - 1 as
//                                                torchvision's forward does: the adjoint of
//                                                that forward, not of the op (the map's last
//                                                row and column get no gradient)
#include "kernels/factories.h"
#include "kernels/mutants/emulated_targets.h"

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

std::vector<Target<RoiAlignProblem>> ps_roi_align_mutants() {
  RoiAlignVariant correct, unscaled, shifted;
  correct.position_sensitive = unscaled.position_sensitive = shifted.position_sensitive = true;
  unscaled.ignores_spatial_scale = true;
  shifted.channel_off_by_one = true;
  return {
      emulated_roi_align("twin:ps_roi_align", correct, "position-sensitive RoIAlign forward in plain C++"),
      emulated_roi_align("mutant:ps_roi_align_ignores_spatial_scale", unscaled,
                         "PSRoIAlign with spatial_scale treated as 1.0"),
      emulated_roi_align("mutant:ps_roi_align_channel_off_by_one", shifted,
                         "PSRoIAlign reading input channel c_in + 1 for each bin"),
  };
}

std::vector<Target<RoiPoolProblem>> ps_roi_pool_mutants() {
  auto mutant = [](const std::string& name, PsRoiPoolVariant variant, const std::string& description) {
    return emulated_ps_roi_pool("mutant:" + name, variant, description);
  };
  PsRoiPoolVariant unscaled, shifted, clipped;
  unscaled.ignores_spatial_scale = true;
  shifted.channel_off_by_one = true;
  clipped.clips_before_last_pixel = true;
  return {
      emulated_ps_roi_pool("twin:ps_roi_pool"),
      mutant("ps_roi_pool_ignores_spatial_scale", unscaled, "PSRoIPool with spatial_scale treated as 1.0"),
      mutant("ps_roi_pool_channel_off_by_one", shifted, "PSRoIPool reading input channel c_in + 1 for each bin"),
      mutant("ps_roi_pool_clips_before_last_pixel", clipped,
             "PSRoIPool clipping bin ends to height - 1 and width - 1 (torchvision's forward)"),
  };
}

std::vector<Target<RoiAlignBackwardProblem>> roi_align_backward_family_mutants(bool position_sensitive) {
  const std::string op = position_sensitive ? "ps_roi_align_backward" : "roi_align_backward";
  const std::string kernel = position_sensitive ? "PSRoIAlign backward" : "RoIAlign backward";
  auto variant = [position_sensitive](auto change) {
    RoiAlignBackwardVariant v;
    v.position_sensitive = position_sensitive;
    change(v);
    return v;
  };
  std::vector<Target<RoiAlignBackwardProblem>> targets{
      emulated_roi_align_backward("twin:" + op, variant([](auto&) {}), kernel + " in plain C++ (accumulate type)"),
      emulated_roi_align_backward("mutant:" + op + "_drops_corner", variant([](auto& v) { v.drops_last_corner = true; }),
                                  kernel + " never adding the (y_high, x_high) corner's share")};
  if (position_sensitive)
    targets.push_back(emulated_roi_align_backward("mutant:" + op + "_channel_off_by_one",
                                                  variant([](auto& v) { v.channel_off_by_one = true; }),
                                                  kernel + " scattering into input channel c_in + 1"));
  else
    targets.push_back(emulated_roi_align_backward("mutant:" + op + "_ignores_spatial_scale",
                                                  variant([](auto& v) { v.ignores_spatial_scale = true; }),
                                                  kernel + " with spatial_scale treated as 1.0"));
  return targets;
}

std::vector<Target<RoiPoolBackwardProblem>> roi_pool_backward_mutants() {
  RoiPoolBackwardVariant assigns, shifted;
  assigns.assigns = true;
  shifted.channel_off_by_one = true;
  return {
      emulated_roi_pool_backward("twin:roi_pool_backward", {}, "RoIPool backward in plain C++ (accumulate type)"),
      emulated_roi_pool_backward("mutant:roi_pool_backward_assigns", assigns,
                                 "RoIPool backward assigning each gradient instead of adding it"),
      emulated_roi_pool_backward("mutant:roi_pool_backward_channel_off_by_one", shifted,
                                 "RoIPool backward adding into input channel c + 1"),
  };
}

std::vector<Target<PsRoiPoolBackwardProblem>> ps_roi_pool_backward_mutants() {
  PsRoiPoolVariant shifted, clipped;
  shifted.channel_off_by_one = true;
  clipped.clips_before_last_pixel = true;
  return {
      emulated_ps_roi_pool_backward("twin:ps_roi_pool_backward", {}, "PSRoIPool backward in plain C++ (accumulate type)"),
      emulated_ps_roi_pool_backward("mutant:ps_roi_pool_backward_channel_off_by_one", shifted,
                                    "PSRoIPool backward adding each bin's share into input channel c_in + 1"),
      emulated_ps_roi_pool_backward("mutant:ps_roi_pool_backward_clips_before_last_pixel", clipped,
                                    "PSRoIPool backward clipping bin ends to height - 1 and width - 1 (the adjoint of "
                                    "torchvision's forward)"),
  };
}

}  // namespace detfuzz::kernels
