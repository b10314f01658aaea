#include "fuzz/compare/contract.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace detfuzz::compare {

std::string shape_string(const std::vector<std::int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

std::vector<std::int64_t> element_index(std::size_t flat, const std::vector<std::int64_t>& shape) {
  std::vector<std::int64_t> index(shape.size(), 0);
  for (std::size_t d = shape.size(); d-- > 0 && shape[d] > 0;) {
    index[d] = static_cast<std::int64_t>(flat % static_cast<std::size_t>(shape[d]));
    flat /= static_cast<std::size_t>(shape[d]);
  }
  return index;
}

std::optional<Verdict> check_contract(const HostTensor& output, const OutputContract& contract) {
  bool shape_ok = output.shape.size() == contract.shape.size();
  for (std::size_t d = 0; shape_ok && d < contract.shape.size(); ++d)
    shape_ok = contract.shape[d] < 0 || contract.shape[d] == output.shape[d];
  if (!shape_ok) {
    Verdict verdict{FindingKind::shape, "contract",
                    fmt::format("{} has shape {}, expected {}", contract.name,
                                shape_string(output.shape), shape_string(contract.shape)),
                    {{"expected_shape", contract.shape}, {"shape", output.shape}}};
    return verdict;
  }
  if (output.dtype != contract.dtype) {
    Verdict verdict{FindingKind::dtype, "contract",
                    fmt::format("{} has dtype {}, the op's contract says {}", contract.name,
                                output.dtype, contract.dtype),
                    {{"expected_dtype", contract.dtype}, {"dtype", output.dtype}}};
    return verdict;
  }
  const std::string expected_device = device_name(contract.device);
  if (output.device.rfind(expected_device, 0) != 0) {
    Verdict verdict{FindingKind::device, "contract",
                    fmt::format("{} is on device {}, expected {}", contract.name, output.device,
                                expected_device),
                    {{"expected_device", expected_device}, {"device", output.device}}};
    return verdict;
  }
  return std::nullopt;
}

}  // namespace detfuzz::compare
