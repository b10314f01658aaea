#include "model/finding_kind.h"
#include "model/problems.h"

namespace detfuzz {

std::string device_name(Device device) { return device == Device::cpu ? "cpu" : "cuda"; }

std::optional<Device> parse_device(std::string_view name) {
  if (name == "cpu") return Device::cpu;
  if (name == "cuda") return Device::cuda;
  return std::nullopt;
}

std::string_view finding_kind_name(FindingKind kind) {
  switch (kind) {
    case FindingKind::mismatch: return "mismatch";
    case FindingKind::precision: return "precision";
    case FindingKind::nan: return "nan";
    case FindingKind::overflow: return "overflow";
    case FindingKind::dtype_overflow: return "dtype_overflow";
    case FindingKind::shape: return "shape";
    case FindingKind::dtype: return "dtype";
    case FindingKind::device: return "device";
    case FindingKind::order: return "order";
    case FindingKind::exception: return "exception";
    case FindingKind::crash: return "crash";
    case FindingKind::hang: return "hang";
    case FindingKind::nondeterministic: return "nondeterministic";
  }
  return "unknown";
}

std::optional<FindingKind> parse_finding_kind(std::string_view name) {
  for (FindingKind kind : kAllFindingKinds)
    if (finding_kind_name(kind) == name) return kind;
  return std::nullopt;
}

bool fails_by_default(FindingKind kind) {
  return kind != FindingKind::precision && kind != FindingKind::overflow;
}

}  // namespace detfuzz
