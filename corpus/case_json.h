// The one serializer of case inputs: every op's problem to and from JSON, bit-exact.
// Finite doubles are written as JSON numbers in the shortest form that round-trips (so
// fp16/bf16/fp32 values, all exact doubles, come back bit for bit); NaN and +-Inf, which
// JSON lacks, are the strings "nan", "inf", "-inf".
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "model/problems.h"

namespace detfuzz::corpus {

nlohmann::json json_double(double value);
// Throws detfuzz::Error{input} naming `what` when `value` is not a number or one of the
// strings above.
double double_from_json(const nlohmann::json& value, const std::string& what);

nlohmann::json to_json(const NmsProblem& problem);
nlohmann::json to_json(const BatchedNmsProblem& problem);
nlohmann::json to_json(const BoxIouProblem& problem);
nlohmann::json to_json(const BoxAreaProblem& problem);
nlohmann::json to_json(const BoxCoderProblem& problem);
nlohmann::json to_json(const RegressionLossProblem& problem);
nlohmann::json to_json(const FastRcnnLossProblem& problem);
nlohmann::json to_json(const MatcherProblem& problem);
nlohmann::json to_json(const GiouLossProblem& problem);
nlohmann::json to_json(const RoiAlignProblem& problem);
nlohmann::json to_json(const RoiPoolProblem& problem);
nlohmann::json to_json(const RoiAlignBackwardProblem& problem);
nlohmann::json to_json(const RoiPoolBackwardProblem& problem);
nlohmann::json to_json(const PsRoiPoolBackwardProblem& problem);
nlohmann::json to_json(const DeformConv2dProblem& problem);

// Per-case resource caps: a case file (or a generator) asking for more is refused with the
// numbers and the fix, so that no case can exhaust memory.
inline constexpr std::size_t kMaxBoxesPerCase = 1 << 20;
inline constexpr std::size_t kMaxIousPerCase = 1 << 24;  // box_iou: rows x columns
inline constexpr std::size_t kMaxRoisPerCase = 1 << 16;
inline constexpr std::int64_t kMaxClassId = 1 << 20;  // batched_nms class ids

// Validating readers: a malformed input names the field, what was expected and what came.
NmsProblem nms_problem_from_json(const nlohmann::json& json);
BatchedNmsProblem batched_nms_problem_from_json(const nlohmann::json& json);
BoxIouProblem box_iou_problem_from_json(const nlohmann::json& json);
BoxAreaProblem box_area_problem_from_json(const nlohmann::json& json);
BoxCoderProblem box_coder_problem_from_json(const nlohmann::json& json);
RegressionLossProblem regression_loss_problem_from_json(const nlohmann::json& json);
FastRcnnLossProblem fast_rcnn_loss_problem_from_json(const nlohmann::json& json);
MatcherProblem matcher_problem_from_json(const nlohmann::json& json);
GiouLossProblem giou_loss_problem_from_json(const nlohmann::json& json);
RoiAlignProblem roi_align_problem_from_json(const nlohmann::json& json);
RoiPoolProblem roi_pool_problem_from_json(const nlohmann::json& json);
// The map's shape as "input_shape" (a backward reads no map values) and "grad", the forward
// output's gradient: [K, C, PH, PW] values, or [K, C / (PH * PW), PH, PW] when
// position_sensitive (whose C the grid must divide).
RoiAlignBackwardProblem roi_align_backward_problem_from_json(const nlohmann::json& json, bool position_sensitive);
// "input_shape", "grad" ([K, C, PH, PW] values) and "argmax" (as many integers, each -1 or a
// row-major index into the H x W plane).
RoiPoolBackwardProblem roi_pool_backward_problem_from_json(const nlohmann::json& json);
// "input_shape" (C a multiple of pooled_height * pooled_width) and "grad" ([K, C / (PH * PW),
// PH, PW] values).
PsRoiPoolBackwardProblem ps_roi_pool_backward_problem_from_json(const nlohmann::json& json);
// "input_shape" [N, C, H, W] (N may be 0), "out_channels", "kernel", "stride", "padding",
// "dilation" ([h, w] pairs), "groups", "offset_groups", "use_mask", and the flat row-major
// values "input", "weight" [O, C / groups, KH, KW], "offset" [N, 2 offset_groups KH KW, OH, OW],
// "mask" (as many without the 2, empty without use_mask) and "bias" [O].
DeformConv2dProblem deform_conv2d_problem_from_json(const nlohmann::json& json);

}  // namespace detfuzz::corpus
