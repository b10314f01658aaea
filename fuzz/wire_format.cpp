#include "fuzz/wire_format.h"

#include <fmt/format.h>

#include <charconv>

#include "model/error.h"
#include "model/finding_kind.h"

namespace detfuzz::fuzz {

nlohmann::json verdict_json(const compare::Verdict& verdict) {
  nlohmann::json json = {{"kind", std::string(finding_kind_name(verdict.kind))},
                         {"property", verdict.property},
                         {"message", verdict.message},
                         {"details", verdict.details}};
  if (!verdict.outside_contract.empty()) json["outside_contract"] = verdict.outside_contract;
  return json;
}

compare::Verdict verdict_from_json(const nlohmann::json& json) {
  compare::Verdict verdict;
  verdict.kind = parse_finding_kind(json.at("kind").get<std::string>()).value_or(FindingKind::exception);
  verdict.property = json.at("property").get<std::string>();
  verdict.message = json.at("message").get<std::string>();
  verdict.details = json.value("details", nlohmann::json());
  verdict.outside_contract = json.value("outside_contract", std::string());
  return verdict;
}

namespace {

constexpr char kShortRunAnswer = 'p';

}  // namespace

// A judgement as the worker answers it; a run's also with its size, times and magnitude.
nlohmann::json judgement_answer(const compare::Judgement& judgement) {
  nlohmann::json verdicts = nlohmann::json::array();
  for (const auto& v : judgement.verdicts) verdicts.push_back(verdict_json(v));
  return {{"verdicts", std::move(verdicts)}, {"max_normalized_error", judgement.max_normalized_error}};
}

compare::Judgement judgement_from_answer(const nlohmann::json& answer) {
  compare::Judgement judgement;
  for (const auto& v : answer.at("verdicts")) judgement.verdicts.push_back(verdict_from_json(v));
  judgement.max_normalized_error = answer.value("max_normalized_error", -1.0);
  return judgement;
}

std::string run_answer_line(const CaseOutcome& outcome) {
  const CaseTimes& t = outcome.times;
  if (outcome.judgement.verdicts.empty())  // fmt's shortest form reads back as the same double
    return fmt::format("{} {} {} {} {} {} {} {}\n", kShortRunAnswer, outcome.size,
                       outcome.judgement.max_normalized_error, outcome.input_magnitude, t.generation_s, t.kernel_s,
                       t.oracle_s, t.judge_s);
  nlohmann::json answer = judgement_answer(outcome.judgement);
  answer["size"] = outcome.size;
  answer["times"] = {t.generation_s, t.kernel_s, t.oracle_s, t.judge_s};
  if (outcome.input_magnitude >= 0) answer["magnitude"] = outcome.input_magnitude;
  return answer.dump() + "\n";
}

std::optional<CaseOutcome> outcome_from_short_line(std::string_view line) {
  if (line.empty() || line.front() != kShortRunAnswer) return std::nullopt;
  const char* at = line.data() + 1;
  const char* const end = line.data() + line.size();
  auto next = [&](auto& value) {
    while (at < end && *at == ' ') ++at;
    const auto [stop, error] = std::from_chars(at, end, value);
    if (error != std::errc() || (stop < end && *stop != ' ' && *stop != '\n'))
      throw Error(ErrorKind::internal, "a worker's answer is not a run answer: " + std::string(line.substr(0, 200)));
    at = stop;
  };
  CaseOutcome outcome;
  CaseTimes& t = outcome.times;
  next(outcome.size);
  next(outcome.judgement.max_normalized_error);
  next(outcome.input_magnitude);
  for (double* time : {&t.generation_s, &t.kernel_s, &t.oracle_s, &t.judge_s}) next(*time);
  if (at != end && std::string_view(at, static_cast<std::size_t>(end - at)) != "\n")
    throw Error(ErrorKind::internal, "a worker's run answer has more than its numbers: " + std::string(line.substr(0, 200)));
  return outcome;
}

nlohmann::json cell_json(const std::string& op, const std::string& target, DType dtype, Device device) {
  return {{"op", op}, {"target", target}, {"dtype", std::string(dtype_name(dtype))}, {"device", device_name(device)}};
}

}  // namespace detfuzz::fuzz
