#include "fuzz/case_timeout.h"

#include <algorithm>
#include <cmath>

namespace detfuzz::fuzz {

double case_cost(std::size_t size, int exponent) { return std::pow(static_cast<double>(size) + 1.0, exponent); }

double scaled_ceiling_s(double ceiling_s, std::size_t size) {
  return ceiling_s * (1.0 + static_cast<double>(size) / 1000.0);
}

std::size_t CellTimeout::size_class(std::size_t size) {
  std::size_t k = 0;
  for (std::size_t n = size + 1; n > 1; n >>= 1) ++k;
  return std::min(k, kSizeClasses - 1);
}

void CellTimeout::observe(std::size_t size, double seconds) {
  if (!(seconds >= 0) || !std::isfinite(seconds)) return;
  double& slowest = slowest_[size_class(size)];
  slowest = std::max(slowest, seconds);
  ++measured_;
}

// A size's class when it was measured; otherwise the nearest smaller measured class,
// extrapolated by the cost model from that class's smallest size (an overestimate, never an
// under-); below every measured class, the smallest one's (more work takes no less time).
// Unknown size: the slowest case measured.
double CellTimeout::predicted_s(std::optional<std::size_t> size) const {
  if (!size) return *std::max_element(slowest_.begin(), slowest_.end());
  const std::size_t k = size_class(*size);
  for (std::size_t j = k + 1; j-- > 0;) {
    if (slowest_[j] <= 0) continue;
    if (j == k) return slowest_[j];
    const std::size_t smallest_of_class = (std::size_t{1} << j) - 1;
    return slowest_[j] * case_cost(*size, exponent_) / case_cost(smallest_of_class, exponent_);
  }
  for (double slowest : slowest_)
    if (slowest > 0) return slowest;
  return 0;
}

double CellTimeout::limit_s(std::optional<std::size_t> size) const {
  // A cell whose hang is confirmed has nothing to lose by a short limit: a slow case called
  // hung only adds an occurrence to that finding. Whatever it measured counts, and a cell
  // that never answered (it hangs on every input) gets the floor.
  if (hang_confirmed && measured_ == 0) return rule_.floor_s;
  if (!calibrated() && !(hang_confirmed && measured_ > 0)) return rule_.ceiling_s;
  const double limit = std::max(rule_.floor_s, rule_.headroom * predicted_s(size));
  return std::min(limit, rule_.ceiling_s);
}

}  // namespace detfuzz::fuzz
