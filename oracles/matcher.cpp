#include "matcher.h"

#include <algorithm>
#include <cmath>

namespace detfuzz::oracles {

std::vector<std::vector<std::int64_t>> matcher(const MatcherProblem& p, DType threshold_dtype) {
  const auto m_count = static_cast<std::size_t>(p.ground_truths), n_count = static_cast<std::size_t>(p.predictions);
  auto q = [&](std::size_t m, std::size_t n) { return p.quality[m * n_count + n]; };
  const double high = round_to(threshold_dtype, p.high), low = round_to(threshold_dtype, p.low);
  std::vector<std::vector<std::int64_t>> accepted(n_count);
  std::vector<std::vector<std::int64_t>> best_ground_truths(n_count);
  for (std::size_t n = 0; n < n_count; ++n) {
    double best = -INFINITY;
    for (std::size_t m = 0; m < m_count; ++m) best = std::max(best, q(m, n));
    for (std::size_t m = 0; m < m_count; ++m)
      if (q(m, n) == best) best_ground_truths[n].push_back(static_cast<std::int64_t>(m));  // ties: any of them
    if (best < low) accepted[n] = {kBelowLowThreshold};
    else if (best < high) accepted[n] = {kBetweenThresholds};
    else accepted[n] = best_ground_truths[n];
  }
  if (p.allow_low_quality_matches)
    for (std::size_t m = 0; m < m_count; ++m) {
      double best = -INFINITY;
      for (std::size_t n = 0; n < n_count; ++n) best = std::max(best, q(m, n));
      for (std::size_t n = 0; n < n_count; ++n)
        if (q(m, n) == best) accepted[n] = best_ground_truths[n];
    }
  return accepted;
}

}  // namespace detfuzz::oracles
