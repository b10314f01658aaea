#include "fuzz/compare/roi_pool_compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "corpus/case_json.h"
#include "fuzz/compare/continuous.h"
#include "fuzz/compare/contract.h"

namespace detfuzz::compare {
namespace {

bool among(const std::vector<oracles::RoiPoolOption>& options, double value, std::int64_t argmax) {
  return std::any_of(options.begin(), options.end(),
                     [&](const oracles::RoiPoolOption& o) { return o.value == value && o.argmax == argmax; });
}


// A max rounds nothing: a bin's right answer is one of its input values, exactly, so any other
// value is an error no tolerance covers. Says so, with the difference, and names the one
// pattern that makes such errors unbounded: a max that starts at -FLT_MAX (argmax -1: no
// input value won) returns -FLT_MAX however far below it the bin's values lie.
std::string unbounded_explanation(double kernel, std::int64_t kernel_argmax, const oracles::RoiPoolOption& oracle) {
  if (std::isnan(kernel)) return "";
  std::string text = fmt::format(": error {:.3g} where a max allows none (unbounded in units of tolerance)",
                                 std::fabs(kernel - oracle.value));
  const double lowest_float = -static_cast<double>(std::numeric_limits<float>::max());
  if (kernel == lowest_float && kernel_argmax == -1 && oracle.argmax >= 0 && oracle.value < lowest_float)
    text += "; the kernel returned -FLT_MAX with argmax -1, the start of a max initialised at -FLT_MAX: every value of "
            "this bin lies below it, and the error grows without bound with them";
  return text;
}

}  // namespace

Judgement compare_roi_pool(const HostTensor& values, const HostTensor& argmax,
                           const std::vector<oracles::RoiPoolElement>& expected,
                           const std::vector<std::int64_t>& shape, DType dtype, Device device) {
  Judgement judgement;
  for (const auto& [tensor, contract] :
       {std::pair{&values, OutputContract{"output", shape, std::string(dtype_name(dtype)), device}},
        std::pair{&argmax, OutputContract{"argmax", shape, "int32", device}}}) {
    if (auto breach = check_contract(*tensor, contract)) {
      judgement.verdicts.push_back(*breach);
      return judgement;
    }
  }
  struct First {
    std::size_t element;
    std::size_t count;
  };
  std::map<FindingKind, First> found;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const double value = values.values[i];
    const auto index = static_cast<std::int64_t>(argmax.values[i]);
    const auto& e = expected[i];
    std::optional<FindingKind> kind;
    if (e.unconstrained) continue;
    if (std::isnan(value) && !std::isnan(e.nominal.value)) kind = FindingKind::nan;
    else if (among(e.strict, value, index)) continue;
    else if (among(e.storage, value, index)) kind = FindingKind::precision;
    else kind = FindingKind::mismatch;
    auto [it, inserted] = found.try_emplace(*kind, First{i, 0});
    ++it->second.count;
  }
  for (const auto& [kind, first] : found) {
    const auto& e = expected[first.element];
    const auto where = element_index(first.element, shape);
    Verdict verdict;
    verdict.kind = kind;
    const double kernel = values.values[first.element];
    const auto kernel_argmax = static_cast<std::int64_t>(argmax.values[first.element]);
    verdict.message = fmt::format(
        "output{}: kernel {} (argmax {}) vs oracle {} (argmax {}){}{}{}", shape_string(where), value_text(kernel),
        kernel_argmax, e.nominal.value, e.nominal.argmax,
        e.strict.size() > 1 ? fmt::format(", {} resolutions accepted", e.strict.size()) : "",
        kind == FindingKind::mismatch ? unbounded_explanation(kernel, kernel_argmax, e.nominal) : "",
        first.count > 1 ? fmt::format("; {} elements like it", first.count) : "");
    nlohmann::json options = nlohmann::json::array();
    for (const auto& o : e.storage) options.push_back({corpus::json_double(o.value), o.argmax});
    verdict.details = {{"element", where},
                       {"kernel", corpus::json_double(values.values[first.element])},
                       {"error", kind == FindingKind::nan ? nlohmann::json("unbounded")
                                                          : nlohmann::json(corpus::json_double(std::fabs(
                                                                values.values[first.element] - e.nominal.value)))},
                       {"kernel_argmax", argmax.values[first.element]},
                       {"oracle", corpus::json_double(e.nominal.value)},
                       {"oracle_argmax", e.nominal.argmax},
                       {"accepted_with_storage_arithmetic", options},
                       {"elements_of_this_kind", first.count}};
    judgement.verdicts.push_back(std::move(verdict));
  }
  return judgement;
}

}  // namespace detfuzz::compare
