// Internal to fuzz/ops: the OpHarness every op family instantiates with its own problem
// type. Generation and shrinking are RapidCheck's: a case is gen(rc::Random(seed), size),
// and shrinking walks its integrated shrink tree, accepting a smaller case only when it
// fails with the same signature (kind and property).
#pragma once

#include <rapidcheck.h>

#include <functional>
#include <variant>

#include "fuzz/gen/boxes.h"
#include "fuzz/ops/op_harness.h"
#include "model/error.h"

namespace detfuzz::fuzz {

template <class Problem>
struct OpDefinition {
  std::string name;
  std::string description;
  std::vector<kernels::Target<Problem>> targets;
  std::function<rc::Gen<Problem>(const gen::BoxGenOptions&)> generator;
  // Runs the target (more than once for the oracle-free properties) and judges it.
  std::function<compare::Judgement(const Problem&, const kernels::Target<Problem>&, DType, Device)>
      judge;
  std::function<nlohmann::json(const Problem&)> to_json;
  std::function<Problem(const nlohmann::json&)> from_json;
  std::function<std::size_t(const Problem&)> size;
  // Smaller variants of a problem (boxes removed), largest cuts first: the domain pass that
  // follows RapidCheck's shrinking, whose fixed-count containers cannot drop one element.
  std::function<std::vector<Problem>(const Problem&)> reductions;
  Problem probe;  // a tiny valid input: a kernel that rejects it lacks the dtype/device
};

// Half-open ranges to delete from a sequence of `n`, ddmin order: halves, quarters, ...,
// single elements.
inline std::vector<std::pair<std::size_t, std::size_t>> removal_ranges(std::size_t n) {
  std::vector<std::pair<std::size_t, std::size_t>> ranges;
  for (std::size_t chunk = n / 2 > 0 ? n / 2 : n; chunk > 0; chunk /= 2)
    for (std::size_t begin = 0; begin < n; begin += chunk) ranges.emplace_back(begin, std::min(n, begin + chunk));
  return ranges;
}

template <class T>
std::vector<T> without(const std::vector<T>& items, std::pair<std::size_t, std::size_t> range) {
  std::vector<T> kept(items.begin(), items.begin() + static_cast<std::ptrdiff_t>(range.first));
  kept.insert(kept.end(), items.begin() + static_cast<std::ptrdiff_t>(range.second), items.end());
  return kept;
}

// Runs a target and returns its first output; anything it throws becomes a verdict of kind
// `exception`, and no output at all a `shape` verdict.
template <class Problem>
std::variant<HostTensor, compare::Verdict> run_guarded(const kernels::Target<Problem>& target,
                                                      const Problem& problem, DType dtype,
                                                      Device device,
                                                      const std::string& property = "kernel") {
  try {
    std::vector<HostTensor> outputs = target.run(problem, dtype, device);
    if (outputs.empty())
      return compare::Verdict{FindingKind::shape, "contract", "the kernel returned no output", {}};
    return std::move(outputs.front());
  } catch (const std::exception& error) {
    std::string message = error.what();
    message = message.substr(0, message.find('\n'));
    return compare::Verdict{FindingKind::exception, property, "the kernel raised: " + message,
                            {{"exception", message}}};
  }
}

template <class Problem>
class TypedOpHarness final : public OpHarness {
 public:
  explicit TypedOpHarness(OpDefinition<Problem> definition) : def_(std::move(definition)) {}

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
    Problem problem = generate(request).value();
    return {def_.judge(problem, find_target(request.target), request.dtype, request.device),
            def_.size(problem)};
  }

  ShrinkResult shrink(const CaseRequest& request, const compare::Verdict& observed,
                      const ShrinkLimits& limits) const override {
    const auto& target = find_target(request.target);
    auto still_fails = [&](const Problem& problem) -> std::optional<compare::Verdict> {
      compare::Judgement judgement = def_.judge(problem, target, request.dtype, request.device);
      for (auto& verdict : judgement.verdicts)
        if (verdict.kind == observed.kind && verdict.property == observed.property) return verdict;
      return std::nullopt;
    };
    rc::Shrinkable<Problem> current = generate(request);
    Problem best = current.value();
    ShrinkResult result;
    auto first = still_fails(best);
    if (!first) {
      result.verdict = observed;
      result.input = def_.to_json(best);
      result.size = def_.size(best);
      result.reproducible = false;
      return result;
    }
    result.verdict = *first;
    int evaluations = 0;
    bool limited = false;
    auto out_of_budget = [&] {
      limited = limited || ++evaluations > limits.max_evaluations ||
                std::chrono::steady_clock::now() > limits.deadline;
      return limited;
    };
    // 1. RapidCheck's integrated shrinking: smaller counts, integers, plainer values.
    for (bool improved = true; improved && !limited;) {
      improved = false;
      auto shrinks = current.shrinks();
      while (auto candidate = shrinks.next()) {
        if (out_of_budget()) break;
        Problem smaller = candidate->value();
        if (auto verdict = still_fails(smaller)) {
          current = *candidate;
          best = std::move(smaller);
          result.verdict = std::move(*verdict);
          ++result.steps;
          improved = true;
          break;
        }
      }
    }
    // 2. Delete boxes while the failure stays (ddmin over the problem's box lists).
    for (bool improved = true; improved && !limited;) {
      improved = false;
      for (Problem& smaller : def_.reductions(best)) {
        if (out_of_budget()) break;
        if (auto verdict = still_fails(smaller)) {
          best = std::move(smaller);
          result.verdict = std::move(*verdict);
          ++result.steps;
          improved = true;
          break;
        }
      }
    }
    result.input = def_.to_json(best);
    result.size = def_.size(best);
    result.complete = !limited;
    return result;
  }

  CaseOutcome judge_input(const nlohmann::json& input, const std::string& target, DType dtype,
                          Device device) const override {
    Problem problem = def_.from_json(input);
    return {def_.judge(problem, find_target(target), dtype, device), def_.size(problem)};
  }

 private:
  rc::Shrinkable<Problem> generate(const CaseRequest& request) const {
    return def_.generator({request.dtype, request.max_boxes})(rc::Random(request.case_seed),
                                                               request.generator_size);
  }

  const kernels::Target<Problem>& find_target(const std::string& name) const {
    for (const auto& target : def_.targets)
      if (target.name == name) return target;
    throw Error(ErrorKind::usage, "op " + def_.name + " has no target '" + name + "'");
  }

  OpDefinition<Problem> def_;
};

}  // namespace detfuzz::fuzz
