// Internal to kernels/ (includes ATen): the pieces of the batched NMS ports that the
// batched NMS mutants (kernels/mutants/batched_nms_mutants.cpp) are built from.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <string>

#include "kernels/target.h"

namespace detfuzz::kernels {

// torchvision::nms of the loaded op library, called boxed.
at::Tensor nms(const at::Tensor& boxes, const at::Tensor& scores, double iou_threshold);

// torchvision 0.14.1 _batched_nms_vanilla: one nms per class (torch.unique order), kept
// indices by decreasing score.
at::Tensor vanilla(const at::Tensor& boxes, const at::Tensor& scores, const at::Tensor& idxs, double iou_threshold);

struct BatchedNmsInputs {
  at::Tensor boxes, scores, classes;
};

// A class-aware NMS (boxes, scores, class ids, IoU threshold) -> kept indices.
using ClassAwareNms = std::function<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, double)>;

// A target used the way torchvision's users call it: plain nms when the problem is class
// agnostic, `class_aware` otherwise, keep[:max_num].
Target<BatchedNmsProblem> torchvision_style_target(const KernelConfig& config, std::string name, std::string description,
                                                   ClassAwareNms class_aware);

}  // namespace detfuzz::kernels
