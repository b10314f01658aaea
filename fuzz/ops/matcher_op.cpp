// matcher: every prediction's match must be one the oracle accepts (oracles/matcher.h):
// with exact thresholds (or fp32's) it is `ok`; only with the thresholds rounded to the
// quality's dtype it is `precision` (a low-precision tensor compared with a Python float);
// otherwise `mismatch`, naming the prediction, its best quality and the thresholds. An
// empty matrix may raise (torchvision's ValueError); NaN qualities owe only the shape.
#include <fmt/format.h>

#include <algorithm>

#include "corpus/case_json.h"
#include "fuzz/compare/contract.h"
#include "fuzz/gen/matcher.h"
#include "fuzz/ops/side_by_side.h"
#include "fuzz/ops/typed_harness.h"
#include "oracles/matcher.h"

namespace detfuzz::fuzz {
namespace {

using MatcherTarget = kernels::Target<MatcherProblem>;

// The first prediction whose match is not acceptable, or -1.
std::int64_t first_wrong(const std::vector<double>& matches, const std::vector<std::vector<std::int64_t>>& accepted) {
  for (std::size_t n = 0; n < accepted.size(); ++n) {
    const auto& ok = accepted[n];
    if (std::find(ok.begin(), ok.end(), static_cast<std::int64_t>(matches[n])) == ok.end()) return static_cast<std::int64_t>(n);
  }
  return -1;
}

compare::Judgement judge(const MatcherProblem& p, const MatcherTarget& target, DType dtype, Device device) {
  const bool hostile = std::any_of(p.quality.begin(), p.quality.end(), gen::hostile_value);
  auto run = run_target(target, p, dtype, device, hostile || p.quality.empty());
  if (auto* judgement = std::get_if<compare::Judgement>(&run)) return *judgement;
  compare::Judgement judgement;
  judgement.outputs = std::get<std::vector<HostTensor>>(run);
  const HostTensor& matches = judgement.outputs.front();
  if (auto breach = compare::check_contract(matches, {"matches", {p.predictions}, "int64", device})) {
    judgement.verdicts.push_back(*breach);
    return judgement;
  }
  if (hostile) return judgement;
  const auto exact = timed_oracle([&] { return oracles::matcher(p, DType::fp64); });
  const std::int64_t wrong = first_wrong(matches.values, exact);
  if (wrong < 0) return judgement;
  // A wrong match may be the dtype's own rounding: the references in the accumulate and
  // storage types say which (their time is oracle time too).
  if (first_wrong(matches.values, timed_oracle([&] { return oracles::matcher(p, accumulate_type(dtype)); })) < 0)
    return judgement;
  const bool storage =
      first_wrong(matches.values, timed_oracle([&] { return oracles::matcher(p, dtype); })) < 0;
  double best = -INFINITY;
  for (std::int64_t m = 0; m < p.ground_truths; ++m) best = std::max(best, p.quality[m * p.predictions + wrong]);
  judgement.verdicts.push_back(
      {storage ? FindingKind::precision : FindingKind::mismatch, "oracle",
       fmt::format("prediction {} (best quality {}) is matched to {}, expected one of {} (thresholds high {}, low {}{})",
                   wrong, best, matches.values[wrong], fmt::join(exact[wrong], ", "), p.high, p.low,
                   storage ? fmt::format("; right for thresholds rounded to {}", dtype_name(dtype)) : ""),
       {{"prediction", wrong}, {"match", matches.values[wrong]}, {"accepted", exact[wrong]},
        {"best_quality", corpus::json_double(best)}}});
  return judgement;
}

std::vector<MatcherProblem> smaller(const MatcherProblem& p, DType dtype) {
  std::vector<MatcherProblem> out;
  const auto m_count = static_cast<std::size_t>(p.ground_truths), n_count = static_cast<std::size_t>(p.predictions);
  for (auto range : removal_ranges(n_count)) {  // predictions: columns
    if (range.second - range.first == n_count) continue;
    MatcherProblem fewer = p;
    fewer.quality.clear();
    for (std::size_t m = 0; m < m_count; ++m)
      for (std::size_t n = 0; n < n_count; ++n)
        if (n < range.first || n >= range.second) fewer.quality.push_back(p.quality[m * n_count + n]);
    fewer.predictions = static_cast<std::int64_t>(n_count - (range.second - range.first));
    out.push_back(std::move(fewer));
  }
  for (auto range : removal_ranges(m_count)) {  // ground truths: rows
    if (range.second - range.first == m_count) continue;
    MatcherProblem fewer = p;
    fewer.quality = without(p.quality, {range.first * n_count, range.second * n_count});
    fewer.ground_truths = static_cast<std::int64_t>(m_count - (range.second - range.first));
    out.push_back(std::move(fewer));
  }
  if (p.allow_low_quality_matches) {
    MatcherProblem plainer = p;
    plainer.allow_low_quality_matches = false;
    out.push_back(std::move(plainer));
  }
  for (std::size_t i = 0; i < p.quality.size() && p.quality.size() <= kMaxElementsToSimplify; ++i)
    for (double v : simpler_values(p.quality[i], dtype)) {
      MatcherProblem plainer = p;
      plainer.quality[i] = v;
      out.push_back(std::move(plainer));
    }
  return out;
}

}  // namespace

std::unique_ptr<OpHarness> make_matcher_harness(std::vector<MatcherTarget> targets) {
  OpDefinition<MatcherProblem> definition;
  definition.name = op_name(OpId::matcher);
  definition.description =
      "anchor matching (torchvision Matcher: best ground truth per prediction, -1 below low, -2 between, "
      "low-quality matches)";
  definition.targets = std::move(targets);
  definition.generator = gen::matcher_problem;
  definition.judge = judge;
  definition.to_json = [](const MatcherProblem& p) { return corpus::to_json(p); };
  definition.from_json = corpus::matcher_problem_from_json;
  definition.size = [](const MatcherProblem& p) { return static_cast<std::size_t>(p.predictions); };
  definition.smaller = smaller;
  definition.oracle_json = [](const MatcherProblem& p, DType) {
    return nlohmann::json{{"accepted_matches", oracles::matcher(p, DType::fp64)}};
  };
  definition.side_by_side = [](const MatcherProblem& p, const std::vector<HostTensor>& outputs, DType) {
    std::vector<double> first_accepted;
    for (const auto& accepted : oracles::matcher(p, DType::fp64)) first_accepted.push_back(static_cast<double>(accepted.front()));
    return lists_side_by_side("matches", outputs.front().values, first_accepted);
  };
  definition.probe = {1, 2, {0.75, 0.25}, 0.7, 0.3, true};
  return std::make_unique<TypedOpHarness<MatcherProblem>>(std::move(definition));
}

}  // namespace detfuzz::fuzz
