// Replaying cases: a case file against its `expect`, or a generated case from its seed.
#pragma once

#include <iosfwd>
#include <string>

#include "corpus/case_file.h"
#include "fuzz/ops/op_harness.h"
#include "fuzz/runner.h"

namespace detfuzz::fuzz {

enum class ReplayStatus { matched, mismatched, skipped };

// Re-runs the case on its target and prints a verdict line, the kernel's output beside the
// oracle's, and the verdicts. `pass` matches when no verdict of a failing kind appears
// (precision and overflow are shown, as in `run`); `fail` matches when a verdict of the
// expected kind and property appears. Skipped: the target or dtype is not available here.
// Error{input} for an op or target this detfuzz does not know.
// The case runs through `runner`, so a case that crashes or hangs its kernel is judged, not
// fatal (a `fail` case of kind crash matches when its worker dies the same way).
// `judged`, when given, receives the judgement (the verdicts behind the status).
ReplayStatus replay_case(const Registry& registry, const corpus::CaseFile& file,
                         const std::string& path, std::ostream& out, CaseRunner& runner,
                         compare::Judgement* judged = nullptr);

// Where a minimized finding came from: enough to regenerate it from the seed.
struct FindingOrigin {
  std::string op;
  std::uint64_t seed = 0;
  std::uint64_t case_index = 0;
  std::size_t original_size = 0;  // boxes before minimizing
};

// The case file a minimized finding becomes: expect `fail` with its signature, the origin
// (seed, shrink path, replay command), the environment and the verdict.
corpus::CaseFile case_file_for(const FindingOrigin& origin, const CaseRequest& request,
                               const ShrinkResult& shrunk, const nlohmann::json& environment);

// The command line that regenerates case `index` of a campaign, as a case file would record it.
std::string replay_command(const std::string& op, const std::string& target, DType dtype,
                           Device device, std::uint64_t seed, std::uint64_t index, int max_boxes,
                           bool hostile = false);

// "<case seed>/<size>/<rapidcheck path>/<domain path>", paths as dot-separated indices:
// what `detfuzz replay --reproduce` takes to rebuild a minimized case without judging.
std::string reproduce_string(const CaseRequest& request, const ShrinkPath& path);
// Fills request.case_seed and generator_size and returns the path; Error{usage} when the
// text is not of that form.
ShrinkPath parse_reproduce_string(const std::string& text, CaseRequest& request);

// replay_command plus the flags that minimize it again to the same case file.
std::string minimize_command(const std::string& op, const std::string& target, DType dtype, Device device,
                             std::uint64_t seed, std::uint64_t index, int max_boxes, bool hostile,
                             const compare::Verdict& verdict);

const OpHarness& find_op_or_throw(const Registry& registry, const std::string& name,
                                  const std::string& where);

}  // namespace detfuzz::fuzz
