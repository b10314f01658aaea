#include "fuzz/compare/roi_pool_compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "corpus/case_json.h"
#include "fuzz/compare/contract.h"

namespace detfuzz::compare {
namespace {

bool among(const std::vector<oracles::RoiPoolOption>& options, double value, std::int64_t argmax) {
  return std::any_of(options.begin(), options.end(),
                     [&](const oracles::RoiPoolOption& o) { return o.value == value && o.argmax == argmax; });
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
    verdict.message = fmt::format(
        "output{}: kernel {} (argmax {}) vs oracle {} (argmax {}){}{}", shape_string(where),
        values.values[first.element], static_cast<std::int64_t>(argmax.values[first.element]), e.nominal.value,
        e.nominal.argmax, e.strict.size() > 1 ? fmt::format(", {} resolutions accepted", e.strict.size()) : "",
        first.count > 1 ? fmt::format("; {} elements like it", first.count) : "");
    nlohmann::json options = nlohmann::json::array();
    for (const auto& o : e.storage) options.push_back({corpus::json_double(o.value), o.argmax});
    verdict.details = {{"element", where},
                       {"kernel", corpus::json_double(values.values[first.element])},
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
