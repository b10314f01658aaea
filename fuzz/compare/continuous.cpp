#include "fuzz/compare/continuous.h"

#include <fmt/format.h>

#include <cmath>
#include <map>

#include "corpus/case_json.h"
#include "model/dtype.h"

namespace detfuzz::compare {
namespace {

// How far `kernel` is outside the tier's interval (0 inside it).
double distance(double kernel, const TierExpectation& tier) {
  if (kernel < tier.low) return tier.low - kernel;
  if (kernel > tier.high) return kernel - tier.high;
  return 0;
}

std::string expected_text(const ExpectedValue& e) {
  if (e.storage.low == e.storage.high) return fmt::format("{}", e.value);
  return fmt::format("{} (any of [{}, {}] with storage arithmetic)", e.value, e.storage.low, e.storage.high);
}

struct Worst {
  std::size_t element = 0;
  double normalized_error = -1;
  std::size_t count = 0;
  std::optional<StageOverflow> overflow;  // dtype_overflow: the intermediate
};

// The headline of one verdict: what the kernel returned, what was expected, and why the
// difference is the kind it is. Tolerances only where the kernel's value is a number.
std::string verdict_message(FindingKind kind, const std::string& where, double kernel, const ExpectedValue& e,
                            const Worst& w, double strict_tol, double storage_tol, DType input_dtype) {
  const DType strict = accumulate_type(input_dtype);
  const std::string got = fmt::format("{}: kernel {} vs oracle {}", where, value_text(kernel), expected_text(e));
  if (kind == FindingKind::dtype_overflow && w.overflow) {
    const StageOverflow& o = *w.overflow;
    const std::string reach =
        o.reach == o.value ? "" : fmt::format(", and with {} rounding it may reach {}", dtype_name(o.dtype), o.reach);
    return fmt::format("{}: the target computes {} in {}{}; its true value is {}{}, beyond {}'s largest finite {} "
                       "(it fits {})",
                       got, o.stage, dtype_name(o.dtype), o.source.empty() ? "" : " (" + o.source + ")", o.value,
                       reach, dtype_name(o.dtype), float_format(o.dtype).max_finite, dtype_name(strict));
  }
  const double dtype_max = float_format(input_dtype).max_finite;
  if (kind == FindingKind::overflow && e.range_ok && std::isfinite(e.value) && std::fabs(e.value) > dtype_max)
    return fmt::format("{}: the true value is beyond {}'s largest finite {}, so an infinity is what {} holds of it "
                       "(a range hazard of these values)",
                       got, dtype_name(input_dtype), dtype_max, dtype_name(input_dtype));
  if (kind == FindingKind::overflow)
    return fmt::format("{}: the true intermediates leave {}'s range, so no {} kernel can be held to a bound "
                       "(a range hazard of these values)",
                       got, dtype_name(strict), dtype_name(input_dtype));
  if (kind == FindingKind::nan)
    return fmt::format("{}: {} where the true value is finite and every intermediate is within {}'s range", got,
                       std::isnan(kernel) ? "NaN" : "an infinity", dtype_name(strict));
  return fmt::format("{} (error {:.3g}, tolerance {:.3g} with {} arithmetic, {:.3g} with {} arithmetic)", got,
                     distance(kernel, e.strict), strict_tol, dtype_name(strict), storage_tol,
                     dtype_name(input_dtype));
}

}  // namespace

std::string value_text(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+inf" : "-inf";
  return fmt::format("{}", value);
}

double tolerance(const TierExpectation& tier, DType output_dtype) {
  return tier.bound + std::max(half_ulp(output_dtype, tier.low), half_ulp(output_dtype, tier.high));
}

Judgement compare_continuous(const HostTensor& output, const std::vector<ExpectedValue>& expected,
                             const OutputContract& contract, DType input_dtype, const OverflowExplainer& explain) {
  Judgement judgement;
  if (auto breach = check_contract(output, contract)) {
    judgement.verdicts.push_back(*breach);
    return judgement;
  }
  const DType output_dtype = parse_dtype(contract.dtype).value_or(DType::fp64);
  std::map<FindingKind, Worst> worst;
  std::vector<double> strict_tolerance(expected.size()), storage_tolerance(expected.size());
  double max_normalized = 0;

  for (std::size_t i = 0; i < expected.size(); ++i) {
    const ExpectedValue& e = expected[i];
    const double kernel = output.values[i];
    if (e.undefined) continue;
    strict_tolerance[i] = tolerance(e.strict, output_dtype);
    storage_tolerance[i] = tolerance(e.storage, output_dtype);

    std::optional<FindingKind> kind;
    std::optional<StageOverflow> overflow;
    // A wrong element whose intermediates fit the accumulate type: the target's own
    // arithmetic may have overflowed a narrower dtype (dtype_overflow), else `otherwise`.
    auto wrong_in_range = [&](FindingKind otherwise) {
      if (explain) overflow = explain(i);
      return overflow ? FindingKind::dtype_overflow : otherwise;
    };
    double normalized = 0;
    if (!std::isfinite(e.value) || !std::isfinite(strict_tolerance[i])) {
      // The true value itself leaves double's range: only a range hazard can be said.
      if (kernel != e.value) kind = FindingKind::overflow;
    } else if (!std::isfinite(kernel)) {
      bool true_value_in_range = std::fabs(e.value) <= float_format(output_dtype).max_finite;
      kind = (e.range_ok && true_value_in_range) ? wrong_in_range(FindingKind::nan) : FindingKind::overflow;
      normalized = std::numeric_limits<double>::infinity();
    } else {
      const double error = distance(kernel, e.strict);
      normalized = strict_tolerance[i] > 0 ? error / strict_tolerance[i]
                                           : (error == 0 ? 0 : std::numeric_limits<double>::infinity());
      if (error > strict_tolerance[i]) {
        if (distance(kernel, e.storage) <= storage_tolerance[i]) kind = FindingKind::precision;
        else kind = e.range_ok ? wrong_in_range(FindingKind::mismatch) : FindingKind::overflow;
      }
    }
    // Range hazards say nothing about accuracy: keep them out of the cell's headline number.
    if (std::isfinite(normalized) && e.range_ok) max_normalized = std::max(max_normalized, normalized);
    if (!kind) continue;
    Worst& w = worst[*kind];
    ++w.count;
    if (normalized > w.normalized_error) {
      w.element = i;
      w.normalized_error = normalized;
      w.overflow = std::move(overflow);
    }
  }
  judgement.max_normalized_error = max_normalized;

  for (const auto& [kind, w] : worst) {
    const ExpectedValue& e = expected[w.element];
    const double kernel = output.values[w.element];
    const auto index = element_index(w.element, output.shape);
    Verdict verdict;
    verdict.kind = kind;
    verdict.property = "oracle";
    verdict.message = verdict_message(kind, contract.name + shape_string(index), kernel, e, w,
                                      strict_tolerance[w.element], storage_tolerance[w.element], input_dtype) +
                      (w.count > 1 ? fmt::format("; {} elements like it", w.count) : std::string());
    const bool kernel_finite = std::isfinite(kernel);
    verdict.details = {
        {"element", index},
        {"kernel", corpus::json_double(kernel)},
        {"oracle", corpus::json_double(e.value)},
        {"oracle_interval", {corpus::json_double(e.strict.low), corpus::json_double(e.strict.high)}},
        {"normalized_error", corpus::json_double(w.normalized_error)},
        // No error is measured against a NaN or an infinity: "unbounded", never 0.
        {"error", kernel_finite ? nlohmann::json(corpus::json_double(distance(kernel, e.strict)))
                                : nlohmann::json("unbounded")},
        {"tolerance", strict_tolerance[w.element]},
        {"storage_tolerance", storage_tolerance[w.element]},
        {"intermediates_in_range", e.range_ok && !w.overflow},
        {"range_judged_in", std::string(dtype_name(w.overflow ? w.overflow->dtype : accumulate_type(input_dtype)))},
        {"elements_of_this_kind", w.count},
    };
    if (w.overflow)
      verdict.details["overflowing_intermediate"] = {
          {"stage", w.overflow->stage},
          {"value", corpus::json_double(w.overflow->value)},
          {"reach", corpus::json_double(w.overflow->reach)},
          {"dtype", std::string(dtype_name(w.overflow->dtype))},
          {"largest_finite", float_format(w.overflow->dtype).max_finite},
          {"source", w.overflow->source}};
    judgement.verdicts.push_back(std::move(verdict));
  }
  return judgement;
}

ExpectedValue expected_from(const oracles::OracleValue& value, DType dtype, double safety, bool hostile) {
  const DType strict = accumulate_type(dtype);
  return ExpectedValue::point(value.value, safety * (value.bound(strict) + value.bound(DType::fp64)),
                              safety * (value.bound(dtype) + value.bound(DType::fp64)), value.range_ok(strict),
                              value.undefined || hostile);
}

ExpectedValue expected_from(const oracles::GradientElement& g) {
  return {g.value, g.unconstrained, {g.strict.low, g.strict.high, g.strict.bound},
          {g.storage.low, g.storage.high, g.storage.bound}, g.range_ok};
}

std::vector<double> strict_tolerances(const std::vector<ExpectedValue>& expected, DType output_dtype) {
  std::vector<double> out;
  for (const auto& e : expected) out.push_back(e.undefined ? INFINITY : tolerance(e.strict, output_dtype));
  return out;
}

}  // namespace detfuzz::compare
