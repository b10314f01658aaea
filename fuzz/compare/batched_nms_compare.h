// Class-aware NMS judged by the same ambiguity-aware replay as NMS (nms_replay.h), with
// boxes of different classes never suppressing each other, a max_num cut, the global
// score order, and mmcv's dets output. A kept set that per-class NMS cannot explain is
// tried once more against NMS over the class-offset boxes (oracles::offset_boxes): when
// that explains it, the finding names the coordinate trick (`coordinate_offset`: offsets
// rounded in the box dtype, or overflowing it) or, when the offsets let classes overlap,
// `class_separation`.
#pragma once

#include <vector>

#include "fuzz/compare/verdict.h"
#include "model/dtype.h"
#include "model/problems.h"

namespace detfuzz::compare {

// outputs[0] = keep (int64 [K]); outputs[1], when present = dets [K, 5] (boxes, score).
Judgement judge_batched_nms_output(const BatchedNmsProblem& problem, const std::vector<HostTensor>& outputs,
                                   DType dtype, Device device);

}  // namespace detfuzz::compare
