// RapidCheck generators of feature maps, RoIs and the RoIAlign / RoIPool problems built
// from them. Values are rounded to the case's dtype; everything shrinks toward small maps,
// few RoIs, integer coordinates and spatial_scale 1.
#pragma once

#include <rapidcheck.h>

#include "fuzz/gen/boxes.h"
#include "model/problems.h"

namespace detfuzz::gen {

// Maps: constant, ramps (smooth), checkerboards (high frequency), dyadic noise, and
// magnitudes near the dtype's maximum (both signs); 1-3 images, 1-4 channels, sides 1..24.
rc::Gen<FeatureMap> feature_map(DType dtype);
// The same with the channel count drawn from `channels`.
rc::Gen<FeatureMap> feature_map(DType dtype, rc::Gen<std::int64_t> channels);

// Values for `count` positions of a map of `height` x `width` (repeated per image and
// channel), by kind: constant, ramps (smooth), checkerboards (high frequency), dyadic noise,
// magnitudes near the dtype's maximum; rounded to `dtype`.
rc::Gen<std::vector<double>> map_values(DType dtype, std::int64_t count, std::int64_t height, std::int64_t width);

// RoIs for `map` at `spatial_scale`, in image coordinates: inside, partly or wholly
// outside, negative, zero-size, sub-pixel, very large; batch indices over every image.
rc::Gen<std::vector<Roi>> rois(const FeatureMap& map, double spatial_scale, DType dtype, int max_rois);

// 1 and the FPN scales 1/4 .. 1/32 mostly, arbitrary ones too.
rc::Gen<double> spatial_scale();

rc::Gen<RoiAlignProblem> roi_align_problem(const BoxGenOptions& options);
rc::Gen<RoiPoolProblem> roi_pool_problem(const BoxGenOptions& options);
// Channels a multiple of the pooled grid (now and then not: the kernel must refuse those).
rc::Gen<RoiPoolProblem> ps_roi_pool_problem(const BoxGenOptions& options);
// The same for PSRoIAlign, with RoIAlign's sampling ratios; aligned always (its geometry).
rc::Gen<RoiAlignProblem> ps_roi_align_problem(const BoxGenOptions& options);
// The backward problems of roi_align_problem and ps_roi_align_problem: the same geometry, the
// map's shape alone, a gradient of the forward output's shape.
rc::Gen<RoiAlignBackwardProblem> roi_align_backward_problem(const BoxGenOptions& options);
rc::Gen<RoiAlignBackwardProblem> ps_roi_align_backward_problem(const BoxGenOptions& options);
// RoIPool's backward: roi_pool_problem's geometry, the argmax its forward gives (the fp64
// oracle's: the first maximum of each bin, -1 for an empty one) and a gradient.
rc::Gen<RoiPoolBackwardProblem> roi_pool_backward_problem(const BoxGenOptions& options);
// PSRoIPool's backward: ps_roi_pool_problem's geometry (channels made a multiple of the grid)
// and a gradient of its output's shape.
rc::Gen<PsRoiPoolBackwardProblem> ps_roi_pool_backward_problem(const BoxGenOptions& options);

}  // namespace detfuzz::gen
