// box_iou written with ATen ops exactly as torchvision 0.14.1 writes it in Python
// (torchvision/ops/boxes.py: box_iou, _box_inter_union, box_area; ops/_utils.py: _upcast).
// Its dtype behaviour is the contract: areas are upcast to fp32 for fp16/bf16 input, but
// the intersection widths `rb - lt` are subtracted in the input dtype *before* _upcast.
#include "kernels/tensor_convert.h"
#include "kernels/target.h"

namespace detfuzz::kernels {
namespace {

at::Tensor upcast(const at::Tensor& t) {
  bool wide = t.scalar_type() == at::kFloat || t.scalar_type() == at::kDouble;
  return wide ? t : t.to(at::kFloat);
}

at::Tensor box_area(const at::Tensor& boxes) {
  at::Tensor b = upcast(boxes);
  return (b.select(1, 2) - b.select(1, 0)) * (b.select(1, 3) - b.select(1, 1));
}

at::Tensor box_iou(const at::Tensor& boxes1, const at::Tensor& boxes2) {
  at::Tensor area1 = box_area(boxes1);
  at::Tensor area2 = box_area(boxes2);
  at::Tensor lt = at::max(boxes1.unsqueeze(1).slice(2, 0, 2), boxes2.slice(1, 0, 2));  // [N,M,2]
  at::Tensor rb = at::min(boxes1.unsqueeze(1).slice(2, 2, 4), boxes2.slice(1, 2, 4));  // [N,M,2]
  at::Tensor wh = upcast(rb - lt).clamp_min(0);
  at::Tensor inter = wh.select(2, 0) * wh.select(2, 1);
  at::Tensor union_area = area1.unsqueeze(1) + area2 - inter;
  return inter / union_area;
}

}  // namespace

Target<BoxIouProblem> aten_box_iou_target() {
  Target<BoxIouProblem> target;
  target.name = "aten";
  target.description = "ATen port of torchvision 0.14.1 ops.box_iou (with its _upcast)";
  target.availability = aten_availability;
  target.arithmetic = {{"rb - lt"}, "torchvision 0.14.1 ops/boxes.py _box_inter_union: wh = _upcast(rb - lt)"};
  target.run = [](const BoxIouProblem& problem, DType dtype, Device device) {
    return translating_unsupported([&] {
      at::Tensor iou = box_iou(boxes_tensor(problem.boxes1, dtype, device),
                               boxes_tensor(problem.boxes2, dtype, device));
      return std::vector<HostTensor>{to_host(iou)};
    });
  };
  return target;
}

Target<BoxAreaProblem> aten_box_area_target() {
  Target<BoxAreaProblem> target;
  target.name = "aten";
  target.description = "ATen port of torchvision 0.14.1 ops.box_area (with its _upcast)";
  target.availability = aten_availability;
  target.run = [](const BoxAreaProblem& problem, DType dtype, Device device) {
    return translating_unsupported(
        [&] { return std::vector<HostTensor>{to_host(box_area(boxes_tensor(problem.boxes, dtype, device)))}; });
  };
  return target;
}

}  // namespace detfuzz::kernels
