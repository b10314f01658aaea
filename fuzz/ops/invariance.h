// Shared pieces of the oracle-free properties: scaling by powers of two and permuting are
// exact in binary floating point, so a kernel's output must not change at all.
#pragma once

#include <cstdint>
#include <vector>

#include "model/dtype.h"
#include "model/problems.h"

namespace detfuzz::fuzz {

// k (|k| <= 2, never 0) such that multiplying every coordinate by 2^k keeps every
// intermediate of box arithmetic (coordinates and widths in `dtype`, areas and unions in
// its accumulate type) normal and finite, before and after scaling; 0 when none does.
int safe_scale_exponent(const std::vector<Box>& boxes, DType dtype);

std::vector<Box> scale_boxes(const std::vector<Box>& boxes, int exponent);

// A permutation of 0..n-1 from a fixed seed of our own (std::shuffle is not portable
// across standard libraries, and replays must be).
std::vector<std::int64_t> fixed_permutation(std::size_t n);

// Same shape, dtype and values bit for bit (NaN equal to NaN).
bool identical(const HostTensor& a, const HostTensor& b);

}  // namespace detfuzz::fuzz
