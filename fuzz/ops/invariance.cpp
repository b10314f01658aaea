#include "fuzz/ops/invariance.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace detfuzz::fuzz {
namespace {

bool within_range(const std::vector<Box>& boxes, DType dtype, double scale) {
  const FloatFormat& storage = float_format(dtype);
  const FloatFormat& accumulate = float_format(accumulate_type(dtype));
  double largest = 0, smallest_nonzero = INFINITY;
  double lo = INFINITY, hi = -INFINITY;
  for (const Box& b : boxes)
    for (double v : {b.x1, b.y1, b.x2, b.y2}) {
      largest = std::max(largest, std::fabs(v));
      if (v != 0) smallest_nonzero = std::min(smallest_nonzero, std::fabs(v));
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
  const double extent = (hi - lo) * scale;
  // Coordinates and widths live in the storage dtype, areas and unions (<= 2 extent^2) in
  // the accumulate type.
  if (largest * scale > storage.max_finite || extent > storage.max_finite) return false;
  if (2 * extent * extent > accumulate.max_finite) return false;
  if (std::isfinite(smallest_nonzero)) {
    // Nonzero differences of representable coordinates are multiples of the spacing at
    // the smallest nonzero magnitude; products of two such are the smallest areas.
    const double spacing = ulp(dtype, smallest_nonzero) * scale;
    if (smallest_nonzero * scale < storage.min_normal || spacing < storage.min_normal) return false;
    if (spacing * spacing < accumulate.min_normal) return false;
  }
  return true;
}

}  // namespace

int safe_scale_exponent(const std::vector<Box>& boxes, DType dtype) {
  if (boxes.empty() || !within_range(boxes, dtype, 1.0)) return 0;
  for (int k : {1, -1, 2, -2})
    if (within_range(boxes, dtype, std::ldexp(1.0, k))) return k;
  return 0;
}

std::vector<Box> scale_boxes(const std::vector<Box>& boxes, int exponent) {
  std::vector<Box> scaled;
  scaled.reserve(boxes.size());
  for (const Box& b : boxes)
    scaled.push_back({std::ldexp(b.x1, exponent), std::ldexp(b.y1, exponent),
                      std::ldexp(b.x2, exponent), std::ldexp(b.y2, exponent)});
  return scaled;
}

std::vector<std::int64_t> fixed_permutation(std::size_t n) {
  std::vector<std::int64_t> permutation(n);
  std::iota(permutation.begin(), permutation.end(), 0);
  std::uint64_t state = 0x9E3779B97F4A7C15ULL ^ n;
  auto next = [&state] {  // splitmix64
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  };
  for (std::size_t i = n; i > 1; --i) std::swap(permutation[i - 1], permutation[next() % i]);
  return permutation;
}

bool identical(const HostTensor& a, const HostTensor& b) {
  if (a.shape != b.shape || a.dtype != b.dtype || a.values.size() != b.values.size()) return false;
  for (std::size_t i = 0; i < a.values.size(); ++i) {
    bool both_nan = std::isnan(a.values[i]) && std::isnan(b.values[i]);
    if (!both_nan && a.values[i] != b.values[i]) return false;
  }
  return true;
}

}  // namespace detfuzz::fuzz
