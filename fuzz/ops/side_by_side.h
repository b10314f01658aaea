// How a replay shows a kernel's output beside the oracle's: plain text, differing entries
// marked with "<<" so they stand out in a terminal and in a CI log alike.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fuzz/compare/continuous.h"
#include "model/problems.h"

namespace detfuzz::fuzz {

nlohmann::json host_tensor_json(const HostTensor& tensor);

// Two index lists in columns, rows that differ marked, then what only one side has.
std::string lists_side_by_side(const std::string& what, const std::vector<double>& kernel,
                               const std::vector<double>& oracle);

// Elements of a tensor: the ones beyond `tolerance` first (marked), then others, at most
// `max_rows` in all.
std::string element_table(const std::vector<std::int64_t>& shape, const std::vector<double>& kernel,
                          const std::vector<double>& oracle, const std::vector<double>& tolerance,
                          std::size_t max_rows = 16);

// An oracle's expectations as a case file shows them: {values_key: [value, ...],
// "interval_and_bound": [[low, high, bound] of the accumulate-type tier, ...]}.
nlohmann::json expected_json(const std::vector<compare::ExpectedValue>& expected, const std::string& values_key);

}  // namespace detfuzz::fuzz
