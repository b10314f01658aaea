// Reference Faster R-CNN box coding in double, in torchvision 0.14.1's operation order
// (torchvision/models/detection/_utils.py: encode_boxes, BoxCoder.decode_single), each
// output with its running error bound per format (running_error.h).
#pragma once

#include <array>
#include <vector>

#include "model/dtype.h"
#include "model/problems.h"
#include "running_error.h"

namespace detfuzz::oracles {

// [N x 4] row-major: decoded (x1, y1, x2, y2), or encoded (dx, dy, dw, dh). Undefined:
// a proposal of zero width or height in encode (division by 0), or a reference of zero
// width or height (log 0).
std::vector<OracleValue> box_coder(const BoxCoderProblem& problem);

}  // namespace detfuzz::oracles
