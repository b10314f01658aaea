// Cases run in this process: fastest, and what tests with planted targets use; a kernel
// that crashes takes the campaign with it.
#include "fuzz/runner.h"

namespace detfuzz::fuzz {

std::vector<CaseOutcome> InProcessRunner::run_cases(const OpHarness& op, const std::vector<CaseRequest>& requests) {
  std::vector<CaseOutcome> outcomes;
  for (const auto& request : requests) outcomes.push_back(op.run_case(request));
  return outcomes;
}

compare::Judgement InProcessRunner::judge_input(const OpHarness& op, const CaseRequest& request,
                                                const nlohmann::json& input) {
  return op.judge_json(input, request.target, request.dtype, request.device);
}

std::optional<std::string> InProcessRunner::unsupported_reason(const OpHarness& op, const std::string& target,
                                                               DType dtype, Device device) {
  return op.unsupported_reason(target, dtype, device);
}

InputJudge InProcessRunner::input_judge(const OpHarness&, const CaseRequest&) { return nullptr; }

Evaluation InProcessRunner::evaluate(const OpHarness& op, const nlohmann::json& input, const std::string& target,
                                     DType dtype, Device device) {
  return op.evaluate(input, target, dtype, device);
}

}  // namespace detfuzz::fuzz
