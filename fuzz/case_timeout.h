// How long a case may run before it is a suspected hang. A fixed timeout is 10^5 to 10^6
// times what a fast op's case needs, so each cell calibrates its own from the cases it has
// measured (AFL++'s rule: a multiple of measured execution times, with a floor), scaled by
// case size with the op's cost model. The ceiling (--case-timeout, scaled by the op's
// largest case) is the startup value and the most any case gets; a case past a calibrated
// limit is only a suspect until the ceiling confirms it (fuzz/worker_runner.cpp).
#pragma once

#include <array>
#include <cstddef>
#include <optional>

namespace detfuzz::fuzz {

struct CaseTimeoutRule {
  double ceiling_s = 10;   // the startup value, and the most any case gets
  double floor_s = 0.05;   // the least: a loaded machine preempts a process for tens of ms
  double headroom = 8;     // times the prediction from the measured cases
  std::size_t calibration_cases = 32;  // measured cases before a cell's own limit applies
};

// The cost model: how a case's time grows with its size (boxes, RoIs). NMS compares pairs
// of boxes (exponent 2); the other ops are linear in theirs.
double case_cost(std::size_t size, int exponent);

// --case-timeout for a case of `size` boxes (or for a cell, its op's largest case): the
// ceiling grows by its value per 1,000 boxes, so that no legitimately large case meets it.
double scaled_ceiling_s(double ceiling_s, std::size_t size);

// One cell's measured case times, as the largest seen in each size class (sizes 2^k - 1 to
// 2^(k+1) - 2), and the limit they give.
class CellTimeout {
 public:
  CellTimeout(CaseTimeoutRule rule, int cost_exponent) : rule_(rule), exponent_(cost_exponent) {}

  void observe(std::size_t size, double seconds);
  // The limit for a case of `size` (nullopt: a generated case whose size the campaign does
  // not know before it runs; the slowest case measured bounds it). Before calibration_cases
  // are measured, the ceiling (unless a hang is confirmed).
  double limit_s(std::optional<std::size_t> size = std::nullopt) const;
  bool calibrated() const { return measured_ >= rule_.calibration_cases; }
  std::size_t measured() const { return measured_; }
  double ceiling_s() const { return rule_.ceiling_s; }

  // A case ran past the ceiling (at once, or as a suspect past a calibrated limit run again):
  // later suspects of the cell are hangs without paying the ceiling again, and the cell's
  // limit applies from its first measured case on.
  bool hang_confirmed = false;

 private:
  static constexpr std::size_t kSizeClasses = 40;
  static std::size_t size_class(std::size_t size);
  double predicted_s(std::optional<std::size_t> size) const;

  CaseTimeoutRule rule_;
  int exponent_;
  std::size_t measured_ = 0;
  std::array<double, kSizeClasses> slowest_{};  // 0: no case measured in the class
};

}  // namespace detfuzz::fuzz
