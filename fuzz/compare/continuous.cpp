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

double tolerance(const TierExpectation& tier, DType output_dtype) {
  return tier.bound + std::max(half_ulp(output_dtype, tier.low), half_ulp(output_dtype, tier.high));
}

std::string expected_text(const ExpectedValue& e) {
  if (e.storage.low == e.storage.high) return fmt::format("{}", e.value);
  return fmt::format("{} (any of [{}, {}] with storage arithmetic)", e.value, e.storage.low, e.storage.high);
}

struct Worst {
  std::size_t element = 0;
  double normalized_error = -1;
  std::size_t count = 0;
};

}  // namespace

Judgement compare_continuous(const HostTensor& output, const std::vector<ExpectedValue>& expected,
                             const OutputContract& contract, DType input_dtype) {
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
    double normalized = 0;
    if (!std::isfinite(e.value) || !std::isfinite(strict_tolerance[i])) {
      // The true value itself leaves double's range: only a range hazard can be said.
      if (kernel != e.value) kind = FindingKind::overflow;
    } else if (!std::isfinite(kernel)) {
      bool true_value_in_range = std::fabs(e.value) <= float_format(output_dtype).max_finite;
      kind = (e.range_ok && true_value_in_range) ? FindingKind::nan : FindingKind::overflow;
      normalized = std::numeric_limits<double>::infinity();
    } else {
      const double error = distance(kernel, e.strict);
      normalized = strict_tolerance[i] > 0 ? error / strict_tolerance[i]
                                           : (error == 0 ? 0 : std::numeric_limits<double>::infinity());
      if (error > strict_tolerance[i]) {
        if (distance(kernel, e.storage) <= storage_tolerance[i]) kind = FindingKind::precision;
        else kind = e.range_ok ? FindingKind::mismatch : FindingKind::overflow;
      }
    }
    // Range hazards say nothing about accuracy: keep them out of the cell's headline number.
    if (std::isfinite(normalized) && e.range_ok) max_normalized = std::max(max_normalized, normalized);
    if (!kind) continue;
    Worst& w = worst[*kind];
    ++w.count;
    if (normalized > w.normalized_error) w = {i, normalized, w.count};
  }
  judgement.max_normalized_error = max_normalized;

  for (const auto& [kind, w] : worst) {
    const ExpectedValue& e = expected[w.element];
    const double kernel = output.values[w.element];
    const auto index = element_index(w.element, output.shape);
    Verdict verdict;
    verdict.kind = kind;
    verdict.property = "oracle";
    verdict.message = fmt::format(
        "{}{}: kernel {} vs oracle {} (error {:.3g}, tolerance {:.3g} with {} arithmetic, "
        "{:.3g} with {} arithmetic){}",
        contract.name, shape_string(index), std::isnan(kernel) ? "nan" : fmt::format("{}", kernel),
        expected_text(e), distance(kernel, e.strict),
        strict_tolerance[w.element], dtype_name(accumulate_type(input_dtype)),
        storage_tolerance[w.element], dtype_name(input_dtype),
        w.count > 1 ? fmt::format("; {} elements like it", w.count) : std::string());
    verdict.details = {
        {"element", index},
        {"kernel", corpus::json_double(kernel)},
        {"oracle", corpus::json_double(e.value)},
        {"oracle_interval", {corpus::json_double(e.strict.low), corpus::json_double(e.strict.high)}},
        {"normalized_error", corpus::json_double(w.normalized_error)},
        {"tolerance", strict_tolerance[w.element]},
        {"storage_tolerance", storage_tolerance[w.element]},
        {"intermediates_in_range", e.range_ok},
        {"elements_of_this_kind", w.count},
    };
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

std::vector<double> strict_tolerances(const std::vector<ExpectedValue>& expected, DType output_dtype) {
  std::vector<double> out;
  for (const auto& e : expected) out.push_back(e.undefined ? INFINITY : e.strict.bound + half_ulp(output_dtype, e.value));
  return out;
}

}  // namespace detfuzz::compare
