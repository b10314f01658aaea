// One vocabulary of finding kinds, used by comparators, campaign, corpus and reports.
#pragma once

#include <array>
#include <optional>
#include <string_view>

namespace detfuzz {

enum class FindingKind {
  mismatch,   // beyond the storage-dtype error bound, or a wrong discrete decision
  precision,  // beyond the fp32-arithmetic bound only: the kernel computes in the low type
  nan,        // NaN/Inf where the true value is finite and in range
  overflow,   // the true value (or an intermediate) is outside the accumulate type's range
  // An intermediate that the kernel computes in a narrower dtype than PyTorch's accumulate
  // type (its own declared arithmetic) leaves that dtype's range, though its true value fits
  // the accumulate type: the kernel's choice of dtype makes the output wrong.
  dtype_overflow,
  shape,      // wrong output shape
  dtype,      // output dtype differs from the op's contract
  device,     // output on another device than its inputs
  order,      // right set of indices in the wrong order
  exception,  // the kernel raised
  crash,      // the worker died (signal)
  hang,       // the case outlived its timeout
  // Two runs of the same call (--repeat) returned outputs that differ bit for bit, whatever
  // the oracle says of either: atomicAdd accumulation orders, uninitialized memory, races.
  nondeterministic,
};

inline constexpr std::array<FindingKind, 13> kAllFindingKinds = {
    FindingKind::mismatch, FindingKind::precision, FindingKind::nan,
    FindingKind::overflow, FindingKind::dtype_overflow, FindingKind::shape, FindingKind::dtype,
    FindingKind::device,   FindingKind::order,     FindingKind::exception,
    FindingKind::crash,    FindingKind::hang,      FindingKind::nondeterministic};

std::string_view finding_kind_name(FindingKind kind);
std::optional<FindingKind> parse_finding_kind(std::string_view name);
// precision and overflow are shown but only fail a run when asked (--fail-on).
bool fails_by_default(FindingKind kind);

}  // namespace detfuzz
