// Class-aware NMS as the libraries write it around their NMS kernel, ported to ATen with
// their dtype behaviour, and torchvision::nms (the loaded op library) as that kernel:
// - torchvision torchvision/ops/boxes.py: batched_nms switches on boxes.numel() > 4,000 on
//   CPU (on CUDA 20,000 in 0.14.1, 100,000 from 0.22: batched_nms_vanilla_above, which
//   follows the loaded library's release) from _batched_nms_coordinate_trick (offsets
//   computed in the box dtype) to _batched_nms_vanilla (one nms per class, torch.unique order);
// - mmcv 1.7 mmcv/ops/nms.py batched_nms: offsets below split_thr (10,000 boxes), a
//   per-class loop at or above it (over torch.unique(idxs) even when class_agnostic) that
//   writes the kept scores into
//   `scores.new_zeros(scores.size())`, a buffer in the *scores'* dtype; class_agnostic and
//   max_num. Its nms is mmcv's own kernel, ported below line by line (mmcv_nms_cpu).
// torchvision has no class_agnostic or max_num: its targets do what its users do
// (ops.nms over all boxes; keep[:max_num]). Scores in another dtype than the boxes reach
// torchvision::nms as they are, as they do outside autocast.
#include "kernels/aten/batched_nms.h"

#include "kernels/factories.h"
#include "kernels/tensor_convert.h"
#include "kernels/torchvision/dispatch.h"
#include "model/error.h"

namespace detfuzz::kernels {
namespace {

constexpr std::int64_t kMmcvSplitThreshold = 10000;  // boxes

at::Tensor coordinate_trick(const at::Tensor& boxes, const at::Tensor& scores, const at::Tensor& idxs,
                            double iou_threshold) {
  if (boxes.numel() == 0) return at::empty({0}, boxes.options().dtype(at::kLong));
  at::Tensor max_coordinate = boxes.max();
  at::Tensor offsets = idxs.to(boxes.scalar_type()) * (max_coordinate + at::scalar_tensor(1, boxes.options()));
  return nms(boxes + offsets.unsqueeze(1), scores, iou_threshold);
}

enum class Strategy { switching, coordinate_trick, vanilla };

at::Tensor torchvision_batched_nms(const at::Tensor& boxes, const at::Tensor& scores, const at::Tensor& idxs,
                                   double iou_threshold, Strategy strategy, const TorchvisionRelease& release) {
  if (strategy == Strategy::switching) {
    const std::int64_t limit = batched_nms_vanilla_above(release, boxes.is_cuda() ? Device::cuda : Device::cpu);
    strategy = boxes.numel() > limit ? Strategy::vanilla : Strategy::coordinate_trick;
  }
  return strategy == Strategy::vanilla ? vanilla(boxes, scores, idxs, iou_threshold)
                                       : coordinate_trick(boxes, scores, idxs, iou_threshold);
}

// mmcv 1.7 mmcv/ops/csrc/pytorch/cpu/nms.cpp nms_cpu, with offset 0 as batched_nms calls
// it: boxes read through data_ptr<float>() (any other dtype raises c10's "expected scalar
// type Float but found ..."; the empty check comes first), areas and IoU in fp32, the
// threshold a float (NMSop passes float(iou_threshold) to a `float` parameter), `ovr >
// iou_threshold` in float, and scores.sort(0, descending) without stable=True: among equal
// scores any order (the replay accepts every order of equal scores). mmcv's CUDA kernel
// reads the same floats; on CUDA the loop runs on host copies, its answer moved back.
at::Tensor mmcv_nms_cpu(const at::Tensor& boxes, const at::Tensor& scores, float iou_threshold) {
  if (boxes.numel() == 0) return at::empty({0}, boxes.options().dtype(at::kLong));
  if (boxes.scalar_type() != at::kFloat)
    throw Error(ErrorKind::unsupported,
                std::string("mmcv 1.7's nms kernel reads boxes.data_ptr<float>() (mmcv/ops/csrc/pytorch/cpu/nms.cpp "
                            "nms_cpu): expected scalar type Float but found ") +
                    c10::toString(boxes.scalar_type()));
  const at::Tensor host_boxes = boxes.cpu();
  const at::Tensor x1_t = host_boxes.select(1, 0).contiguous(), y1_t = host_boxes.select(1, 1).contiguous();
  const at::Tensor x2_t = host_boxes.select(1, 2).contiguous(), y2_t = host_boxes.select(1, 3).contiguous();
  const at::Tensor areas_t = (x2_t - x1_t) * (y2_t - y1_t);
  const at::Tensor order_t = std::get<1>(scores.cpu().sort(0, /*descending=*/true));
  const std::int64_t nboxes = host_boxes.size(0);
  at::Tensor select_t = at::ones({nboxes}, host_boxes.options().dtype(at::kBool));
  bool* select = select_t.data_ptr<bool>();
  const std::int64_t* order = order_t.data_ptr<std::int64_t>();
  const float *x1 = x1_t.data_ptr<float>(), *y1 = y1_t.data_ptr<float>();
  const float *x2 = x2_t.data_ptr<float>(), *y2 = y2_t.data_ptr<float>();
  const float* areas = areas_t.data_ptr<float>();
  for (std::int64_t _i = 0; _i < nboxes; _i++) {
    if (!select[_i]) continue;
    const std::int64_t i = order[_i];
    for (std::int64_t _j = _i + 1; _j < nboxes; _j++) {
      if (!select[_j]) continue;
      const std::int64_t j = order[_j];
      const float xx1 = std::max(x1[i], x1[j]), yy1 = std::max(y1[i], y1[j]);
      const float xx2 = std::min(x2[i], x2[j]), yy2 = std::min(y2[i], y2[j]);
      const float w = std::max(0.f, xx2 - xx1), h = std::max(0.f, yy2 - yy1);
      const float inter = w * h;
      const float ovr = inter / (areas[i] + areas[j] - inter);
      if (ovr > iou_threshold) select[_j] = false;
    }
  }
  return order_t.masked_select(select_t).to(boxes.device());
}

// mmcv.ops.nms: (dets = cat(boxes[inds], scores[inds]), inds), cut to max_num.
std::pair<at::Tensor, at::Tensor> mmcv_nms(const at::Tensor& boxes, const at::Tensor& scores, double iou_threshold,
                                           std::int64_t max_num) {
  at::Tensor inds = mmcv_nms_cpu(boxes, scores, static_cast<float>(iou_threshold));
  if (max_num > 0) inds = inds.slice(0, 0, max_num);
  at::Tensor dets = at::cat({boxes.index_select(0, inds), scores.index_select(0, inds).reshape({-1, 1})}, 1);
  return {dets, inds};
}

std::vector<at::Tensor> mmcv_batched_nms(at::Tensor boxes, at::Tensor scores, const at::Tensor& idxs,
                                         double iou_threshold, bool class_agnostic, std::int64_t max_num) {
  at::Tensor boxes_for_nms = boxes;
  if (!class_agnostic) {
    at::Tensor max_coordinate = boxes.max();
    at::Tensor offsets = idxs.to(boxes.scalar_type()) * (max_coordinate + at::scalar_tensor(1, boxes.options()));
    boxes_for_nms = boxes + offsets.unsqueeze(1);
  }
  at::Tensor keep;
  if (boxes_for_nms.size(0) < kMmcvSplitThreshold) {
    auto [dets, kept] = mmcv_nms(boxes_for_nms, scores, iou_threshold, max_num);
    keep = kept;
    boxes = boxes.index_select(0, keep);
    scores = dets.select(1, 4);
  } else {
    at::Tensor total_mask = at::zeros(scores.sizes(), scores.options().dtype(at::kBool));
    at::Tensor scores_after_nms = at::zeros(scores.sizes(), scores.options());  // scores.new_zeros
    at::Tensor classes = std::get<0>(at::_unique(idxs));
    for (std::int64_t c = 0; c < classes.numel(); ++c) {
      at::Tensor mask = (idxs == classes[c]).nonzero().view(-1);
      // max_num was popped from nms_cfg_ before this loop: the per-class nms does not cut.
      auto [dets, kept] = mmcv_nms(boxes_for_nms.index_select(0, mask), scores.index_select(0, mask), iou_threshold, -1);
      total_mask.index_put_({mask.index_select(0, kept)}, true);
      scores_after_nms.index_put_({mask.index_select(0, kept)}, dets.select(1, 4));
    }
    keep = total_mask.nonzero().view(-1);
    auto [sorted_scores, inds] = scores_after_nms.index_select(0, keep).sort(0, true);
    keep = keep.index_select(0, inds);
    boxes = boxes.index_select(0, keep);
    scores = sorted_scores;
    if (max_num > 0) {
      keep = keep.slice(0, 0, max_num);
      boxes = boxes.slice(0, 0, max_num);
      scores = scores.slice(0, 0, max_num);
    }
  }
  return {keep, at::cat({boxes, scores.unsqueeze(1)}, -1)};
}

using Inputs = BatchedNmsInputs;

Inputs inputs(const BatchedNmsProblem& problem, DType dtype, Device device) {
  return {boxes_tensor(problem.boxes, dtype, device),
          values_tensor(problem.scores, problem.score_dtype.value_or(dtype), device),
          values_tensor(std::vector<double>(problem.classes.begin(), problem.classes.end()), DType::int64, device)};
}

Target<BatchedNmsProblem> batched_target(const KernelConfig& config, std::string name, std::string description,
                                         std::function<std::vector<at::Tensor>(const Inputs&, const BatchedNmsProblem&)> body) {
  Target<BatchedNmsProblem> target;
  target.name = std::move(name);
  target.description = std::move(description);
  target.availability = [config](Device device) -> Availability {
    const LibraryStatus& library = load_torchvision(config);
    if (!library.loaded) return {false, library.error};
    return op_availability("torchvision::nms", device);
  };
  target.run = [config, body](const BatchedNmsProblem& problem, DType dtype, Device device) {
    const LibraryStatus& library = load_torchvision(config);
    if (!library.loaded) throw Error(ErrorKind::unavailable, library.error);
    return translating_unsupported([&] {
      std::vector<HostTensor> outputs;
      for (const at::Tensor& output : body(inputs(problem, dtype, device), problem)) outputs.push_back(to_host(output));
      return outputs;
    });
  };
  return target;
}

Target<BatchedNmsProblem> torchvision_target(const KernelConfig& config, std::string name, std::string description,
                                             Strategy strategy) {
  return torchvision_style_target(config, std::move(name), std::move(description),
                                  [config, strategy](const at::Tensor& boxes, const at::Tensor& scores,
                                                     const at::Tensor& idxs, double iou_threshold) {
                                    return torchvision_batched_nms(boxes, scores, idxs, iou_threshold, strategy,
                                                                   load_torchvision(config).release);
                                  });
}

}  // namespace

// torchvision/ops/boxes.py batched_nms: `boxes.numel() > (4000 if boxes.device.type == "cpu"
// else 20000)` in 0.14.1; the CUDA limit became 100_000 with pytorch/vision#8925 (first in
// 0.22.0), `4000 if cpu else 100_000` in 0.26.0.
std::int64_t batched_nms_vanilla_above(const TorchvisionRelease& release, Device device) {
  if (device == Device::cpu) return 4000;  // 1,000 boxes
  return release.at_least(0, 22) ? 100000 : 20000;
}

at::Tensor nms(const at::Tensor& boxes, const at::Tensor& scores, double iou_threshold) {
  static const std::optional<c10::OperatorHandle> op = find_op("torchvision::nms");
  if (!op) throw Error(ErrorKind::unavailable, "torchvision::nms is not registered (torchvision's op library is not loaded)");
  return call_boxed(*op, {boxes, scores, iou_threshold}).at(0).toTensor();
}

at::Tensor vanilla(const at::Tensor& boxes, const at::Tensor& scores, const at::Tensor& idxs, double iou_threshold) {
  at::Tensor keep_mask = at::zeros_like(scores, scores.options().dtype(at::kBool));
  at::Tensor classes = std::get<0>(at::_unique(idxs));
  for (std::int64_t c = 0; c < classes.numel(); ++c) {
    at::Tensor current = at::where(idxs == classes[c])[0];
    at::Tensor kept = nms(boxes.index_select(0, current), scores.index_select(0, current), iou_threshold);
    keep_mask.index_put_({current.index_select(0, kept)}, true);
  }
  at::Tensor keep_indices = at::where(keep_mask)[0];
  return keep_indices.index_select(0, std::get<1>(scores.index_select(0, keep_indices).sort(0, true)));
}

Target<BatchedNmsProblem> torchvision_style_target(const KernelConfig& config, std::string name, std::string description,
                                                   ClassAwareNms class_aware) {
  return batched_target(config, std::move(name), std::move(description),
                        [class_aware](const Inputs& in, const BatchedNmsProblem& p) {
                          at::Tensor keep = p.class_agnostic ? nms(in.boxes, in.scores, p.iou_threshold)
                                                             : class_aware(in.boxes, in.scores, in.classes, p.iou_threshold);
                          if (p.max_num > 0) keep = keep.slice(0, 0, p.max_num);
                          return std::vector<at::Tensor>{keep};
                        });
}

std::vector<Target<BatchedNmsProblem>> aten_batched_nms_targets(const KernelConfig& config) {
  return {
      torchvision_target(config, "torchvision",
                         "ATen port of torchvision 0.14.1 ops.batched_nms: coordinate trick up to 1,000 boxes "
                         "(5,000 on CUDA), one nms per class above",
                         Strategy::switching),
      torchvision_target(config, "torchvision:coordinate_trick",
                         "torchvision 0.14.1 _batched_nms_coordinate_trick at any size (offsets in the box dtype)",
                         Strategy::coordinate_trick),
      torchvision_target(config, "torchvision:vanilla", "torchvision 0.14.1 _batched_nms_vanilla at any size (nms per class)",
                         Strategy::vanilla),
      batched_target(config, "mmcv",
                     "ATen port of mmcv 1.7 ops.batched_nms: offsets below split_thr = 10,000 boxes, per-class loop "
                     "with a kept-score buffer in the scores' dtype at or above it; mmcv's own fp32 nms kernel "
                     "(fp32 boxes only, as mmcv); outputs keep and dets [K, 5]",
                     [](const Inputs& in, const BatchedNmsProblem& p) {
                       return mmcv_batched_nms(in.boxes, in.scores, in.classes, p.iou_threshold, p.class_agnostic,
                                               p.max_num);
                     }),
  };
}

}  // namespace detfuzz::kernels
