#include "ps_roi_pool_backward.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "ps_roi_pool.h"
#include "quantized_bins.h"

namespace detfuzz::oracles {
namespace {

using quantized_bins::Span;

bool inside(const Span& rows, const Span& columns, std::int64_t h, std::int64_t w) {
  return rows.begin <= h && h < rows.end && columns.begin <= w && w < columns.end;
}

double area(const Span& rows, const Span& columns) {
  return static_cast<double>(std::max<std::int64_t>(rows.end - rows.begin, 0) *
                             std::max<std::int64_t>(columns.end - columns.begin, 0));
}

// The gradient's shape against the problem's; throws where they disagree.
void check_sizes(const PsRoiPoolBackwardProblem& p) {
  const RoiPoolProblem& f = p.forward;
  const std::size_t expected = f.rois.size() * static_cast<std::size_t>(f.input.channels);
  if (p.grad.size() != expected)
    throw std::invalid_argument("ps_roi_pool_backward: grad holds " + std::to_string(p.grad.size()) +
                                " values, the RoIs and channels need " + std::to_string(expected));
}

bool batch_indices_valid(const RoiPoolProblem& f) {
  return std::all_of(f.rois.begin(), f.rois.end(), [&](const Roi& roi) {
    return roi.batch_index >= 0 && roi.batch_index < static_cast<double>(f.input.batch) &&
           roi.batch_index == std::floor(roi.batch_index);
  });
}

}  // namespace

RoiAlignAnswer ps_roi_pool_backward(const PsRoiPoolBackwardProblem& problem, DType storage) {
  const RoiPoolProblem& f = problem.forward;
  const FeatureMap& map = f.input;
  const std::int64_t group = ps_channel_group(f);
  if (group <= 0 || map.channels % group != 0) return {};
  check_sizes(problem);
  const std::int64_t channels_out = map.channels / group, plane = map.height * map.width;
  const auto size = static_cast<std::size_t>(map.batch * map.channels * plane);
  RoiAlignAnswer out(size, RoiAlignElement{0, {0, 0, 0}, {0, 0, 0}, true, false});
  if (!batch_indices_valid(f)) {
    for (RoiAlignElement& e : out) e.unconstrained = true;
    return out;
  }
  // Until the last loop a tier's `bound` holds the sum of |share| (the largest a resolution
  // gives) and `terms` the shares that may land: the bound needs both.
  std::vector<std::uint32_t> terms[2] = {std::vector<std::uint32_t>(size, 0), std::vector<std::uint32_t>(size, 0)};
  for (std::size_t k = 0; k < f.rois.size(); ++k) {
    const auto n = static_cast<std::int64_t>(f.rois[k].batch_index);
    RoiAlignElement* image = &out[static_cast<std::size_t>(n * map.channels * plane)];
    quantized_bins::RoiBins bins;
    try {
      bins = quantized_bins::roi_bins(f.rois[k], f.spatial_scale, 0, f.pooled_height, f.pooled_width, map.height,
                                      map.width, storage);
    } catch (const quantized_bins::Unconstrained&) {
      for (std::int64_t e = 0; e < map.channels * plane; ++e) image[e].unconstrained = true;
      continue;
    }
    for (std::int64_t ph = 0; ph < f.pooled_height; ++ph)
      for (std::int64_t pw = 0; pw < f.pooled_width; ++pw) {
        const auto row = static_cast<std::size_t>(ph), column = static_cast<std::size_t>(pw);
        const Span nominal_rows = bins.rows[0][row].front(), nominal_columns = bins.columns[0][column].front();
        const double nominal_area = area(nominal_rows, nominal_columns);
        for (std::int64_t c_out = 0; c_out < channels_out; ++c_out) {
          const std::int64_t c_in = (c_out * f.pooled_height + ph) * f.pooled_width + pw;
          const double g = problem.grad[((k * static_cast<std::size_t>(channels_out) + static_cast<std::size_t>(c_out)) *
                                             static_cast<std::size_t>(f.pooled_height) + row) *
                                            static_cast<std::size_t>(f.pooled_width) + column];
          RoiAlignElement* channel = image + c_in * plane;
          if (nominal_area > 0)
            for (std::int64_t h = nominal_rows.begin; h < nominal_rows.end; ++h)
              for (std::int64_t w = nominal_columns.begin; w < nominal_columns.end; ++w)
                channel[h * map.width + w].value += g / nominal_area;
          for (int tier = 0; tier < 2; ++tier) {
            const auto& row_options = bins.rows[tier + 1][row];
            const auto& column_options = bins.columns[tier + 1][column];
            std::uint32_t* counted = &terms[tier][static_cast<std::size_t>((n * map.channels + c_in) * plane)];
            auto tier_of = [tier](RoiAlignElement& e) -> RoiAlignTier& { return tier == 0 ? e.strict : e.storage; };
            if (row_options.size() == 1 && column_options.size() == 1 && row_options.front() == nominal_rows &&
                column_options.front() == nominal_columns) {
              // Most bins: the tier resolves the span as fp64 does, the share is one number.
              if (nominal_area <= 0) continue;
              const double share = g / nominal_area;
              for (std::int64_t h = nominal_rows.begin; h < nominal_rows.end; ++h)
                for (std::int64_t w = nominal_columns.begin; w < nominal_columns.end; ++w) {
                  RoiAlignTier& into = tier_of(channel[h * map.width + w]);
                  into.low += share;
                  into.high += share;
                  into.bound += std::fabs(share);
                  ++counted[h * map.width + w];
                }
              continue;
            }
            Span rows{map.height, 0}, columns{map.width, 0};  // every resolution's pixels
            for (const Span& r : row_options) rows = {std::min(rows.begin, r.begin), std::max(rows.end, r.end)};
            for (const Span& c : column_options) columns = {std::min(columns.begin, c.begin), std::max(columns.end, c.end)};
            for (std::int64_t h = rows.begin; h < rows.end; ++h)
              for (std::int64_t w = columns.begin; w < columns.end; ++w) {
                double low = INFINITY, high = -INFINITY, largest = 0;
                bool lands = false;
                for (const Span& r : row_options)
                  for (const Span& c : column_options) {
                    const bool in = inside(r, c, h, w);
                    const double share = in ? g / area(r, c) : 0.0;
                    low = std::min(low, share);
                    high = std::max(high, share);
                    largest = std::max(largest, std::fabs(share));
                    lands = lands || in;
                  }
                RoiAlignTier& into = tier_of(channel[h * map.width + w]);
                into.low += low;
                into.high += high;
                into.bound += largest;
                counted[h * map.width + w] += lands ? 1 : 0;
              }
          }
        }
      }
  }
  const DType formats[2] = {accumulate_type(storage), storage};
  const double fp64 = float_format(DType::fp64).unit_roundoff;
  const double strict_max = float_format(formats[0]).max_finite;
  double per_share[2], floor[2];
  for (int tier = 0; tier < 2; ++tier) {
    const FloatFormat& format = float_format(formats[tier]);
    per_share[tier] = format.unit_roundoff + fp64;
    floor[tier] = 2 * format.min_normal * format.unit_roundoff;
  }
  for (std::size_t e = 0; e < size; ++e) {
    RoiAlignElement& element = out[e];
    const double strict_magnitude = element.strict.bound;
    for (int tier = 0; tier < 2; ++tier) {
      RoiAlignTier& into = tier == 0 ? element.strict : element.storage;
      const auto n = static_cast<double>(terms[tier][e]);
      // n shares, each rounded once (the division) and summed by n - 1 roundings in any
      // order: ((1 + u)^n - 1) sum |share|, plus half the subnormal spacing per rounding.
      // The oracle's own fp64 sum errs likewise. (1 + u)^n - 1 <= x + x^2 for x = n u <= 1
      // (what every realistic n is), which spares most elements a transcendental call.
      const double x = n * per_share[tier];
      const double growth = x <= 1 ? x + x * x : std::expm1(n * std::log1p(per_share[tier]));
      into.bound = growth * into.bound + n * floor[tier];
    }
    // A partial sum is at most the sum of the positive or of the negative shares.
    element.range_ok = (strict_magnitude + std::fabs(element.value)) / 2 <= strict_max;
  }
  return out;
}

std::vector<double> ps_roi_pool_backward_terms(const PsRoiPoolBackwardProblem& problem, std::size_t element) {
  const RoiPoolProblem& f = problem.forward;
  const FeatureMap& map = f.input;
  const std::int64_t group = ps_channel_group(f);
  std::vector<double> shares;
  if (group <= 0 || map.channels % group != 0 || !batch_indices_valid(f)) return shares;
  check_sizes(problem);
  const std::int64_t plane = map.height * map.width, at = static_cast<std::int64_t>(element);
  const std::int64_t n = at / (map.channels * plane), c_in = at / plane % map.channels;
  const std::int64_t h = at % plane / map.width, w = at % map.width;
  const std::int64_t bin = c_in % group, c_out = c_in / group;
  const auto row = static_cast<std::size_t>(bin / f.pooled_width), column = static_cast<std::size_t>(bin % f.pooled_width);
  for (std::size_t k = 0; k < f.rois.size(); ++k) {
    if (static_cast<std::int64_t>(f.rois[k].batch_index) != n) continue;
    try {
      const quantized_bins::RoiBins bins = quantized_bins::roi_bins(f.rois[k], f.spatial_scale, 0, f.pooled_height,
                                                                    f.pooled_width, map.height, map.width, DType::fp64);
      const Span rows = bins.rows[0][row].front(), columns = bins.columns[0][column].front();
      if (inside(rows, columns, h, w))
        shares.push_back(problem.grad[k * static_cast<std::size_t>(map.channels) +
                                      static_cast<std::size_t>(c_out * group + bin)] /
                         area(rows, columns));
    } catch (const quantized_bins::Unconstrained&) {
    }
  }
  return shares;
}

}  // namespace detfuzz::oracles
