// Faster R-CNN box coding written with ATen ops as torchvision 0.14.1 writes it
// (torchvision/models/detection/_utils.py: encode_boxes, BoxCoder.encode_single and
// decode_single), dtype behaviour included: everything in the codes' (decode) or the
// reference boxes' (encode) dtype, no upcast, weights as Python floats (decode) or a
// tensor in that dtype (encode), the clamp of dw/dh at bbox_xform_clip.
#include "kernels/tensor_convert.h"
#include "kernels/target.h"

namespace detfuzz::kernels {
namespace {

at::Tensor decode_single(const at::Tensor& rel_codes, at::Tensor boxes, const std::array<double, 4>& weights,
                         double clip) {
  boxes = boxes.to(rel_codes.scalar_type());
  at::Tensor widths = boxes.select(1, 2) - boxes.select(1, 0);
  at::Tensor heights = boxes.select(1, 3) - boxes.select(1, 1);
  at::Tensor ctr_x = boxes.select(1, 0) + 0.5 * widths;
  at::Tensor ctr_y = boxes.select(1, 1) + 0.5 * heights;
  at::Tensor dx = rel_codes.slice(1, 0, c10::nullopt, 4) / weights[0];
  at::Tensor dy = rel_codes.slice(1, 1, c10::nullopt, 4) / weights[1];
  at::Tensor dw = (rel_codes.slice(1, 2, c10::nullopt, 4) / weights[2]).clamp_max(clip);
  at::Tensor dh = (rel_codes.slice(1, 3, c10::nullopt, 4) / weights[3]).clamp_max(clip);
  at::Tensor pred_ctr_x = dx * widths.unsqueeze(1) + ctr_x.unsqueeze(1);
  at::Tensor pred_ctr_y = dy * heights.unsqueeze(1) + ctr_y.unsqueeze(1);
  at::Tensor pred_w = at::exp(dw) * widths.unsqueeze(1);
  at::Tensor pred_h = at::exp(dh) * heights.unsqueeze(1);
  at::Tensor c_to_c_h = at::scalar_tensor(0.5, pred_ctr_y.options()) * pred_h;
  at::Tensor c_to_c_w = at::scalar_tensor(0.5, pred_ctr_x.options()) * pred_w;
  return at::stack({pred_ctr_x - c_to_c_w, pred_ctr_y - c_to_c_h, pred_ctr_x + c_to_c_w, pred_ctr_y + c_to_c_h}, 2)
      .flatten(1);
}

at::Tensor encode_single(const at::Tensor& reference_boxes, const at::Tensor& proposals,
                         const std::array<double, 4>& weight_values) {
  at::Tensor weights = at::tensor(std::vector<double>(weight_values.begin(), weight_values.end()),
                                  reference_boxes.options().dtype(at::kDouble))
                           .to(reference_boxes.scalar_type());
  auto column = [](const at::Tensor& t, std::int64_t k) { return t.select(1, k).unsqueeze(1); };
  at::Tensor ex_widths = column(proposals, 2) - column(proposals, 0);
  at::Tensor ex_heights = column(proposals, 3) - column(proposals, 1);
  at::Tensor ex_ctr_x = column(proposals, 0) + 0.5 * ex_widths;
  at::Tensor ex_ctr_y = column(proposals, 1) + 0.5 * ex_heights;
  at::Tensor gt_widths = column(reference_boxes, 2) - column(reference_boxes, 0);
  at::Tensor gt_heights = column(reference_boxes, 3) - column(reference_boxes, 1);
  at::Tensor gt_ctr_x = column(reference_boxes, 0) + 0.5 * gt_widths;
  at::Tensor gt_ctr_y = column(reference_boxes, 1) + 0.5 * gt_heights;
  at::Tensor targets_dx = weights[0] * (gt_ctr_x - ex_ctr_x) / ex_widths;
  at::Tensor targets_dy = weights[1] * (gt_ctr_y - ex_ctr_y) / ex_heights;
  at::Tensor targets_dw = weights[2] * at::log(gt_widths / ex_widths);
  at::Tensor targets_dh = weights[3] * at::log(gt_heights / ex_heights);
  return at::cat({targets_dx, targets_dy, targets_dw, targets_dh}, 1);
}

}  // namespace

Target<BoxCoderProblem> aten_box_coder_target() {
  Target<BoxCoderProblem> target;
  target.name = "torchvision";
  target.description =
      "ATen port of torchvision models/detection/_utils.py BoxCoder (encode_single, decode_single; the same in "
      "0.14.1 and 0.26.0)";
  target.availability = aten_availability;
  // Every step in the codes' dtype (torch 1.13 has no Half clamp_max on the CPU, so fp16
  // runs from torch 2.x on): the anchor's width, pred_w and pred_h can pass fp16's range where
  // the corners fit.
  target.arithmetic = {{"*"}, "torchvision 0.14.1 / 0.26.0 models/detection/_utils.py: decode_single casts the "
                              "boxes to rel_codes.dtype, encode_boxes takes the weights in the boxes' dtype, and "
                              "every step follows in that dtype"};
  target.run = [](const BoxCoderProblem& p, DType dtype, Device device) {
    return translating_unsupported([&] {
      at::Tensor boxes = boxes_tensor(p.boxes, dtype, device);
      if (p.mode == BoxCoderProblem::Mode::encode)
        return std::vector<HostTensor>{to_host(encode_single(boxes_tensor(p.references, dtype, device), boxes, p.weights))};
      std::vector<Box> deltas;
      for (const auto& d : p.deltas) deltas.push_back({d[0], d[1], d[2], d[3]});
      return std::vector<HostTensor>{to_host(decode_single(boxes_tensor(deltas, dtype, device), boxes, p.weights, p.clip))};
    });
  };
  return target;
}

}  // namespace detfuzz::kernels
