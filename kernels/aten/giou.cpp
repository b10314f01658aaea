// torchvision 0.14.1 generalized IoU with ATen ops, dtype behaviour included:
// ops/boxes.py generalized_box_iou (box_iou's _box_inter_union, `rb - lt` before _upcast,
// the enclosing box's widths upcast) and ops/giou_loss.py generalized_box_iou_loss
// (_upcast_non_float first, which despite its name turns every dtype but fp32/fp64 into
// fp32, fp16 and bf16 included; _loss_inter_union, eps = 1e-7 in both divisions, mean of
// nothing = 0.0 * sum). Checked bit for bit against torch.jit.script of the real functions
// (tests/plugins/plugins_test.cpp, TorchScriptExports).
#include "kernels/tensor_convert.h"
#include "kernels/target.h"

namespace detfuzz::kernels {
namespace {

at::Tensor upcast(const at::Tensor& t) {
  return t.is_floating_point() && t.element_size() < 4 ? t.to(at::kFloat) : t;
}

at::Tensor box_area(const at::Tensor& boxes) {
  at::Tensor b = upcast(boxes);
  return (b.select(1, 2) - b.select(1, 0)) * (b.select(1, 3) - b.select(1, 1));
}

at::Tensor generalized_box_iou(const at::Tensor& boxes1, const at::Tensor& boxes2) {
  at::Tensor area1 = box_area(boxes1), area2 = box_area(boxes2);
  at::Tensor lt = at::max(boxes1.unsqueeze(1).slice(2, 0, 2), boxes2.slice(1, 0, 2));
  at::Tensor rb = at::min(boxes1.unsqueeze(1).slice(2, 2, 4), boxes2.slice(1, 2, 4));
  at::Tensor wh = upcast(rb - lt).clamp_min(0);
  at::Tensor inter = wh.select(2, 0) * wh.select(2, 1);
  at::Tensor union_area = area1.unsqueeze(1) + area2 - inter;
  at::Tensor iou = inter / union_area;
  at::Tensor lti = at::min(boxes1.unsqueeze(1).slice(2, 0, 2), boxes2.slice(1, 0, 2));
  at::Tensor rbi = at::max(boxes1.unsqueeze(1).slice(2, 2, 4), boxes2.slice(1, 2, 4));
  at::Tensor whi = upcast(rbi - lti).clamp_min(0);
  at::Tensor areai = whi.select(2, 0) * whi.select(2, 1);
  return iou - (areai - union_area) / areai;
}

at::Tensor upcast_non_float(const at::Tensor& t) {
  return t.scalar_type() == at::kFloat || t.scalar_type() == at::kDouble ? t : t.to(at::kFloat);
}

// `with_penalty` false drops the enclosing-box term (the IoU loss): a mutant's deviation.
at::Tensor giou_loss(const at::Tensor& input1, const at::Tensor& input2, double eps,
                     RegressionLossProblem::Reduction reduction, bool with_penalty = true) {
  const at::Tensor boxes1 = upcast_non_float(input1), boxes2 = upcast_non_float(input2);
  auto c = [](const at::Tensor& t, std::int64_t k) { return t.select(-1, k); };
  at::Tensor x1 = c(boxes1, 0), y1 = c(boxes1, 1), x2 = c(boxes1, 2), y2 = c(boxes1, 3);
  at::Tensor x1g = c(boxes2, 0), y1g = c(boxes2, 1), x2g = c(boxes2, 2), y2g = c(boxes2, 3);
  at::Tensor xkis1 = at::max(x1, x1g), ykis1 = at::max(y1, y1g), xkis2 = at::min(x2, x2g), ykis2 = at::min(y2, y2g);
  at::Tensor intsctk = at::zeros_like(x1);
  at::Tensor mask = (ykis2 > ykis1).logical_and(xkis2 > xkis1);
  intsctk.index_put_({mask}, (xkis2.index({mask}) - xkis1.index({mask})) * (ykis2.index({mask}) - ykis1.index({mask})));
  at::Tensor unionk = (x2 - x1) * (y2 - y1) + (x2g - x1g) * (y2g - y1g) - intsctk;
  at::Tensor iouk = intsctk / (unionk + eps);
  at::Tensor area_c = (at::max(x2, x2g) - at::min(x1, x1g)) * (at::max(y2, y2g) - at::min(y1, y1g));
  at::Tensor miouk = with_penalty ? iouk - ((area_c - unionk) / (area_c + eps)) : iouk;
  at::Tensor loss = 1 - miouk;
  if (reduction == RegressionLossProblem::Reduction::mean) return loss.numel() > 0 ? loss.mean() : 0.0 * loss.sum();
  if (reduction == RegressionLossProblem::Reduction::sum) return loss.sum();
  return loss;
}

}  // namespace

Target<BoxIouProblem> torchvision_generalized_box_iou_target() {
  Target<BoxIouProblem> target;
  target.name = "torchvision";
  target.description = "ATen port of torchvision 0.14.1 ops.generalized_box_iou (with its _upcast)";
  target.arithmetic = {{"rb - lt", "rbi - lti"},
                       "torchvision 0.14.1 ops/boxes.py: wh = _upcast(rb - lt), whi = _upcast(rbi - lti)"};
  target.availability = aten_availability;
  target.run = [](const BoxIouProblem& p, DType dtype, Device device) {
    return translating_unsupported([&] {
      return std::vector<HostTensor>{
          to_host(generalized_box_iou(boxes_tensor(p.boxes1, dtype, device), boxes_tensor(p.boxes2, dtype, device)))};
    });
  };
  return target;
}

Target<GiouLossProblem> torchvision_giou_loss_backward_target(bool with_penalty) {
  Target<GiouLossProblem> target;
  target.name = "torchvision";
  target.description =
      "LibTorch autograd of the ATen port of torchvision 0.14.1 ops.generalized_box_iou_loss: d sum(loss) / d boxes1, "
      "boxes2";
  target.availability = aten_availability;
  target.run = [with_penalty](const GiouLossProblem& p, DType dtype, Device device) {
    return translating_unsupported([&] {
      // Leaves of their own (boxes_tensor's result is a reshaped view).
      at::Tensor boxes1 = boxes_tensor(p.boxes1, dtype, device).clone().requires_grad_(true);
      at::Tensor boxes2 = boxes_tensor(p.boxes2, dtype, device).clone().requires_grad_(true);
      giou_loss(boxes1, boxes2, p.eps, p.reduction, with_penalty).sum().backward();
      auto grad_of = [](const at::Tensor& boxes) {
        const at::Tensor grad = boxes.grad();
        return to_host(grad.defined() ? grad : at::zeros_like(boxes));
      };
      return std::vector<HostTensor>{grad_of(boxes1), grad_of(boxes2)};
    });
  };
  return target;
}

Target<GiouLossProblem> torchvision_giou_loss_target() {
  Target<GiouLossProblem> target;
  target.name = "torchvision";
  target.description = "ATen port of torchvision 0.14.1 ops.generalized_box_iou_loss (fp16/bf16 upcast to fp32, eps in both divisions)";
  target.availability = aten_availability;
  target.run = [](const GiouLossProblem& p, DType dtype, Device device) {
    return translating_unsupported([&] {
      return std::vector<HostTensor>{
          to_host(giou_loss(boxes_tensor(p.boxes1, dtype, device), boxes_tensor(p.boxes2, dtype, device), p.eps, p.reduction))};
    });
  };
  return target;
}

}  // namespace detfuzz::kernels
