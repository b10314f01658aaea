#include "roi_pool.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "quantized_bins.h"

namespace detfuzz::oracles {
namespace {

RoiPoolOption pool(const FeatureMap& map, std::int64_t n, std::int64_t c, std::int64_t h0, std::int64_t h1,
                   std::int64_t w0, std::int64_t w1) {
  if (h1 <= h0 || w1 <= w0) return {0.0, -1};
  RoiPoolOption best{-std::numeric_limits<double>::infinity(), -1};
  for (std::int64_t h = h0; h < h1; ++h)
    for (std::int64_t w = w0; w < w1; ++w) {
      const double v = map.at(n, c, h, w);
      if (best.argmax < 0 || v > best.value) best = {v, h * map.width + w};
    }
  return best;
}

void add_unique(std::vector<RoiPoolOption>& options, const RoiPoolOption& option) {
  if (std::find(options.begin(), options.end(), option) == options.end()) options.push_back(option);
}

}  // namespace

std::vector<RoiPoolElement> roi_pool(const RoiPoolProblem& p, DType storage) {
  const FeatureMap& map = p.input;
  std::vector<RoiPoolElement> out;
  out.reserve(p.rois.size() * static_cast<std::size_t>(map.channels * p.pooled_height * p.pooled_width));
  for (const Roi& roi : p.rois) {
    const auto n = static_cast<std::int64_t>(roi.batch_index);
    quantized_bins::RoiBins bins;
    try {
      bins = quantized_bins::roi_bins(roi, p.spatial_scale, 1, p.pooled_height, p.pooled_width, map.height, map.width,
                                      storage);
    } catch (const quantized_bins::Unconstrained&) {
      RoiPoolElement anything;
      anything.unconstrained = true;
      out.insert(out.end(), static_cast<std::size_t>(map.channels * p.pooled_height * p.pooled_width), anything);
      continue;
    }
    const auto& rows = bins.rows;
    const auto& cols = bins.columns;
    for (std::int64_t c = 0; c < map.channels; ++c)
      for (std::int64_t ph = 0; ph < p.pooled_height; ++ph)
        for (std::int64_t pw = 0; pw < p.pooled_width; ++pw) {
          RoiPoolElement element;
          const quantized_bins::Span& row = rows[0][static_cast<std::size_t>(ph)].front();
          const quantized_bins::Span& col = cols[0][static_cast<std::size_t>(pw)].front();
          element.nominal = pool(map, n, c, row.begin, row.end, col.begin, col.end);
          for (int tier = 0; tier < 2; ++tier) {
            auto& options = tier == 0 ? element.strict : element.storage;
            for (const quantized_bins::Span& r : rows[tier + 1][static_cast<std::size_t>(ph)])
              for (const quantized_bins::Span& k : cols[tier + 1][static_cast<std::size_t>(pw)])
                add_unique(options, pool(map, n, c, r.begin, r.end, k.begin, k.end));
          }
          out.push_back(std::move(element));
        }
  }
  return out;
}

}  // namespace detfuzz::oracles
