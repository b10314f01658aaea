#include "kernels/factories.h"
#include "kernels/mutants/emulated_targets.h"

namespace detfuzz::kernels {

std::vector<Target<DeformConv2dProblem>> deform_conv2d_mutants() {
  DeformConv2dVariant swapped, unmasked;
  swapped.swaps_offset_xy = true;
  unmasked.ignores_mask = true;
  return {
      emulated_deform_conv2d("twin:deform_conv2d", {}, "deform_conv2d forward in plain C++ (accumulate type)"),
      emulated_deform_conv2d("mutant:deform_conv2d_swaps_offset_xy", swapped,
                             "deform_conv2d reading each tap's (dy, dx) offset pair as (dx, dy)"),
      emulated_deform_conv2d("mutant:deform_conv2d_ignores_mask", unmasked,
                             "deform_conv2d weighing every sample 1 whatever the mask (DCNv1 where v2 was asked)"),
  };
}

}  // namespace detfuzz::kernels
