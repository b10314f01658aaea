// Reference Faster R-CNN box coding in double, in torchvision 0.14.1's operation order
// (torchvision/models/detection/_utils.py: encode_boxes, BoxCoder.decode_single), each
// output with its running error bound per format (running_error.h).
#pragma once

#include <array>
#include <vector>

#include "model/dtype.h"
#include "model/problems.h"

namespace detfuzz::oracles {

struct CodedValue {
  double value = 0;
  // No true value: a proposal of zero width or height (division by 0), or a reference of
  // zero width or height in encode (log 0).
  bool undefined = false;
  std::array<double, kFloatDTypes.size()> error_bound{};
  std::array<bool, kFloatDTypes.size()> in_range{};

  double bound(DType compute) const;
  bool range_ok(DType compute) const;
};

// [N x 4] row-major: decoded (x1, y1, x2, y2), or encoded (dx, dy, dw, dh).
std::vector<CodedValue> box_coder(const BoxCoderProblem& problem);

}  // namespace detfuzz::oracles
