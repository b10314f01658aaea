// Replaying cases: a case file against its `expect`, or a generated case from its seed.
#pragma once

#include <iosfwd>
#include <string>

#include "corpus/case_file.h"
#include "fuzz/ops/op_harness.h"

namespace detfuzz::fuzz {

enum class ReplayStatus { matched, mismatched, skipped };

// Re-runs the case on its target and prints a verdict line, the kernel's output beside the
// oracle's, and the verdicts. `pass` matches when no verdict of a failing kind appears
// (precision and overflow are shown, as in `run`); `fail` matches when a verdict of the
// expected kind and property appears. Skipped: the target or dtype is not available here.
// Error{input} for an op or target this detfuzz does not know.
ReplayStatus replay_case(const Registry& registry, const corpus::CaseFile& file,
                         const std::string& path, std::ostream& out);

// The case file a finding becomes (expect: fail with its signature).
struct FindingCase {
  std::string op, target;
  DType dtype = DType::fp32;
  Device device = Device::cpu;
  compare::Verdict verdict;
  nlohmann::json input;
  nlohmann::json origin;
  nlohmann::json minimization;
};
corpus::CaseFile case_file_for(const FindingCase& finding, const nlohmann::json& environment);

// The command line that regenerates case `index` of a campaign, as a case file would record it.
std::string replay_command(const std::string& op, const std::string& target, DType dtype,
                           Device device, std::uint64_t seed, std::uint64_t index, int max_boxes);

// "<case seed>/<size>/<rapidcheck path>/<domain path>", paths as dot-separated indices:
// what `detfuzz replay --reproduce` takes to rebuild a minimized case without judging.
std::string reproduce_string(const CaseRequest& request, const ShrinkPath& path);
// Fills request.case_seed and generator_size and returns the path; Error{usage} when the
// text is not of that form.
ShrinkPath parse_reproduce_string(const std::string& text, CaseRequest& request);

// replay_command plus the flags that minimize it again to the same case file.
std::string minimize_command(const std::string& op, const std::string& target, DType dtype, Device device,
                             std::uint64_t seed, std::uint64_t index, int max_boxes,
                             const compare::Verdict& verdict);

const OpHarness& find_op_or_throw(const Registry& registry, const std::string& name,
                                  const std::string& where);

}  // namespace detfuzz::fuzz
