// Box IoU mutants, each a correct box IoU with one deviation:
//
//   box_iou_legacy_plus_one  the pre-2019 "+1 pixel" convention in one place only: areas as
//                            (x2 - x1 + 1)(y2 - y1 + 1), the intersection without it (the
//                            half-migrated code of detectron -> detectron2 ports); twin:box_iou
//   box_iou_empty_shape      returns shape [0] instead of [N, 0] / [0, M] when a set is empty
//                            (a later .view(N, M) or indexing breaks on images without
//                            objects); twin: the ATen port of torchvision's box_iou
//   box_iou_fp64_output      returns float64 for float32 / float16 / bfloat16 input: the
//                            silent promotion (a Python float or a double buffer in the
//                            expression) that turns a float32 training loop's IoU into
//                            float64 and its losses into mixed-dtype errors or NaN seeds;
//                            twin: the ATen port
#include "kernels/factories.h"
#include "kernels/mutants/emulated_targets.h"

namespace detfuzz::kernels {

std::vector<Target<BoxIouProblem>> box_iou_mutants() {
  BoxIouVariant plus_one;
  plus_one.legacy_plus_one_area = true;
  return {
      emulated_box_iou("twin:box_iou", {},
                       "correct twin of the emulated box IoU mutants: pairwise IoU in plain C++, every step rounded "
                       "to the dtype's accumulate type"),
      emulated_box_iou("mutant:box_iou_legacy_plus_one", plus_one,
                       "box IoU with +1 pixel in the areas but not in the intersection"),
      deviating<BoxIouProblem>(
          aten_box_iou_target(), "mutant:box_iou_empty_shape",
          "torchvision's box_iou (ATen port) returning shape [0] when either box set is empty",
          [](const Target<BoxIouProblem>& twin, const BoxIouProblem& p, DType dtype, Device device) {
            std::vector<HostTensor> outputs = twin.run(p, dtype, device);
            if (p.boxes1.empty() || p.boxes2.empty()) outputs.at(0).shape = {0};
            return outputs;
          }),
      deviating<BoxIouProblem>(
          aten_box_iou_target(), "mutant:box_iou_fp64_output",
          "torchvision's box_iou (ATen port) whose output is promoted to float64",
          [](const Target<BoxIouProblem>& twin, const BoxIouProblem& p, DType dtype, Device device) {
            std::vector<HostTensor> outputs = twin.run(p, dtype, device);
            outputs.at(0).dtype = dtype_name(DType::fp64);
            return outputs;
          }),
  };
}

}  // namespace detfuzz::kernels
