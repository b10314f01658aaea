// What the RoI ops (roi_align, roi_pool) share: minimizer moves over a feature map and its
// RoIs, and the exact property that scaling every map value by 2 scales every output by 2.
#pragma once

#include <utility>
#include <vector>

#include "model/dtype.h"
#include "model/problems.h"

namespace detfuzz::fuzz {

struct MapAndRois {
  FeatureMap map;
  std::vector<Roi> rois;
};

// Smaller or plainer (map, RoIs) pairs, largest cuts first: RoIs deleted, a channel or an
// image no RoI uses dropped, the last row or column cropped, values made plainer, RoI
// coordinates made plainer.
std::vector<MapAndRois> smaller_maps_and_rois(const FeatureMap& map, const std::vector<Roi>& rois, DType dtype);

// The map with every value doubled, when that is exact and stays far from overflow and
// from subnormal products in `dtype` (so outputs must double exactly); nullopt otherwise.
std::optional<FeatureMap> doubled_map(const FeatureMap& map, DType dtype);

// The RoI shapes [K, C, pooled_height, pooled_width].
std::vector<std::int64_t> pooled_shape(std::size_t rois, const FeatureMap& map, std::int64_t pooled_height,
                                       std::int64_t pooled_width);

}  // namespace detfuzz::fuzz
