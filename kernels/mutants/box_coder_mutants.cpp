// Box coder mutants (twin: the ATen port of torchvision's BoxCoder):
//
//   box_decode_unclamped  decode without clamping dw / dh at bbox_xform_clip = log(1000/16):
//                         an early-training delta of 20 becomes exp(20) = 4.9e8 times the
//                         anchor, inf in fp16 and a NaN loss a few steps later
#include <limits>

#include "kernels/factories.h"

namespace detfuzz::kernels {

std::vector<Target<BoxCoderProblem>> box_coder_mutants() {
  return {
      rewriting<BoxCoderProblem>(aten_box_coder_target(), "box_decode_unclamped",
                                 "torchvision's BoxCoder (ATen port) decoding without the dw/dh clamp",
                                 [](BoxCoderProblem& p) { p.clip = std::numeric_limits<double>::infinity(); }),
  };
}

}  // namespace detfuzz::kernels
