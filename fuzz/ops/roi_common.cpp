#include "fuzz/ops/roi_common.h"

#include <fmt/format.h>

#include "fuzz/compare/contract.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "fuzz/gen/hostile.h"
#include "fuzz/ops/minimize.h"

namespace detfuzz::fuzz {
namespace {

// The map without channel/image/row/column `drop` along one axis, values copied.
FeatureMap without_slice(const FeatureMap& map, int axis, std::int64_t drop) {
  FeatureMap out = map;
  std::int64_t* dims[4] = {&out.batch, &out.channels, &out.height, &out.width};
  --*dims[axis];
  out.values.clear();
  for (std::int64_t n = 0; n < map.batch; ++n)
    for (std::int64_t c = 0; c < map.channels; ++c)
      for (std::int64_t y = 0; y < map.height; ++y)
        for (std::int64_t x = 0; x < map.width; ++x) {
          const std::int64_t index[4] = {n, c, y, x};
          if (index[axis] != drop) out.values.push_back(map.at(n, c, y, x));
        }
  return out;
}

constexpr double kMillion = 1 << 20;

}  // namespace

std::vector<MapAndRois> smaller_maps_and_rois(const FeatureMap& map, const std::vector<Roi>& rois, DType dtype) {
  std::vector<MapAndRois> out;
  for (auto range : removal_ranges(rois.size())) out.push_back({map, without(rois, range)});
  if (map.channels > 1) out.push_back({without_slice(map, 1, map.channels - 1), rois});
  for (std::int64_t image = map.batch - 1; image >= 0 && map.batch > 1; --image) {
    const bool used = std::any_of(rois.begin(), rois.end(), [&](const Roi& r) { return r.batch_index == image; });
    if (used) continue;
    std::vector<Roi> renumbered = rois;
    for (Roi& r : renumbered)
      if (r.batch_index > image) r.batch_index -= 1;
    out.push_back({without_slice(map, 0, image), renumbered});
  }
  if (map.height > 1) out.push_back({without_slice(map, 2, map.height - 1), rois});
  if (map.width > 1) out.push_back({without_slice(map, 3, map.width - 1), rois});
  // Plainer values: all at once first (a large map has too many to try one by one).
  FeatureMap truncated = map;
  for (double& v : truncated.values) v = round_to(dtype, std::trunc(v));
  if (truncated.values != map.values) out.push_back({truncated, rois});
  if (map.values.size() <= 64)
    for (std::size_t i = 0; i < map.values.size(); ++i)
      for (double v : simpler_values(map.values[i], dtype)) {
        FeatureMap plainer = map;
        plainer.values[i] = v;
        out.push_back({plainer, rois});
      }
  for (std::size_t i = 0; i < rois.size() && rois.size() <= kMaxElementsToSimplify; ++i)
    for (double Roi::*field : {&Roi::x1, &Roi::y1, &Roi::x2, &Roi::y2})
      for (double v : simpler_values(rois[i].*field, dtype)) {
        std::vector<Roi> plainer = rois;
        plainer[i].*field = v;
        const Roi& r = plainer[i];
        if (r.x1 <= r.x2 && r.y1 <= r.y2) out.push_back({map, plainer});
      }
  return out;
}

std::optional<std::vector<double>> doubled_values(std::vector<double> values, DType dtype) {
  // fp16's products of small bilinear weights with values are subnormal: doubling would
  // not be exact there. Wider types: weights are >= 2^-48 of a value, far above subnormals.
  if (dtype == DType::fp16 || dtype == DType::bf16) return std::nullopt;
  const FloatFormat& format = float_format(dtype);
  for (double& v : values) {
    if (v != 0 && (std::fabs(v) < std::ldexp(format.min_normal, 64) || std::fabs(v) > std::ldexp(format.max_finite, -32)))
      return std::nullopt;
    v *= 2;
  }
  return values;
}

std::optional<FeatureMap> doubled_map(const FeatureMap& map, DType dtype) {
  auto values = doubled_values(map.values, dtype);
  if (!values) return std::nullopt;
  FeatureMap doubled = map;
  doubled.values = std::move(*values);
  return doubled;
}

bool extreme_roi(const Roi& r, double spatial_scale) {
  return !(std::fabs(r.x1 * spatial_scale) < kMillion && std::fabs(r.y1 * spatial_scale) < kMillion &&
           std::fabs(r.x2 * spatial_scale) < kMillion && std::fabs(r.y2 * spatial_scale) < kMillion);
}

RoiTaint roi_taint(const FeatureMap& map, const std::vector<Roi>& rois, double spatial_scale,
                   std::int64_t pooled_height, std::int64_t pooled_width) {
  RoiTaint taint;
  taint.clean_map = map;
  taint.clean_rois = rois;
  std::vector<bool> channel_tainted(static_cast<std::size_t>(map.batch * map.channels), false);
  for (std::int64_t n = 0; n < map.batch; ++n)
    for (std::int64_t c = 0; c < map.channels; ++c)
      for (std::int64_t y = 0; y < map.height; ++y)
        for (std::int64_t x = 0; x < map.width; ++x)
          if (gen::hostile_value(map.at(n, c, y, x))) channel_tainted[static_cast<std::size_t>(n * map.channels + c)] = true;
  for (double& v : taint.clean_map.values)
    if (gen::hostile_value(v)) v = 0;
  for (std::size_t k = 0; k < rois.size(); ++k) {
    const bool bad_index = !gen::valid_batch_index(rois[k], map.batch);
    const Roi& r = rois[k];
    const bool bad_box = gen::hostile_roi(r) || extreme_roi(r, spatial_scale);
    if (bad_index) taint.bad_batch_index.push_back(k);
    if (bad_index || bad_box) taint.clean_rois[k] = {0, 0, 0, 0, 0};
    for (std::int64_t c = 0; c < map.channels; ++c) {
      const bool tainted = bad_index || bad_box ||
                           channel_tainted[static_cast<std::size_t>(static_cast<std::int64_t>(rois[k].batch_index) *
                                                                        map.channels + c)];
      for (std::size_t i = 0; i < static_cast<std::size_t>(pooled_height * pooled_width); ++i)
        taint.tainted.push_back(tainted);
    }
  }
  taint.hostile = !taint.bad_batch_index.empty() ||
                  std::find(taint.tainted.begin(), taint.tainted.end(), true) != taint.tainted.end() ||
                  std::any_of(channel_tainted.begin(), channel_tainted.end(), [](bool t) { return t; });
  return taint;
}

std::optional<compare::Verdict> accepted_bad_batch_index(const std::vector<Roi>& rois, const RoiTaint& taint,
                                                         std::int64_t batch) {
  if (taint.bad_batch_index.empty()) return std::nullopt;
  return accepted_bad_batch_index(rois, taint.bad_batch_index.front(), batch, "read memory that is not its input");
}

compare::Verdict accepted_bad_batch_index(const std::vector<Roi>& rois, std::size_t k, std::int64_t batch,
                                          const std::string& access) {
  return compare::Verdict{FindingKind::mismatch, "batch_index",
                          "RoI " + std::to_string(k) + " names image " + std::to_string(rois[k].batch_index) +
                              " of a batch of " + std::to_string(batch) +
                              ", and the kernel returned without an error (it " + access + ")",
                          {{"roi", k}, {"batch_index", rois[k].batch_index}, {"batch", batch}}};
}

std::optional<compare::Verdict> channel_mapping_verdict(const HostTensor& mapping, const std::vector<std::int64_t>& shape,
                                                        std::int64_t channels, Device device) {
  if (auto breach = compare::check_contract(mapping, {"channel_mapping", shape, "int32", device})) return breach;
  const auto per_roi = static_cast<std::size_t>(channels);
  for (std::size_t i = 0; i < mapping.values.size(); ++i)
    if (mapping.values[i] != static_cast<double>(i % per_roi))
      return compare::Verdict{FindingKind::mismatch, "channel_mapping",
                              fmt::format("channel_mapping{} is {}, the element reads input channel {} (its backward "
                                          "scatters the gradient there)",
                                          compare::shape_string(compare::element_index(i, shape)), mapping.values[i],
                                          i % per_roi),
                              {{"element", i}, {"kernel", mapping.values[i]}, {"oracle", i % per_roi}}};
  return std::nullopt;
}

std::optional<std::size_t> verdict_element(const compare::Verdict& verdict, const std::vector<std::int64_t>& shape) {
  if (!verdict.details.contains("element") || !verdict.details["element"].is_array()) return std::nullopt;
  std::size_t flat = 0;
  const auto index = verdict.details["element"].get<std::vector<std::int64_t>>();
  for (std::size_t axis = 0; axis < index.size() && axis < shape.size(); ++axis)
    flat = flat * static_cast<std::size_t>(shape[axis]) + static_cast<std::size_t>(index[axis]);
  return flat;
}

compare::Verdict accepted_indivisible_channels(std::int64_t channels, std::int64_t group) {
  return {FindingKind::mismatch, "channels",
          fmt::format("the input has {} channels, not a multiple of pooled_height x pooled_width = {}, and the kernel "
                      "returned without an error",
                      channels, group),
          {{"channels", channels}, {"group", group}}};
}

namespace {

// What an explained sum is: the stage's name (as targets declare it), what it sums, and
// whether the element is the sum's mean (RoIAlign's bins) or the sum itself (a gradient).
struct SumStage {
  const char* name;
  const char* terms;
  const char* unit;  // what one term is called in the stage's name
  bool averaged;
  // A running sum counts as overflowing where the kernel's (its rounding so far included) may
  // round to infinity, not only where its true value does.
  bool running_reach;
};

compare::OverflowExplainer sum_explainer(SumStage stage, std::function<std::vector<double>(std::size_t)> terms_of,
                                         const std::vector<compare::ExpectedValue>& expected,
                                         const kernels::Arithmetic& arithmetic, DType dtype) {
  const DType sum_dtype = arithmetic.dtype_of(stage.name, dtype);
  if (sum_dtype == accumulate_type(dtype)) return {};
  return [stage, terms_of = std::move(terms_of), &expected, &arithmetic, sum_dtype](
             std::size_t element) -> std::optional<compare::StageOverflow> {
    const std::vector<double> terms = terms_of(element);
    if (terms.empty()) return std::nullopt;
    const double count = stage.averaged ? static_cast<double>(terms.size()) : 1.0;
    const compare::ExpectedValue& e = expected[element];
    const double sum = e.value * count;
    const double farthest = std::fabs(e.storage.low) > std::fabs(e.storage.high) ? e.storage.low : e.storage.high;
    const double reach = std::copysign(std::fabs(farthest) + e.storage.bound, farthest) * count;
    auto overflows = [sum_dtype](double value) { return std::isinf(round_to(sum_dtype, value)); };
    const std::string name = stage.averaged
                                 ? fmt::format("{} ({} {}) before dividing by their count", stage.name, terms.size(), stage.unit)
                                 : fmt::format("{} ({} {})", stage.name, terms.size(), stage.unit);
    if (overflows(sum)) return compare::StageOverflow{name, sum, sum, sum_dtype, arithmetic.source};
    if (overflows(reach)) return compare::StageOverflow{name, sum, reach, sum_dtype, arithmetic.source};
    const double unit_roundoff = float_format(sum_dtype).unit_roundoff;
    double running = 0, magnitude = 0;
    for (std::size_t taken = 1; taken <= terms.size(); ++taken) {
      running += terms[taken - 1];
      magnitude += std::fabs(terms[taken - 1]);
      const double partial_reach =
          stage.running_reach
              ? std::copysign(std::fabs(running) + static_cast<double>(taken - 1) * unit_roundoff * magnitude, running)
              : running;
      if (overflows(partial_reach))
        return compare::StageOverflow{fmt::format("the running sum of {} (after {} of {}; the final sum is {})",
                                                  stage.terms, taken, terms.size(), sum),
                                      running, partial_reach, sum_dtype, arithmetic.source};
    }
    return std::nullopt;
  };
}

}  // namespace

compare::OverflowExplainer bin_sum_explainer(std::function<std::vector<double>(std::size_t)> samples_of,
                                             const std::vector<compare::ExpectedValue>& expected,
                                             const kernels::Arithmetic& arithmetic, DType dtype) {
  return sum_explainer({"the sum of a bin's samples", "a bin's samples", "samples", true, false}, std::move(samples_of), expected,
                       arithmetic, dtype);
}

compare::OverflowExplainer gradient_sum_explainer(std::function<std::vector<double>(std::size_t)> terms_of,
                                                  const std::vector<compare::ExpectedValue>& expected,
                                                  const kernels::Arithmetic& arithmetic, DType dtype) {
  return sum_explainer({kGradientSum, "an input element's gradient terms", "terms", false, true}, std::move(terms_of), expected,
                       arithmetic, dtype);
}

GradientTaint gradient_taint(const FeatureMap& map, double spatial_scale, const std::vector<Roi>& rois,
                             const std::vector<double>& grad, std::size_t block,
                             const std::function<std::int64_t(std::size_t)>& channel_of) {
  GradientTaint taint;
  taint.clean_rois = rois;
  taint.clean_grad = grad;
  std::vector<char> image_tainted(static_cast<std::size_t>(map.batch), 0);
  std::vector<char> channel_tainted(static_cast<std::size_t>(map.batch * map.channels), 0);
  for (std::size_t k = 0; k < rois.size(); ++k) {
    const Roi& roi = rois[k];
    const bool bad_index = !gen::valid_batch_index(roi, map.batch);
    const bool bad_box = gen::hostile_roi(roi) || extreme_roi(roi, spatial_scale);
    if (bad_index) taint.bad_batch_index.push_back(k);
    double* values = taint.clean_grad.data() + k * block;
    if (bad_index || bad_box) {
      taint.clean_rois[k] = {0, 0, 0, 0, 0};
      std::fill(values, values + block, 0.0);
      if (!bad_index) image_tainted[static_cast<std::size_t>(roi.batch_index)] = 1;
      continue;
    }
    const auto n = static_cast<std::int64_t>(roi.batch_index);
    for (std::size_t i = 0; i < block; ++i) {
      if (!gen::hostile_value(values[i])) continue;
      values[i] = 0;
      channel_tainted[static_cast<std::size_t>(n * map.channels + channel_of(i))] = 1;
    }
  }
  const auto plane = static_cast<std::size_t>(map.height * map.width);
  const bool everything = !taint.bad_batch_index.empty();
  for (std::int64_t n = 0; n < map.batch; ++n)
    for (std::int64_t c = 0; c < map.channels; ++c)
      taint.tainted.insert(taint.tainted.end(), plane,
                           everything || image_tainted[static_cast<std::size_t>(n)] ||
                               channel_tainted[static_cast<std::size_t>(n * map.channels + c)]);
  taint.hostile = std::find(taint.tainted.begin(), taint.tainted.end(), true) != taint.tainted.end();
  return taint;
}

std::vector<std::int64_t> pooled_shape(std::size_t rois, const FeatureMap& map, std::int64_t pooled_height,
                                       std::int64_t pooled_width) {
  return {static_cast<std::int64_t>(rois), map.channels, pooled_height, pooled_width};
}

}  // namespace detfuzz::fuzz
