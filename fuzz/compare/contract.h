// The op family's contract for an output: shape, dtype, device. Checked before values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fuzz/compare/verdict.h"
#include "model/problems.h"

namespace detfuzz::compare {

struct OutputContract {
  std::string name;                  // "keep", "iou": how messages refer to the output
  std::vector<std::int64_t> shape;   // -1 = any extent
  std::string dtype;
  Device device = Device::cpu;
};

std::optional<Verdict> check_contract(const HostTensor& output, const OutputContract& contract);

std::string shape_string(const std::vector<std::int64_t>& shape);

// The multi-dimensional index of row-major element `flat` of a tensor of `shape`.
std::vector<std::int64_t> element_index(std::size_t flat, const std::vector<std::int64_t>& shape);

}  // namespace detfuzz::compare
