// One op family as the campaign sees it: its targets, how a case is generated from
// (case seed, size), how a target's output is judged, and how a failing case is shrunk.
// The campaign only talks to this interface; each op supplies an OpDefinition.
#pragma once

#include <chrono>
#include <functional>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fuzz/compare/verdict.h"
#include "fuzz/profile.h"
#include "kernels/target.h"
#include "model/dtype.h"
#include "model/problems.h"

namespace detfuzz::fuzz {

struct CaseRequest {
  std::string target;
  DType dtype = DType::fp32;
  Device device = Device::cpu;
  std::uint64_t case_seed = 0;  // rc::Random seed: the case replays bit for bit from it
  int generator_size = 0;       // RapidCheck size, 0..100: small cases first
  int max_boxes = 64;
  bool hostile = false;  // the case comes from the hostile generators (gen/hostile.h)

  bool operator==(const CaseRequest& other) const {
    return target == other.target && dtype == other.dtype && device == other.device && case_seed == other.case_seed &&
           generator_size == other.generator_size && max_boxes == other.max_boxes && hostile == other.hostile;
  }
};

struct CaseOutcome {
  compare::Judgement judgement;
  std::size_t size = 0;  // boxes in the case
  CaseTimes times;       // where it ran (zero for a case whose worker died)
  // The largest finite |number| in the input, for one case in kMagnitudeSampling (what the
  // HTML report plots error against); -1 for the others.
  double input_magnitude = -1;
};

inline constexpr std::uint64_t kMagnitudeSampling = 8;

// The largest finite |number| anywhere in a JSON value.
double largest_magnitude(const nlohmann::json& value);

struct ShrinkLimits {
  std::chrono::steady_clock::time_point deadline;
  int max_evaluations = 5000;
  // Called after each accepted step with (steps so far, boxes in the case): progress.
  std::function<void(int, std::size_t)> on_step;
};

// Which candidate each accepted step took: indices into RapidCheck's shrink sequence, then
// into the op's list of smaller candidates. With the case seed and size this re-derives the
// minimized case without judging anything (RapidCheck's (seed, size, shrink path)).
struct ShrinkPath {
  std::vector<int> rapidcheck;
  std::vector<int> domain;
};

struct ShrinkResult {
  compare::Verdict verdict;  // of the smallest case that still fails the same way
  nlohmann::json input;      // that case's inputs
  std::size_t size = 0;
  int steps = 0;             // accepted shrinks
  bool complete = false;     // false when a limit stopped the search early
  // False when re-running the case did not fail again (a nondeterministic kernel): the
  // finding then keeps the observed verdict and the unshrunk input.
  bool reproducible = true;
  ShrinkPath path;
  double seconds = 0;
};

// Judges an input given as JSON, for the shrinker: in a worker process that may crash, or
// nullptr to judge in this process.
using InputJudge = std::function<compare::Judgement(const nlohmann::json& input)>;

// One input evaluated on one target (or on the oracle): what a replay shows.
struct Evaluation {
  nlohmann::json output;         // the target's first output, or the oracle's answer
  compare::Judgement judgement;  // empty for the oracle
  std::string side_by_side;      // kernel vs oracle, differing elements marked
  std::size_t size = 0;          // boxes in the input
};

// The pseudo-target that answers with the fp64 oracle (for `detfuzz eval --target oracle`).
inline const std::string kOracleTarget = "oracle";

class OpHarness {
 public:
  virtual ~OpHarness() = default;
  virtual const std::string& name() const = 0;
  virtual const std::string& description() const = 0;
  virtual std::vector<std::string> target_names() const = 0;
  virtual std::string target_description(const std::string& target) const = 0;
  virtual kernels::Availability availability(const std::string& target, Device device) const = 0;
  // nullopt when `target` runs `dtype` on `device` (checked on a tiny canonical input);
  // otherwise the library's reason.
  virtual std::optional<std::string> unsupported_reason(const std::string& target, DType dtype,
                                                        Device device) const = 0;
  virtual CaseOutcome run_case(const CaseRequest& request) const = 0;
  // Shrinks the case of `request` while it still yields a verdict of the kind and property
  // of `observed` (the verdict the campaign saw), judging candidates with `judge` (a worker)
  // or in this process when it is null.
  virtual ShrinkResult shrink(const CaseRequest& request, const compare::Verdict& observed,
                              const ShrinkLimits& limits, const InputJudge& judge = nullptr) const = 0;
  // Judges an input given as JSON (what a worker does for the shrinker).
  virtual compare::Judgement judge_json(const nlohmann::json& input, const std::string& target, DType dtype,
                                        Device device) const = 0;
  // Boxes (or RoIs) in an input given as JSON.
  virtual std::size_t size_of(const nlohmann::json& input) const = 0;
  // The most boxes a generated case of this op can have under --max-boxes `max_boxes`.
  virtual std::size_t largest_case(int max_boxes) const = 0;
  // How a case's time grows with its size: time ~ (size + 1)^exponent (fuzz/case_timeout.h).
  virtual int cost_exponent() const { return 1; }
  // Evaluates a given input (a case file's) on `target` or on kOracleTarget.
  virtual Evaluation evaluate(const nlohmann::json& input, const std::string& target, DType dtype,
                              Device device) const = 0;
  // The generated case of `request`, as JSON.
  virtual nlohmann::json generated_input(const CaseRequest& request) const = 0;
  // The case of `request` after following `path`, as JSON; Error{input} when the path does
  // not fit the case (another detfuzz version generated it).
  virtual nlohmann::json follow_shrink_path(const CaseRequest& request, const ShrinkPath& path) const = 0;
};

struct Registry {
  std::vector<std::unique_ptr<OpHarness>> ops;
  const OpHarness* find(const std::string& name) const;
};

// Every op family with its built-in targets.
Registry default_registry(const kernels::KernelConfig& config);

// Each op family's harness over its targets (model/op_table.h): what default_registry builds,
// and what tests build over targets of their own.
#define DETFUZZ_DECLARE_HARNESS(name, Problem, size_unit, bind_contract) \
  std::unique_ptr<OpHarness> make_##name##_harness(std::vector<kernels::Target<Problem>> targets);
DETFUZZ_OP_TABLE(DETFUZZ_DECLARE_HARNESS)
#undef DETFUZZ_DECLARE_HARNESS

}  // namespace detfuzz::fuzz
