// The one list of op families. Every layer expands what it needs from it, so that a new op
// is a row here plus the op's own files, and a forgotten piece is an error, not a gap:
//
//   DETFUZZ_OP(name, Problem, size_unit, bind_contract)
//
//   name           what the CLI, reports and case files call the op, and the stem of the
//                  functions each layer must define (a missing one fails to link):
//                    kernels:  std::vector<kernels::Target<Problem>> kernels::name_targets(const KernelConfig&)
//                    fuzz:     std::unique_ptr<OpHarness> fuzz::make_name_harness(std::vector<kernels::Target<Problem>>)
//                  and the harness must call itself op_name(OpId::name) (a test checks it).
//   Problem        the op's input (model/problems.h): what the generator makes, the oracle
//                  reads, the kernels take and the corpus serializes.
//   size_unit      what the op's case size counts (a minimized finding's "3 RoIs (from 40)").
//   bind_contract  the schema an op bound with --bind must have, in detfuzz's argument
//                  order, or nullptr when the family takes no bindings. nms, roi_align,
//                  roi_pool and ps_roi_pool are torchvision's C++ ops' schemas; the others torchvision
//                  0.14.1's Python signatures (ops/boxes.py, ops/giou_loss.py), so that
//                  torch.jit.script(torchvision.ops.X) binds as it is; box_coder wraps
//                  models/detection/_utils.py BoxCoder (encode_single / decode_single).
//
// The order of the rows is the order of `detfuzz list`, of a campaign's cells and reports.
#pragma once

#include <cstddef>
#include <iterator>
#include <string_view>

#define DETFUZZ_OP_TABLE(DETFUZZ_OP)                                                                                \
  DETFUZZ_OP(nms, NmsProblem, "boxes", "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")            \
  DETFUZZ_OP(batched_nms, BatchedNmsProblem, "boxes",                                                               \
             "batched_nms(Tensor boxes, Tensor scores, Tensor idxs, float iou_threshold) -> Tensor")                \
  DETFUZZ_OP(box_iou, BoxIouProblem, "boxes", "box_iou(Tensor boxes1, Tensor boxes2) -> Tensor")                    \
  DETFUZZ_OP(box_area, BoxAreaProblem, "boxes", "box_area(Tensor boxes) -> Tensor")                                 \
  DETFUZZ_OP(generalized_box_iou, BoxIouProblem, "boxes",                                                          \
             "generalized_box_iou(Tensor boxes1, Tensor boxes2) -> Tensor")                                         \
  DETFUZZ_OP(giou_loss, GiouLossProblem, "box pairs",                                                               \
             "generalized_box_iou_loss(Tensor boxes1, Tensor boxes2, str reduction, float eps) -> Tensor")          \
  DETFUZZ_OP(box_coder, BoxCoderProblem, "boxes",                                                                   \
             "box_coder(str mode, Tensor boxes, Tensor other, float[] weights, float clip) -> Tensor")              \
  DETFUZZ_OP(regression_loss, RegressionLossProblem, "values", nullptr)                                             \
  DETFUZZ_OP(fast_rcnn_loss, FastRcnnLossProblem, "proposals", nullptr)                                             \
  DETFUZZ_OP(matcher, MatcherProblem, "predictions", nullptr)                                                       \
  DETFUZZ_OP(roi_align, RoiAlignProblem, "RoIs",                                                                    \
             "roi_align(Tensor input, Tensor rois, float spatial_scale, int pooled_height, int pooled_width, "      \
             "int sampling_ratio, bool aligned) -> Tensor")                                                         \
  DETFUZZ_OP(roi_pool, RoiPoolProblem, "RoIs",                                                                      \
             "roi_pool(Tensor input, Tensor rois, float spatial_scale, int pooled_height, int pooled_width) "       \
             "-> (Tensor, Tensor)")                                                                                 \
  DETFUZZ_OP(ps_roi_align, RoiAlignProblem, "RoIs", nullptr)                                                        \
  DETFUZZ_OP(ps_roi_pool, RoiPoolProblem, "RoIs",                                                                   \
             "ps_roi_pool(Tensor input, Tensor rois, float spatial_scale, int pooled_height, int pooled_width) "    \
             "-> (Tensor, Tensor)")                                                                                 \
  DETFUZZ_OP(roi_align_backward, RoiAlignBackwardProblem, "RoIs", nullptr)                                          \
  DETFUZZ_OP(ps_roi_align_backward, RoiAlignBackwardProblem, "RoIs", nullptr)                                       \
  DETFUZZ_OP(roi_pool_backward, RoiPoolBackwardProblem, "RoIs", nullptr)                                            \
  DETFUZZ_OP(ps_roi_pool_backward, PsRoiPoolBackwardProblem, "RoIs", nullptr)                                       \
  DETFUZZ_OP(regression_loss_backward, RegressionLossProblem, "values", nullptr)                                    \
  DETFUZZ_OP(giou_loss_backward, GiouLossProblem, "box pairs", nullptr)                                             \
  DETFUZZ_OP(deform_conv2d, DeformConv2dProblem, "output elements", nullptr)

namespace detfuzz {

// An op family, for code that names one: OpId::roi_pool is checked by the compiler where
// the string "roi_pool" is not.
enum class OpId {
#define DETFUZZ_OP_ID(name, Problem, size_unit, bind_contract) name,
  DETFUZZ_OP_TABLE(DETFUZZ_OP_ID)
#undef DETFUZZ_OP_ID
};

struct OpRow {
  OpId id;
  const char* name;
  const char* size_unit;
  const char* bind_contract;  // nullptr: no --bind
};

inline constexpr OpRow kOpRows[] = {
#define DETFUZZ_OP_ROW(name, Problem, size_unit, bind_contract) {OpId::name, #name, size_unit, bind_contract},
    DETFUZZ_OP_TABLE(DETFUZZ_OP_ROW)
#undef DETFUZZ_OP_ROW
};

inline constexpr std::size_t kOpCount = std::size(kOpRows);

constexpr const char* op_name(OpId id) { return kOpRows[static_cast<std::size_t>(id)].name; }

// The row of an op named `name`; nullptr for a name that is no op.
inline const OpRow* find_op_row(std::string_view name) {
  for (const OpRow& row : kOpRows)
    if (name == row.name) return &row;
  return nullptr;
}

// What the size of a case of op `name` counts; "inputs" for a name that is no op (a report
// of another detfuzz version).
inline const char* op_size_unit(std::string_view name) {
  const OpRow* row = find_op_row(name);
  return row ? row->size_unit : "inputs";
}

}  // namespace detfuzz
