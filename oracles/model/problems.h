// What a case is: the inputs of each op family as plain doubles, already rounded to the
// dtype the kernel receives. Oracles read exactly these values; kernels turn them into
// tensors; the corpus serializes them.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/dtype.h"

namespace detfuzz {

// (x1, y1, x2, y2) in continuous image coordinates: a box [0, 0, 2, 2] covers 2 x 2 units.
// Valid boxes have x1 <= x2 and y1 <= y2; zero width or height is allowed.
struct Box {
  double x1 = 0, y1 = 0, x2 = 0, y2 = 0;
  bool operator==(const Box& other) const {
    return x1 == other.x1 && y1 == other.y1 && x2 == other.x2 && y2 == other.y2;
  }
};

// The legacy convention (Detectron v1, old mmcv) counts pixels: width = x2 - x1 + 1.
// It is an explicit choice per op call, never mixed in silently.
enum class BoxConvention { continuous, legacy_plus_one };

struct NmsProblem {
  std::vector<Box> boxes;
  std::vector<double> scores;
  double iou_threshold = 0.5;
};

// Class-aware NMS: boxes of different classes never suppress each other. `score_dtype`
// set means the scores arrive in another dtype than the boxes (what autocast delivers:
// fp32 boxes with fp16 scores, or the reverse); the values are rounded to it. The mmcv
// options apply to every target: class_agnostic is plain NMS over all boxes, max_num > 0
// keeps the first max_num of the result.
struct BatchedNmsProblem {
  std::vector<Box> boxes;
  std::vector<double> scores;
  std::vector<std::int64_t> classes;
  double iou_threshold = 0.5;
  std::optional<DType> score_dtype;
  bool class_agnostic = false;
  std::int64_t max_num = -1;
};

// Faster R-CNN box coding (torchvision models/detection/_utils.py BoxCoder). decode: each
// box moved by its deltas (dx, dy, dw, dh) / weights, dw and dh clamped at `clip`;
// encode: the deltas that move each proposal onto its reference (ground-truth) box.
struct BoxCoderProblem {
  enum class Mode { encode, decode };
  Mode mode = Mode::decode;
  std::vector<Box> boxes;                    // decode: anchors / proposals; encode: proposals
  std::vector<Box> references;               // encode: one matched reference box per proposal
  std::vector<std::array<double, 4>> deltas;  // decode: one (dx, dy, dw, dh) per box
  std::array<double, 4> weights{1, 1, 1, 1};
  double clip = std::log(1000.0 / 16);       // torchvision's bbox_xform_clip
};

// Elementwise box-regression losses as torch.nn.functional computes them: smooth L1 with
// `beta` (beta 0 is L1's value) or plain L1, then the reduction.
struct RegressionLossProblem {
  enum class Loss { smooth_l1, l1 };
  enum class Reduction { none, sum, mean };
  Loss loss = Loss::smooth_l1;
  std::vector<double> input, target;
  double beta = 1.0;
  Reduction reduction = Reduction::mean;
};

// PyTorch's name of a reduction ("none", "sum", "mean"): case files and plugin calls use it.
inline const char* reduction_name(RegressionLossProblem::Reduction reduction) {
  static const char* const names[] = {"none", "sum", "mean"};
  return names[static_cast<int>(reduction)];
}

// The Fast R-CNN head loss (torchvision models/detection/roi_heads.py fastrcnn_loss):
// cross-entropy over the sampled proposals' class logits (mean), plus smooth L1
// (beta 1/9, sum) of the positive proposals' regression for their class, divided by the
// number of sampled proposals. Label 0 is background.
struct FastRcnnLossProblem {
  std::int64_t classes = 2;                       // C, background included
  std::vector<double> class_logits;               // [N x C]
  std::vector<std::int64_t> labels;               // [N], 0..C-1
  std::vector<double> box_regression;             // [N x 4C]
  std::vector<double> regression_targets;         // [N x 4]
};

// Anchor matching (torchvision models/detection/_utils.py Matcher): for each of N
// predictions the best of M ground truths by quality (IoU), -1 below `low`, -2 between
// `low` and `high`, and with allow_low_quality_matches every prediction that is some
// ground truth's best (ties included) keeps its match anyway.
struct MatcherProblem {
  std::int64_t ground_truths = 0, predictions = 0;
  std::vector<double> quality;  // [M x N] row-major
  double high = 0.7, low = 0.3;
  bool allow_low_quality_matches = true;
};

// GIoU loss between paired boxes (torchvision ops.generalized_box_iou_loss): boxes1[i]
// against boxes2[i], with `eps` guarding both divisions, then the reduction.
struct GiouLossProblem {
  std::vector<Box> boxes1, boxes2;
  double eps = 1e-7;
  RegressionLossProblem::Reduction reduction = RegressionLossProblem::Reduction::none;
};

// Areas of a box set (torchvision ops.box_area).
struct BoxAreaProblem {
  std::vector<Box> boxes;
};

struct BoxIouProblem {
  std::vector<Box> boxes1;
  std::vector<Box> boxes2;
};

// An NCHW feature map, row-major values.
struct FeatureMap {
  std::int64_t batch = 0, channels = 0, height = 0, width = 0;
  std::vector<double> values;

  double at(std::int64_t n, std::int64_t c, std::int64_t y, std::int64_t x) const {
    return values[static_cast<std::size_t>(((n * channels + c) * height + y) * width + x)];
  }
};

// A region of interest in image coordinates, and the image of the batch it belongs to
// (stored as a float in torchvision's [K, 5] layout, integral by contract).
struct Roi {
  double batch_index = 0, x1 = 0, y1 = 0, x2 = 0, y2 = 0;
  bool operator==(const Roi& other) const {
    return batch_index == other.batch_index && x1 == other.x1 && y1 == other.y1 &&
           x2 == other.x2 && y2 == other.y2;
  }
};

struct RoiAlignProblem {
  FeatureMap input;
  std::vector<Roi> rois;
  double spatial_scale = 1.0;
  std::int64_t pooled_height = 1, pooled_width = 1;
  std::int64_t sampling_ratio = -1;  // <= 0: adaptive, ceil(roi size / pooled size)
  bool aligned = false;              // shift by -0.5 pixel (continuous coordinates)
};

struct RoiPoolProblem {
  FeatureMap input;
  std::vector<Roi> rois;
  double spatial_scale = 1.0;
  std::int64_t pooled_height = 1, pooled_width = 1;
};

// The input of a RoI op's backward whose routing follows from the geometry alone
// (torchvision::_roi_align_backward, _ps_roi_align_backward, _ps_roi_pool_backward): the
// forward's geometry and the gradient of its output. forward.input carries the map's shape
// only (its values stay empty: a backward reads batch, channels, height and width); grad is
// [K, C_out, pooled_height, pooled_width] row-major, C_out the forward's output channels (C,
// or C / (PH * PW) for the position-sensitive ops, whose channel_mapping is the fixed
// c_in = (c_out * PH + ph) * PW + pw that their forwards return).
template <class Forward>
struct GradientOf {
  Forward forward;
  std::vector<double> grad;
};
using RoiAlignBackwardProblem = GradientOf<RoiAlignProblem>;
using PsRoiPoolBackwardProblem = GradientOf<RoiPoolProblem>;

// The input of RoIPool's backward (torchvision::_roi_pool_backward): the forward's shapes
// (forward.input's values stay empty), the gradient of its output [K, C, PH, PW] and the
// argmax the forward returned beside it (row-major index into the H x W plane, -1 for an
// empty bin), which routes each gradient value.
struct RoiPoolBackwardProblem {
  RoiPoolProblem forward;
  std::vector<double> grad;
  std::vector<std::int64_t> argmax;
};

// The input of torchvision::deform_conv2d (deformable convolution v1 without a mask, v2
// with one). Row-major tensors: input [N, C, H, W], weight [O, C / groups, KH, KW], offset
// [N, 2 * offset_groups * KH * KW, OH, OW] (per kernel tap a (dy, dx) pair), mask
// [N, offset_groups * KH * KW, OH, OW] (empty without use_mask), bias [O] (torchvision's
// Python wrapper passes zeros for bias=None). OH = (H + 2 pad_h - (dilation_h (KH - 1) + 1)) /
// stride_h + 1, OW likewise.
struct DeformConv2dProblem {
  std::int64_t batch = 0, in_channels = 0, height = 0, width = 0;
  std::int64_t out_channels = 0, kernel_h = 1, kernel_w = 1;
  std::int64_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dilation_h = 1, dilation_w = 1;
  std::int64_t groups = 1, offset_groups = 1;
  bool use_mask = false;
  std::vector<double> input, weight, offset, mask, bias;

  std::int64_t out_height() const { return (height + 2 * pad_h - (dilation_h * (kernel_h - 1) + 1)) / stride_h + 1; }
  std::int64_t out_width() const { return (width + 2 * pad_w - (dilation_w * (kernel_w - 1) + 1)) / stride_w + 1; }
};

enum class Device { cpu, cuda };
std::string device_name(Device device);
// The one reading of a device name ("cpu", "cuda"); nullopt for anything else.
std::optional<Device> parse_device(std::string_view name);

// A kernel's output brought back to the host: its shape, dtype and device as the kernel
// produced them (so a dtype leak or a wrong shape is visible) and its values as doubles
// (exact for every dtype detfuzz compares: fp16/bf16/fp32/fp64 and int64 below 2^53).
struct HostTensor {
  std::vector<std::int64_t> shape;
  std::string dtype;   // dtype_name() of the kernel's output dtype, or the library's own name
  std::string device;
  std::vector<double> values;
};

}  // namespace detfuzz
