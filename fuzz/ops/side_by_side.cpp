#include "fuzz/ops/side_by_side.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "corpus/case_json.h"
#include "fuzz/compare/contract.h"

namespace detfuzz::fuzz {
namespace {

std::string number(double value) { return std::isnan(value) ? "nan" : fmt::format("{}", value); }


}  // namespace

nlohmann::json expected_json(const std::vector<compare::ExpectedValue>& expected, const std::string& values_key) {
  nlohmann::json values = nlohmann::json::array(), intervals = nlohmann::json::array();
  for (const auto& e : expected) {
    values.push_back(corpus::json_double(e.value));
    intervals.push_back(
        {corpus::json_double(e.strict.low), corpus::json_double(e.strict.high), corpus::json_double(e.strict.bound)});
  }
  return {{values_key, values}, {"interval_and_bound", intervals}};
}

nlohmann::json host_tensor_json(const HostTensor& tensor) {
  nlohmann::json values = nlohmann::json::array();
  for (double v : tensor.values) values.push_back(corpus::json_double(v));
  return {{"shape", tensor.shape}, {"dtype", tensor.dtype}, {"device", tensor.device}, {"values", values}};
}

std::string lists_side_by_side(const std::string& what, const std::vector<double>& kernel,
                               const std::vector<double>& oracle) {
  std::string text = fmt::format("  {:>14} | {:<14}\n", "kernel " + what, "oracle " + what);
  for (std::size_t i = 0; i < std::max(kernel.size(), oracle.size()); ++i) {
    std::string k = i < kernel.size() ? number(kernel[i]) : "";
    std::string o = i < oracle.size() ? number(oracle[i]) : "";
    text += fmt::format("  {:>14} | {:<14}{}\n", k, o, k == o ? "" : "  <<");
  }
  auto missing_from = [](const std::vector<double>& a, const std::vector<double>& b) {
    std::vector<double> only;
    for (double v : a)
      if (std::find(b.begin(), b.end(), v) == b.end()) only.push_back(v);
    return only;
  };
  auto only_kernel = missing_from(kernel, oracle), only_oracle = missing_from(oracle, kernel);
  if (!only_kernel.empty()) text += fmt::format("  only in the kernel's: [{}]\n", fmt::join(only_kernel, ", "));
  if (!only_oracle.empty()) text += fmt::format("  only in the oracle's: [{}]\n", fmt::join(only_oracle, ", "));
  return text;
}

std::string element_table(const std::vector<std::int64_t>& shape, const std::vector<double>& kernel,
                          const std::vector<double>& oracle, const std::vector<double>& tolerance,
                          std::size_t max_rows) {
  const std::size_t count = std::min({kernel.size(), oracle.size(), tolerance.size()});
  auto beyond = [&](std::size_t i) {
    return !(std::fabs(kernel[i] - oracle[i]) <= tolerance[i]) && !(std::isnan(kernel[i]) && std::isnan(oracle[i]));
  };
  std::vector<std::size_t> rows;
  for (std::size_t i = 0; i < count && rows.size() < max_rows; ++i)
    if (beyond(i)) rows.push_back(i);
  std::size_t differing = 0;
  for (std::size_t i = 0; i < count; ++i) differing += beyond(i);
  for (std::size_t i = 0; i < count && rows.size() < max_rows; ++i)
    if (!beyond(i)) rows.push_back(i);
  std::string text = fmt::format("  {:<12} {:>22} {:>22} {:>11} {:>11}\n", "element", "kernel", "oracle", "|diff|",
                                 "tolerance");
  for (std::size_t i : rows)
    text += fmt::format("  {:<12} {:>22} {:>22} {:>11.3g} {:>11.3g}{}\n", compare::shape_string(compare::element_index(i, shape)),
                        number(kernel[i]), number(oracle[i]), std::fabs(kernel[i] - oracle[i]), tolerance[i],
                        beyond(i) ? "  <<" : "");
  text += fmt::format("  {} of {} elements beyond tolerance{}\n", differing, count,
                      count > rows.size() ? fmt::format(" ({} shown)", rows.size()) : "");
  return text;
}

}  // namespace detfuzz::fuzz
