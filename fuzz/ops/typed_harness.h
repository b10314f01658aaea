// Internal to fuzz/ops: the OpHarness every op family instantiates with its own problem
// type. Generation and shrinking are RapidCheck's: a case is gen(rc::Random(seed), size),
// and shrinking walks its integrated shrink tree, accepting a smaller case only when it
// fails with the same signature (kind and property); then the op's own smaller candidates
// (boxes deleted, values made plainer) are tried the same way.
#pragma once

#include <rapidcheck.h>

#include <functional>
#include <mutex>
#include <variant>

#include "fuzz/gen/boxes.h"
#include "fuzz/gen/hostile.h"
#include "fuzz/ops/minimize.h"
#include "fuzz/ops/op_harness.h"
#include "fuzz/profile.h"
#include "fuzz/ops/side_by_side.h"
#include "model/error.h"

namespace detfuzz::fuzz {

// RapidCheck keeps the state of a generation in statics (detail::ImplicitParam), so the
// campaign's lanes (threads) take turns at generating and shrinking; kernels and oracles
// run outside the turn.
inline std::unique_lock<std::recursive_mutex> rapidcheck_turn() {
  static std::recursive_mutex mutex;
  return std::unique_lock<std::recursive_mutex>(mutex);
}

template <class Problem>
struct OpDefinition {
  std::string name;
  std::string description;
  std::vector<kernels::Target<Problem>> targets;
  std::function<rc::Gen<Problem>(const gen::BoxGenOptions&)> generator;
  // Runs the target (more than once for the oracle-free properties) and judges it; sets
  // Judgement::output to the main run's output.
  std::function<compare::Judgement(const Problem&, const kernels::Target<Problem>&, DType, Device)>
      judge;
  std::function<nlohmann::json(const Problem&)> to_json;
  std::function<Problem(const nlohmann::json&)> from_json;
  std::function<std::size_t(const Problem&)> size;
  // Smaller variants of a problem in order of preference: deletions first (largest cuts),
  // then plainer values. Every candidate must be strictly smaller or simpler.
  std::function<std::vector<Problem>(const Problem&, DType)> smaller;
  // The oracle's answer as JSON, and the kernel's output beside it for people.
  std::function<nlohmann::json(const Problem&, DType)> oracle_json;
  std::function<std::string(const Problem&, const std::vector<HostTensor>&, DType)> side_by_side;
  Problem probe;  // a tiny valid input: a kernel that rejects it lacks the dtype/device
  // Why `problem` is outside the input domain the op's library documents (the docstring,
  // cited), or nothing when it is inside; empty function: no documented contract.
  std::function<std::optional<std::string>(const Problem&)> contract;
  // Boxes the generator may draw whatever --max-boxes (batched_nms's switch counts): what
  // a case's timeout scales with.
  std::size_t largest_generated = 0;
  // Time ~ (size + 1)^cost_exponent: 2 where every pair of boxes is compared.
  int cost_exponent = 1;
};

// Runs a target and returns its outputs; anything it throws becomes a verdict of kind
// `exception`, and fewer outputs than the op's contract has a `shape` verdict.
template <class Problem>
std::variant<std::vector<HostTensor>, compare::Verdict> run_guarded(
    const kernels::Target<Problem>& target, const Problem& problem, DType dtype, Device device,
    const std::string& property = "kernel", std::size_t expected_outputs = 1) {
  try {
    std::vector<HostTensor> outputs = [&] {
      PhaseTimer timer(Phase::kernel);
      return target.run(problem, dtype, device);
    }();
    if (outputs.size() < expected_outputs)
      return compare::Verdict{FindingKind::shape, "contract",
                              "the kernel returned " + std::to_string(outputs.size()) + " outputs, the op has " +
                                  std::to_string(expected_outputs),
                              {}};
    return outputs;
  } catch (const Error& error) {
    // kernels/run_policy.h: the repeated runs of this call differ, whatever the oracle says.
    if (error.kind() == ErrorKind::nondeterministic)
      return compare::Verdict{FindingKind::nondeterministic, "run_to_run", error.what(), {}};
    std::string message = error.what();
    message = message.substr(0, message.find('\n'));
    return compare::Verdict{FindingKind::exception, property, "the kernel raised: " + message,
                            {{"exception", message}}};
  } catch (const std::exception& error) {
    std::string message = error.what();
    message = message.substr(0, message.find('\n'));
    return compare::Verdict{FindingKind::exception, property, "the kernel raised: " + message,
                            {{"exception", message}}};
  }
}

// The target's outputs, or the judgement that ends the case there: a verdict when it raised
// or returned too few outputs; no verdict when it raised on a `hostile` input (NaN,
// infinities, inverted boxes, bad indices), where a clean error is a valid answer.
template <class Problem>
std::variant<std::vector<HostTensor>, compare::Judgement> run_target(const kernels::Target<Problem>& target,
                                                                     const Problem& problem, DType dtype, Device device,
                                                                     bool hostile, std::size_t expected_outputs = 1) {
  auto run = run_guarded(target, problem, dtype, device, "kernel", expected_outputs);
  if (auto* verdict = std::get_if<compare::Verdict>(&run)) {
    compare::Judgement judgement;
    if (!(hostile && verdict->kind == FindingKind::exception)) judgement.verdicts.push_back(*verdict);
    return judgement;
  }
  return std::get<std::vector<HostTensor>>(std::move(run));
}

template <class Problem>
class TypedOpHarness final : public OpHarness {
 public:
  explicit TypedOpHarness(OpDefinition<Problem> definition) : def_(std::move(definition)) {
    // Every judgement of an input outside the op's documented contract says so, whichever
    // path judged it (campaign, shrink, replay, eval).
    if (def_.contract) {
      def_.judge = [judge = std::move(def_.judge), contract = def_.contract](
                       const Problem& problem, const kernels::Target<Problem>& target, DType dtype, Device device) {
        compare::Judgement judgement = judge(problem, target, dtype, device);
        if (judgement.verdicts.empty()) return judgement;
        if (std::optional<std::string> breach = contract(problem))
          for (auto& verdict : judgement.verdicts) verdict.outside_contract = *breach;
        return judgement;
      };
    }
  }

  const std::string& name() const override { return def_.name; }
  const std::string& description() const override { return def_.description; }

  std::vector<std::string> target_names() const override {
    std::vector<std::string> names;
    for (const auto& target : def_.targets) names.push_back(target.name);
    return names;
  }

  std::string target_description(const std::string& target) const override {
    return find_target(target).description;
  }

  kernels::Availability availability(const std::string& target, Device device) const override {
    return find_target(target).availability(device);
  }

  std::optional<std::string> unsupported_reason(const std::string& target, DType dtype,
                                                Device device) const override {
    try {
      find_target(target).run(def_.probe, dtype, device);
    } catch (const Error& error) {
      if (error.kind() == ErrorKind::unsupported || error.kind() == ErrorKind::unavailable)
        return std::string(error.what());
    } catch (const std::exception&) {
      // A kernel that raises on a valid input is a finding, not an unsupported cell: the
      // campaign will meet it again and record it.
    }
    return std::nullopt;
  }

  CaseOutcome run_case(const CaseRequest& request) const override {
    using Clock = std::chrono::steady_clock;
    auto seconds_since = [](Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); };
    CaseTimes& times = current_case_times();
    times = {};
    auto start = Clock::now();
    Problem problem = generated(request);
    times.generation_s = seconds_since(start);
    announce_case_size(def_.size(problem));
    start = Clock::now();
    CaseOutcome outcome;
    outcome.judgement = def_.judge(problem, find_target(request.target), request.dtype, request.device);
    outcome.size = def_.size(problem);
    times.judge_s = seconds_since(start);
    outcome.times = times;
    if (request.case_seed % kMagnitudeSampling == 0) outcome.input_magnitude = largest_magnitude(def_.to_json(problem));
    return outcome;
  }

  ShrinkResult shrink(const CaseRequest& request, const compare::Verdict& observed,
                      const ShrinkLimits& limits, const InputJudge& external) const override {
    const auto start = std::chrono::steady_clock::now();
    const auto& target = find_target(request.target);
    auto still_fails = [&](const Problem& problem) -> std::optional<compare::Verdict> {
      compare::Judgement judgement = external ? external(def_.to_json(problem))
                                              : def_.judge(problem, target, request.dtype, request.device);
      for (auto& verdict : judgement.verdicts)
        if (verdict.kind == observed.kind && verdict.property == observed.property &&
            verdict.outside_contract.empty() == observed.outside_contract.empty())
          return verdict;
      return std::nullopt;
    };
    auto turn = rapidcheck_turn();
    rc::Shrinkable<Problem> current = generate(request);
    Problem best = current.value();
    turn.unlock();
    ShrinkResult result;
    auto finish = [&] {
      result.input = def_.to_json(best);
      result.size = def_.size(best);
      result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      return result;
    };
    auto first = still_fails(best);
    if (!first) {
      result.verdict = observed;
      result.reproducible = false;
      return finish();
    }
    result.verdict = *first;
    int evaluations = 0;
    bool limited = false;
    auto out_of_budget = [&] {
      limited = limited || ++evaluations > limits.max_evaluations ||
                std::chrono::steady_clock::now() > limits.deadline;
      return limited;
    };
    auto accepted = [&](std::vector<int>& path, int index, compare::Verdict verdict) {
      path.push_back(index);
      result.verdict = std::move(verdict);
      ++result.steps;
      if (limits.on_step) limits.on_step(result.steps, def_.size(best));
    };
    // 1. RapidCheck's integrated shrinking: smaller counts, integers, plainer values. It
    // shrinks element by element, which for a case that must keep many boxes can take every
    // evaluation; it gets half, the domain pass (which simplifies values too) the rest.
    // A crash or a hang costs a worker restart or a whole timeout per failing candidate:
    // ddmin's halving gets there in far fewer of them.
    // A case too large for value simplification (thousands of boxes at a strategy switch)
    // would spend RapidCheck's share on element-wise shrinks before any deletion.
    const bool expensive = observed.kind == FindingKind::crash || observed.kind == FindingKind::hang ||
                           def_.size(best) > kMaxElementsToSimplify;
    const int rapidcheck_share = expensive ? 0 : limits.max_evaluations / 2;
    for (bool improved = true; improved && !limited && evaluations < rapidcheck_share;) {
      improved = false;
      turn.lock();
      auto shrinks = current.shrinks();
      turn.unlock();
      auto next_candidate = [&] {
        std::lock_guard<std::unique_lock<std::recursive_mutex>> hold(turn);
        return shrinks.next();
      };
      int index = 0;
      for (auto candidate = next_candidate(); candidate; candidate = next_candidate(), ++index) {
        if (evaluations >= rapidcheck_share || out_of_budget()) break;
        turn.lock();
        Problem smaller = candidate->value();
        turn.unlock();
        if (auto verdict = still_fails(smaller)) {
          current = *candidate;
          best = std::move(smaller);
          accepted(result.path.rapidcheck, index, std::move(*verdict));
          improved = true;
          break;
        }
      }
    }
    // 2. The op's own moves: delete boxes (ddmin), then make values plainer. After a
    // success the scan resumes at the same position (the candidate list keeps its layout),
    // so the deletions that already failed are not retried for every accepted plainer value;
    // a pass that improved something is followed by a fresh one.
    for (std::size_t resume = 0, improved = 0; !limited;) {
      std::vector<Problem> candidates = def_.smaller(best, request.dtype);
      bool accepted_one = false;
      for (std::size_t index = resume; index < candidates.size(); ++index) {
        if (out_of_budget()) break;
        if (auto verdict = still_fails(candidates[index])) {
          best = std::move(candidates[index]);
          accepted(result.path.domain, static_cast<int>(index), std::move(*verdict));
          resume = index;
          ++improved;
          accepted_one = true;
          break;
        }
      }
      if (accepted_one || limited) continue;
      if (improved == 0) break;
      resume = 0;
      improved = 0;
    }
    result.complete = !limited;
    return finish();
  }

  Evaluation evaluate(const nlohmann::json& input, const std::string& target, DType dtype,
                      Device device) const override {
    Problem problem = def_.from_json(input);
    Evaluation evaluation;
    evaluation.size = def_.size(problem);
    if (target == kOracleTarget) {
      evaluation.output = def_.oracle_json(problem, dtype);
      return evaluation;
    }
    evaluation.judgement = def_.judge(problem, find_target(target), dtype, device);
    const auto& outputs = evaluation.judgement.outputs;
    if (!outputs.empty()) {
      if (outputs.size() == 1) {
        evaluation.output = host_tensor_json(outputs.front());
      } else {
        evaluation.output = nlohmann::json::array();
        for (const auto& output : outputs) evaluation.output.push_back(host_tensor_json(output));
      }
      evaluation.side_by_side = def_.side_by_side(problem, outputs, dtype);
    }
    return evaluation;
  }

  compare::Judgement judge_json(const nlohmann::json& input, const std::string& target, DType dtype,
                                Device device) const override {
    const Problem problem = def_.from_json(input);
    announce_case_size(def_.size(problem));
    return def_.judge(problem, find_target(target), dtype, device);
  }

  std::size_t size_of(const nlohmann::json& input) const override { return def_.size(def_.from_json(input)); }
  int cost_exponent() const override { return def_.cost_exponent; }
  std::size_t largest_case(int max_boxes) const override {
    return std::max(static_cast<std::size_t>(std::max(max_boxes, 0)), def_.largest_generated);
  }

  nlohmann::json generated_input(const CaseRequest& request) const override {
    return def_.to_json(generated(request));
  }

  nlohmann::json follow_shrink_path(const CaseRequest& request, const ShrinkPath& path) const override {
    auto turn = rapidcheck_turn();
    rc::Shrinkable<Problem> current = generate(request);
    for (int index : path.rapidcheck) {
      auto shrinks = current.shrinks();
      auto candidate = shrinks.next();
      for (int i = 0; i < index && candidate; ++i) candidate = shrinks.next();
      if (!candidate) throw Error(ErrorKind::input, "the shrink path does not fit this case");
      current = *candidate;
    }
    Problem best = current.value();
    for (int index : path.domain) {
      std::vector<Problem> candidates = def_.smaller(best, request.dtype);
      if (index < 0 || static_cast<std::size_t>(index) >= candidates.size())
        throw Error(ErrorKind::input, "the shrink path does not fit this case");
      best = std::move(candidates[static_cast<std::size_t>(index)]);
    }
    return def_.to_json(best);
  }

 private:
  Problem generated(const CaseRequest& request) const {
    auto turn = rapidcheck_turn();
    return generate(request).value();
  }

  // Callers hold a rapidcheck_turn() while they use the result.
  rc::Shrinkable<Problem> generate(const CaseRequest& request) const {
    const gen::BoxGenOptions options{request.dtype, request.max_boxes, request.hostile};
    rc::Gen<Problem> generator = def_.generator(options);
    if (request.hostile) generator = gen::hostile(generator, request.dtype);
    return generator(rc::Random(request.case_seed), request.generator_size);
  }

  const kernels::Target<Problem>& find_target(const std::string& name) const {
    for (const auto& target : def_.targets)
      if (target.name == name) return target;
    throw Error(ErrorKind::usage, "op " + def_.name + " has no target '" + name + "'");
  }

  OpDefinition<Problem> def_;
};

}  // namespace detfuzz::fuzz
