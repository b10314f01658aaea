#include "kernels/run_policy.h"

#include <ATen/Context.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <sstream>

namespace detfuzz::kernels {
namespace {

bool is_backward(std::string_view op) {
  constexpr std::string_view suffix = "_backward";
  return op.size() >= suffix.size() && op.substr(op.size() - suffix.size()) == suffix;
}

std::uint64_t bits_of(double value) {
  std::uint64_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

std::string joined(const std::vector<std::int64_t>& values) {
  std::ostringstream out;
  out << '[';
  for (std::size_t i = 0; i < values.size(); ++i) out << (i ? ", " : "") << values[i];
  out << ']';
  return out.str();
}

// "[1, 0, 2, 3]": the row-major index `flat` of a tensor of `shape`.
std::string index_in(const std::vector<std::int64_t>& shape, std::size_t flat) {
  std::vector<std::int64_t> index(shape.size(), 0);
  auto rest = static_cast<std::int64_t>(flat);
  for (std::size_t d = shape.size(); d-- > 0;) {
    if (shape[d] <= 0) continue;
    index[d] = rest % shape[d];
    rest /= shape[d];
  }
  return joined(index);
}

// "0.30000001192092896 (0x1.333334p-2)": the value people read and its exact bits.
std::string exactly(double value) {
  std::ostringstream out;
  out.precision(17);
  out << value << " (" << std::hexfloat << value << ")";
  return out.str();
}

}  // namespace

int repeats_for(const KernelConfig& config, std::string_view op, Device device) {
  if (config.repeats > 0) return config.repeats;
  return device == Device::cuda && is_backward(op) ? kDefaultBackwardCudaRepeats : 1;
}

std::string repeats_description(const KernelConfig& config) {
  if (config.repeats > 0)
    return std::to_string(config.repeats) + " per call (--repeat " + std::to_string(config.repeats) + ")";
  return "1 per call; backward ops on cuda: " + std::to_string(kDefaultBackwardCudaRepeats);
}

std::optional<std::string> first_difference(const std::vector<HostTensor>& first, const std::vector<HostTensor>& again) {
  if (first.size() != again.size())
    return std::to_string(first.size()) + " outputs, then " + std::to_string(again.size());
  for (std::size_t o = 0; o < first.size(); ++o) {
    const HostTensor& a = first[o];
    const HostTensor& b = again[o];
    const std::string output = "output " + std::to_string(o);
    if (a.shape != b.shape) return output + " has shape " + joined(a.shape) + ", then " + joined(b.shape);
    if (a.dtype != b.dtype || a.device != b.device)
      return output + " is " + a.dtype + " on " + a.device + ", then " + b.dtype + " on " + b.device;
    if (a.values.size() != b.values.size())
      return output + " has " + std::to_string(a.values.size()) + " values, then " + std::to_string(b.values.size());
    std::size_t differing = 0, at = 0;
    for (std::size_t i = 0; i < a.values.size(); ++i)
      if (bits_of(a.values[i]) != bits_of(b.values[i]) && differing++ == 0) at = i;
    if (differing > 0)
      return output + " element " + index_in(a.shape, at) + " is " + exactly(a.values[at]) + ", then " +
             exactly(b.values[at]) + "; " + std::to_string(differing) + " of " + std::to_string(a.values.size()) +
             " elements differ";
  }
  return std::nullopt;
}

void apply_determinism(const KernelConfig& config) {
  // cuBLAS is deterministic only with a fixed workspace; LibTorch refuses its ops under
  // deterministic algorithms otherwise. Set before CUDA starts, never over the user's value.
  if (config.deterministic) ::setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", 0);
  at::globalContext().setDeterministicAlgorithms(config.deterministic, /*warn_only=*/false);
}

bool is_determinism_refusal(std::string_view message) {
  return message.find("does not have a deterministic implementation") != std::string_view::npos;
}

}  // namespace detfuzz::kernels
