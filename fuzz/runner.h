// Where a campaign's kernels run. In-process is fastest and is what tests with planted
// targets use; worker processes are what a campaign needs when the kernels may segfault,
// abort or hang: the worker dies or is killed, the campaign records a `crash` or `hang`
// finding and starts a new worker.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fuzz/case_timeout.h"
#include "fuzz/ops/op_harness.h"

namespace detfuzz::fuzz {

class CaseRunner {
 public:
  virtual ~CaseRunner() = default;
  // Generated cases (generated where they run, from their seeds), in order. Batches let a
  // worker pipeline them: the round trip per case is what isolation costs.
  virtual std::vector<CaseOutcome> run_cases(const OpHarness& op, const std::vector<CaseRequest>& requests) = 0;
  // A hint that run_cases will be asked for exactly these cases next: a worker starts on
  // them at once, computing while the campaign takes in the batch before. Nothing changes
  // in what run_cases returns; in this process it does nothing.
  virtual void prefetch(const OpHarness& op, const std::vector<CaseRequest>& requests) {}
  // Gets ready to run cases without waiting (a worker starts loading LibTorch). The campaign
  // calls it for every lane before it probes the cells on the first: otherwise a later lane's
  // worker loads inside its first cell's first slice, as that cell's overhead (0.65 s here).
  virtual void warm_up() {}
  // An explicit input (a shrink candidate) in the cell of `request`.
  virtual compare::Judgement judge_input(const OpHarness& op, const CaseRequest& request,
                                         const nlohmann::json& input) = 0;
  virtual std::optional<std::string> unsupported_reason(const OpHarness& op, const std::string& target,
                                                        DType dtype, Device device) = 0;
  // How the shrinker should judge candidates: nullptr means in this process, typed.
  virtual InputJudge input_judge(const OpHarness& op, const CaseRequest& request) = 0;
  // A given input with the kernel's output beside the oracle's (replay, eval).
  virtual Evaluation evaluate(const OpHarness& op, const nlohmann::json& input, const std::string& target,
                              DType dtype, Device device) = 0;
};

class InProcessRunner final : public CaseRunner {
 public:
  std::vector<CaseOutcome> run_cases(const OpHarness& op, const std::vector<CaseRequest>& requests) override;
  compare::Judgement judge_input(const OpHarness& op, const CaseRequest& request,
                                 const nlohmann::json& input) override;
  std::optional<std::string> unsupported_reason(const OpHarness& op, const std::string& target, DType dtype,
                                                Device device) override;
  InputJudge input_judge(const OpHarness& op, const CaseRequest& request) override;
  Evaluation evaluate(const OpHarness& op, const nlohmann::json& input, const std::string& target, DType dtype,
                      Device device) override;
};

struct WorkerOptions {
  std::string executable;              // the detfuzz binary
  std::vector<std::string> arguments;  // global flags the worker needs (--torchvision-lib)
  // Per case: the ceiling (--case-timeout, scaled by the op's largest case), and how each
  // cell calibrates its own limit below it (fuzz/case_timeout.h).
  CaseTimeoutRule timeout_rule;
  std::string scratch_dir;             // workers' stderr logs and the write-ahead case
};

std::unique_ptr<CaseRunner> make_worker_runner(const WorkerOptions& options);

// The worker's side (`detfuzz worker`): JSON-line requests on stdin, answers on stdout, a
// byte on doorbell_fd (-1: none) once a message's answers are out; answers staged in the
// shared memory behind staging_fd (-1: none, each answer is written at once) until sent.
int serve_worker(const Registry& registry, int doorbell_fd, int staging_fd);

}  // namespace detfuzz::fuzz
