#include "fuzz/gen/boxes.h"

#include "fuzz/gen/common.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <tuple>
#include <utility>

namespace detfuzz::gen {
namespace {

using Boxes = std::vector<Box>;

// Largest coordinate magnitude of the ordinary scenarios: the dtype's range for fp16,
// 2^24 (where fp32 integers stop being exact) for the others.
double coordinate_cap(DType dtype) {
  return dtype == DType::fp16 ? float_format(DType::fp16).max_finite : std::ldexp(1.0, 24);
}

double clamp_to_range(DType dtype, double value) {
  double max = float_format(dtype).max_finite;
  return std::clamp(value, -max, max);
}

// `n` boxes on a lattice of `steps` positions over [0, scale]: corners at scale * i / steps,
// extents up to `max_extent` * scale. Shrinks toward the origin and toward zero extent.
rc::Gen<Boxes> lattice_boxes(double scale, int steps, double max_extent, int n) {
  const Column position{0, steps + 1};
  return rows(
      n,
      [scale, steps, max_extent](const Row<4>& r) {
        auto [x, y, w, h] = r;
        const double unit = scale / steps;
        double x1 = unit * x, y1 = unit * y;
        return Box{x1, y1, x1 + unit * max_extent * w, y1 + unit * max_extent * h};
      },
      position, position, position, position);
}

rc::Gen<Boxes> uniform(DType dtype, int n) {
  std::vector<double> scales;
  for (double s : {1.0, 8.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65504.0, 1048576.0, 16777216.0})
    if (s <= coordinate_cap(dtype)) scales.push_back(s);
  return rc::gen::mapcat(rc::gen::elementOf(scales),
                         [n](double scale) { return lattice_boxes(scale, 4096, 0.5, n); });
}

rc::Gen<Boxes> grid(int n) {
  return rc::gen::mapcat(rc::gen::element(1.0, 0.5, 0.25), [n](double step) {
    return rows(
        n,
        [step](const Row<4>& r) {
          auto [x, y, w, h] = r;
          return Box{step * x, step * y, step * (x + w), step * (y + h)};
        },
        Column{0, 64}, Column{0, 64}, Column{0, 33}, Column{0, 33});
  });
}

rc::Gen<Boxes> clustered(DType dtype, int n) {
  const double cap = coordinate_cap(dtype);
  return rc::gen::mapcat(
      rc::gen::tuple(in_range(1, 4), rc::gen::element(8.0, 32.0, 100.0, 300.0)),
      [n, cap](const std::tuple<int, double>& setup) {
        auto [centres, size] = setup;
        return rc::gen::mapcat(
            rc::gen::container<std::vector<std::pair<int, int>>>(
                centres, rc::gen::pair(in_range(0, 1024), in_range(0, 1024))),
            [n, cap, size](const std::vector<std::pair<int, int>>& centre_list) {
              const int jitter = static_cast<int>(size / 4);
              const double spread = std::min(cap / 2048, 64.0);
              const Column offset{-jitter, jitter + 1};
              return rows(
                  n,
                  [centre_list, size, spread](const Row<5>& r) {
                    auto [c, dx, dy, dw, dh] = r;
                    double cx = centre_list[c].first * spread, cy = centre_list[c].second * spread;
                    double w = std::max(0.0, size + dw), h = std::max(0.0, size + dh);
                    double x1 = cx + dx - w / 2, y1 = cy + dy - h / 2;
                    return Box{x1, y1, x1 + w, y1 + h};
                  },
                  Column{0, static_cast<int>(centre_list.size())}, offset, offset, offset, offset);
            });
      });
}

// A pair whose IoU is `focus` in exact arithmetic before rounding, then one coordinate of
// the second box moved by a few ulps of the dtype: straddles the threshold by design.
rc::Gen<Boxes> near_threshold(DType dtype, double focus, int n) {
  const int max_extent = static_cast<int>(std::min(coordinate_cap(dtype) / 4, 2048.0));
  auto pair = [dtype, focus](const Row<7>& r) {
        auto [wi, hi, oxi, oyi, construction, nudge, fraction_bits] = r;
        const double unit = std::ldexp(1.0, -fraction_bits);
        double w = wi * unit, h = hi * unit, ox = oxi * unit, oy = oyi * unit;
        Box a{ox, oy, ox + w, oy + h};
        Box b = a;
        double shift = (1 - focus) / (1 + focus);
        if (construction == 0) b = {ox + w * shift, oy, ox + w * shift + w, oy + h};
        if (construction == 1) b = {ox, oy + h * shift, ox + w, oy + h * shift + h};
        if (construction == 2) b = {ox, oy, ox + focus * w, oy + h};
        a = round_box(dtype, a);
        b = round_box(dtype, b);
        double moved = step_ulps(dtype, b.x2, nudge);
        if (moved >= b.x1 && std::isfinite(moved)) b.x2 = moved;
        return Boxes{a, b};
      };
  const Column extent{1, max_extent + 1}, origin{0, max_extent + 1};
  return rc::gen::map(rows(static_cast<std::size_t>(std::max(1, n / 2)), pair, extent, extent, origin, origin,
                           Column{0, 3}, Column{-3, 4}, Column{0, 9}),
                      [](const std::vector<Boxes>& pairs) {
                        Boxes flat;
                        for (const Boxes& p : pairs) flat.insert(flat.end(), p.begin(), p.end());
                        return flat;
                      });
}

// p/q with a small q equal to `focus` as a double, when there is one.
std::optional<std::pair<int, int>> small_fraction(double focus) {
  for (int q = 1; q <= 64; ++q) {
    int p = static_cast<int>(std::lround(focus * q));
    if (static_cast<double>(p) / q == focus) return std::make_pair(p, q);
  }
  return std::nullopt;
}

// Integer pairs whose IoU is exactly p/q: widths m(q+p) shifted by m(q-p), or a box of
// width m*p inside one of width m*q. Exact in every dtype for small integers.
rc::Gen<Boxes> exact_threshold(DType dtype, double focus, int n) {
  auto fraction = small_fraction(focus);
  if (!fraction) return near_threshold(dtype, focus, n);
  auto [p, q] = *fraction;
  const int max_m = std::max(1, 1024 / (p + q));
  auto pair = [p, q](const Row<5>& r) {
        auto [m, h, ox, oy, construction] = r;
        double w = m * (q + p), shift = m * (q - p);
        if (construction == 2) {
          return Boxes{{1.0 * ox, 1.0 * oy, ox + 1.0 * m * q, 1.0 * oy + h},
                       {1.0 * ox, 1.0 * oy, ox + 1.0 * m * p, 1.0 * oy + h}};
        }
        if (construction == 1) {
          return Boxes{{1.0 * oy, 1.0 * ox, 1.0 * oy + h, ox + w},
                       {1.0 * oy, ox + shift, 1.0 * oy + h, ox + shift + w}};
        }
        return Boxes{{1.0 * ox, 1.0 * oy, ox + w, 1.0 * oy + h},
                     {ox + shift, 1.0 * oy, ox + shift + w, 1.0 * oy + h}};
      };
  return rc::gen::map(rows(static_cast<std::size_t>(std::max(1, n / 2)), pair, Column{1, max_m + 1}, Column{1, 33},
                           Column{0, 513}, Column{0, 513}, Column{0, 3}),
                      [](const std::vector<Boxes>& pairs) {
                        Boxes flat;
                        for (const Boxes& pr : pairs) flat.insert(flat.end(), pr.begin(), pr.end());
                        return flat;
                      });
}

rc::Gen<Boxes> duplicates(DType dtype, int n) {
  return rc::gen::mapcat(uniform(dtype, std::min(n, 3) + 1), [n](const Boxes& base) {
    return rows(n, [base](const Row<1>& pick) { return base[pick[0]]; }, Column{0, static_cast<int>(base.size())});
  });
}

rc::Gen<Boxes> degenerate(int n) {
  return rows(
      n,
      [](const Row<5>& r) {
        auto [x, y, w, h, shape] = r;
        if (shape == 0) w = 0;                 // zero width
        if (shape == 1) h = 0;                 // zero height
        if (shape == 2) w = h = 0;             // a point
        return Box{1.0 * x, 1.0 * y, 1.0 * x + w, 1.0 * y + h};
      },
      Column{0, 256}, Column{0, 256}, Column{0, 64}, Column{0, 64}, Column{0, 3});
}

rc::Gen<Boxes> far_from_origin(DType dtype, int n) {
  const int max_exponent = dtype == DType::fp16 ? 14 : 30;
  return rc::gen::mapcat(
      rc::gen::tuple(in_range(8, max_exponent + 1), rc::gen::element(1.0, -1.0)),
      [n](const std::tuple<int, double>& setup) {
        auto [exponent, sign] = setup;
        const double offset = sign * std::ldexp(1.0, exponent);
        return rows(
            n,
            [offset](const Row<4>& r) {
              auto [x, y, w, h] = r;
              double x1 = offset + x / 4.0, y1 = offset + y / 4.0;
              return Box{x1, y1, x1 + w / 4.0, y1 + h / 4.0};
            },
            Column{0, 256}, Column{0, 256}, Column{0, 64}, Column{0, 64});
      });
}

rc::Gen<Boxes> spanning(DType dtype, int n) {
  const double cap = coordinate_cap(dtype);
  const Column eighths{1, 9};
  return rows(
      n,
      [cap](const Row<4>& r) {
        auto [a, b, c, d] = r;
        return Box{-cap * a / 8, -cap * c / 8, cap * b / 8, cap * d / 8};
      },
      eighths, eighths, eighths, eighths);
}

rc::Gen<Boxes> extreme(int n) {
  return rc::gen::mapcat(in_range(20, 71), [n](int exponent) {
    return lattice_boxes(std::ldexp(1.0, exponent), 1024, 1.0, n);
  });
}

rc::Gen<Boxes> scenario_part(DType dtype, double focus, int n) {
  // Each scenario's generator is made only when it is picked.
  std::vector<std::size_t> weights{3, 2, 3, 3, 2, 1, 1, 1, 1};
  if (dtype != DType::fp16) weights.push_back(1);  // extreme
  return weighted_choice(std::move(weights), [dtype, focus, n](std::size_t scenario) -> rc::Gen<Boxes> {
    switch (scenario) {
      case 0: return uniform(dtype, n);
      case 1: return grid(n);
      case 2: return clustered(dtype, n);
      case 3: return near_threshold(dtype, focus, n);
      case 4: return exact_threshold(dtype, focus, n);
      case 5: return duplicates(dtype, n);
      case 6: return degenerate(n);
      case 7: return far_from_origin(dtype, n);
      case 8: return spanning(dtype, n);
      default: return extreme(n);
    }
  });
}

}  // namespace

rc::Gen<int> count(int max_count) {
  return rc::gen::withSize([max_count](int size) {
    const int cap = std::max(std::min(max_count, 2), max_count * std::clamp(size, 0, 100) / 100);
    std::vector<std::size_t> weights{3, 4, 3};
    if (size >= 50) weights.push_back(1);
    return weighted_choice(std::move(weights), [cap, max_count](std::size_t choice) {
      switch (choice) {
        case 0: return in_range(0, std::min(3, cap + 1));
        case 1: return in_range(0, std::min(17, cap + 1));
        case 2: return in_range(0, cap + 1);
        default: return rc::gen::just(max_count);
      }
    });
  });
}

std::string scenario_name(Scenario scenario) {
  switch (scenario) {
    case Scenario::uniform: return "uniform";
    case Scenario::grid: return "grid";
    case Scenario::clustered: return "clustered";
    case Scenario::near_threshold: return "near_threshold";
    case Scenario::exact_threshold: return "exact_threshold";
    case Scenario::duplicates: return "duplicates";
    case Scenario::degenerate: return "degenerate";
    case Scenario::far_from_origin: return "far_from_origin";
    case Scenario::spanning: return "spanning";
    case Scenario::extreme: return "extreme";
  }
  return "unknown";
}

Box round_box(DType dtype, const Box& box) {
  // Rounding is monotone, so x1 <= x2 survives it.
  return {round_to(dtype, clamp_to_range(dtype, box.x1)), round_to(dtype, clamp_to_range(dtype, box.y1)),
          round_to(dtype, clamp_to_range(dtype, box.x2)), round_to(dtype, clamp_to_range(dtype, box.y2))};
}

BoxGenOptions within_box_contract(BoxGenOptions options) {
  options.nonnegative = !options.hostile;
  return options;
}

namespace {

// A box moved into the first quadrant exactly: an extent wholly below 0 is mirrored (negation
// is exact, and a mirrored pair keeps its IoU), one across 0 is cut at 0.
Box into_first_quadrant(const Box& box) {
  auto axis = [](double lo, double hi) {
    if (hi < 0) return std::pair{-hi, -lo};
    return std::pair{std::max(lo, 0.0), hi};
  };
  auto [x1, x2] = axis(box.x1, box.x2);
  auto [y1, y2] = axis(box.y1, box.y2);
  return {x1, y1, x2, y2};
}

}  // namespace

rc::Gen<std::vector<Box>> box_set(const BoxGenOptions& options, double focus) {
  const DType dtype = options.dtype;
  const int max_boxes = std::max(0, options.max_boxes);
  auto part = rc::gen::mapcat(count(max_boxes), [dtype, focus](int n) {
    return scenario_part(dtype, focus, n);
  });
  auto parts = rc::gen::mapcat(in_range(1, 4), [part](int how_many) {
    return rc::gen::container<std::vector<Boxes>>(how_many, part);
  });
  const bool nonnegative = options.nonnegative;
  auto assembled = rc::gen::map(parts, [dtype, max_boxes, nonnegative](const std::vector<Boxes>& pieces) {
    Boxes boxes;
    for (const Boxes& piece : pieces)
      for (const Box& box : piece) {
        if (static_cast<int>(boxes.size()) == max_boxes) return boxes;
        boxes.push_back(round_box(dtype, nonnegative ? into_first_quadrant(box) : box));
      }
    return boxes;
  });
  return rc::gen::weightedOneOf<Boxes>({{1, rc::gen::just(Boxes{})}, {19, assembled}});
}

rc::Gen<std::vector<double>> scores(DType dtype, std::size_t count) {
  auto rounded = [dtype](std::vector<double> values) {
    for (double& v : values) v = round_to(dtype, v);
    return values;
  };
  auto distinct = rc::gen::map(rows(count, [](const Row<1>& k) { return std::ldexp(k[0], -20); }, Column{0, 1 << 20}),
                               rounded);
  auto levels = rc::gen::map(rows(
                                 count,
                                 [](const Row<1>& k) {
                                   static constexpr double kLevels[] = {0.5, 0.9, 0.75, 0.25};
                                   return kLevels[k[0]];
                                 },
                                 Column{0, 4}),
                             rounded);
  auto sorted = rc::gen::map(distinct, [](std::vector<double> values) {
    std::sort(values.begin(), values.end(), std::greater<>());
    return values;
  });
  return rc::gen::weightedOneOf<std::vector<double>>({
      {6, distinct},
      {2, levels},
      {1, rc::gen::just(std::vector<double>(count, 0.5))},
      {1, sorted},
  });
}

rc::Gen<double> iou_threshold() {
  return rc::gen::weightedOneOf<double>({
      {4, rc::gen::element(0.5, 0.25, 0.75, 0.375, 0.625)},
      {4, rc::gen::element(0.7, 0.3, 0.45, 0.6, 0.65, 0.9, 0.1)},
      {2, rc::gen::map(in_range(0, 1001), [](int k) { return k / 1000.0; })},
      {1, rc::gen::element(0.0, 1.0)},
  });
}

rc::Gen<NmsProblem> nms_problem(const BoxGenOptions& requested) {
  const BoxGenOptions options = within_box_contract(requested);
  return rc::gen::mapcat(iou_threshold(), [options](double threshold) {
    return rc::gen::mapcat(box_set(options, threshold), [options, threshold](const std::vector<Box>& boxes) {
      return rc::gen::map(scores(options.dtype, boxes.size()),
                          [boxes, threshold](const std::vector<double>& score_values) {
                            return NmsProblem{boxes, score_values, threshold};
                          });
    });
  });
}

rc::Gen<BoxAreaProblem> box_area_problem(const BoxGenOptions& options) {
  return rc::gen::map(box_set(within_box_contract(options), 0.5), [](std::vector<Box> boxes) { return BoxAreaProblem{std::move(boxes)}; });
}

rc::Gen<BoxIouProblem> box_iou_problem(const BoxGenOptions& requested) {
  // Each side at most 4,096 boxes: a 4,096 x 4,096 matrix is the IoUs a case may hold.
  BoxGenOptions options = within_box_contract(requested);
  options.max_boxes = std::min(options.max_boxes, 4096);
  auto focus = rc::gen::map(in_range(1, 100), [](int k) { return k / 100.0; });
  return rc::gen::mapcat(focus, [options](double f) {
    auto independent = rc::gen::map(rc::gen::pair(box_set(options, f), box_set(options, f)),
                                    [](const std::pair<std::vector<Box>, std::vector<Box>>& sets) {
                                      return BoxIouProblem{sets.first, sets.second};
                                    });
    auto with_itself = rc::gen::map(box_set(options, f), [](const std::vector<Box>& set) {
      return BoxIouProblem{set, set};
    });
    return rc::gen::weightedOneOf<BoxIouProblem>({{4, independent}, {1, with_itself}});
  });
}

// Box counts at and around every strategy switch the batched NMS targets have: torchvision's
// boxes.numel() > 4,000 on CPU (1,000 boxes) and > 20,000 on CUDA (5,000), mmcv's
// split_thr of 10,000 boxes. They go past --max-boxes on purpose: the switch is the point.
const std::vector<int>& batched_nms_switch_counts() {
  static const std::vector<int> counts = {999, 1000, 1001, 1002, 4999, 5000, 5001, 9998, 9999, 10000, 10001};
  return counts;
}

namespace {

// `n` boxes, overlapping enough that NMS has work in every class.
rc::Gen<Boxes> switch_count_boxes(DType dtype, int n) {
  return rc::gen::mapcat(rc::gen::element(64.0, 256.0, 1024.0), [dtype, n](double scale) {
    return rc::gen::map(lattice_boxes(scale, 256, 0.25, n), [dtype](Boxes boxes) {
      for (Box& box : boxes) box = round_box(dtype, box);
      return boxes;
    });
  });
}

// Class ids for `n` boxes: one class, a few, or up to 1,000 (offsets far past fp16's range,
// ids past bf16's exact integers).
rc::Gen<std::vector<std::int64_t>> class_ids(std::size_t n) {
  return rc::gen::mapcat(rc::gen::weightedOneOf<int>({{2, rc::gen::just(1)}, {4, in_range(2, 6)},
                                                      {2, in_range(6, 100)}, {2, in_range(100, 1001)}}),
                         [n](int classes) {
                           return rows(
                               n, [](const Row<1>& id) { return static_cast<std::int64_t>(id[0]); }, Column{0, classes});
                         });
}

// Moves every box by -shift (exactly, in the dtype's spacing at that magnitude): negative
// coordinates, which the coordinate trick's max + 1 offset does not expect.
Boxes shifted_negative(DType dtype, Boxes boxes, int exponent) {
  const double shift = std::ldexp(1.0, exponent);
  for (Box& b : boxes) b = round_box(dtype, {b.x1 - shift, b.y1 - shift, b.x2 - shift, b.y2 - shift});
  return boxes;
}

}  // namespace

rc::Gen<BatchedNmsProblem> batched_nms_problem(const BoxGenOptions& requested) {
  const BoxGenOptions options = within_box_contract(requested);
  const DType dtype = options.dtype;
  auto ordinary = rc::gen::mapcat(iou_threshold(), [options](double threshold) {
    return rc::gen::map(box_set(options, threshold), [threshold](Boxes boxes) { return std::make_pair(boxes, threshold); });
  });
  auto at_switch = rc::gen::mapcat(rc::gen::pair(rc::gen::elementOf(batched_nms_switch_counts()), iou_threshold()),
                                   [dtype](const std::pair<int, double>& setup) {
                                     return rc::gen::map(switch_count_boxes(dtype, setup.first),
                                                         [threshold = setup.second](Boxes boxes) {
                                                           return std::make_pair(boxes, threshold);
                                                         });
                                   });
  auto boxes_and_threshold = rc::gen::weightedOneOf<std::pair<Boxes, double>>({{10, ordinary}, {1, at_switch}});
  // Negative coordinates are outside torchvision's documented domain: only when hostile.
  const bool shift_negative = !options.nonnegative;
  auto placed = rc::gen::mapcat(boxes_and_threshold, [dtype, shift_negative](const std::pair<Boxes, double>& drawn) {
    return rc::gen::map(rc::gen::weightedOneOf<int>({{7, rc::gen::just(0)}, {1, in_range(0, 12)}}),
                        [dtype, drawn, shift_negative](int negative_exponent) {
                          auto result = drawn;
                          if (shift_negative && negative_exponent > 0)
                            result.first = shifted_negative(dtype, drawn.first, negative_exponent);
                          return result;
                        });
  });
  std::vector<std::pair<std::size_t, rc::Gen<std::optional<DType>>>> score_dtypes = {
      {7, rc::gen::just(std::optional<DType>())}};
  if (dtype == DType::fp32) {
    score_dtypes.push_back({1, rc::gen::just(std::optional<DType>(DType::fp16))});
    score_dtypes.push_back({1, rc::gen::just(std::optional<DType>(DType::bf16))});
  } else if (dtype != DType::fp64) {
    score_dtypes.push_back({1, rc::gen::just(std::optional<DType>(DType::fp32))});
  }
  return rc::gen::mapcat(placed, [dtype, score_dtypes](const std::pair<Boxes, double>& drawn) {
    const std::size_t n = drawn.first.size();
    return rc::gen::mapcat(weighted(score_dtypes), [dtype, drawn, n](std::optional<DType> score_dtype) {
      return rc::gen::map(
          rc::gen::tuple(scores(score_dtype.value_or(dtype), n), class_ids(n),
                         rc::gen::weightedOneOf<bool>({{9, rc::gen::just(false)}, {1, rc::gen::just(true)}}),
                         rc::gen::weightedOneOf<std::int64_t>(
                             {{7, rc::gen::just<std::int64_t>(-1)},
                              {1, in_range<std::int64_t>(1, static_cast<std::int64_t>(n) + 2)}})),
          [drawn, score_dtype](const std::tuple<std::vector<double>, std::vector<std::int64_t>, bool, std::int64_t>& t) {
            const auto& [score_values, classes, agnostic, max_num] = t;
            return BatchedNmsProblem{drawn.first, score_values, classes, drawn.second, score_dtype, agnostic, max_num};
          });
    });
  });
}

namespace {

// One delta component in units of its weight: plain dyadic steps, arbitrary values, and
// dw/dh at, around and far past torchvision's clip log(1000/16). Five columns of a row: the
// kind (weights 4 / 2, and 2 / 1 for the size terms), then each kind's value: sixty-fourths,
// thousandths, ulps around the clip, far past it.
const std::array<Column, 5> kDeltaColumns{Column{0, 9}, Column{-256, 257, 0}, Column{-5000, 5001, 0},
                                          Column{-4, 5, 0}, Column{0, 6}};

// A box's four deltas side by side: kDeltaColumns once per component.
template <std::size_t... I>
std::array<Column, sizeof...(I)> delta_row_columns(std::index_sequence<I...>) {
  return {kDeltaColumns[I % kDeltaColumns.size()]...};
}

double delta_component(DType dtype, double weight, bool size_term, int kind, int sixty_fourths, int thousandths,
                       int clip_ulps, int far) {
  static constexpr double kFar[] = {5.0, 8.0, 10.0, 20.0, 50.0, -10.0};
  if (!size_term) kind = kind * 6 / 9;  // only the first two kinds, 4 : 2
  double units = kind < 4 ? sixty_fourths / 64.0 : thousandths / 1000.0;
  if (kind >= 6 && kind < 8) {
    const double clip = std::log(1000.0 / 16);
    units = step_ulps(dtype, round_to(dtype, clip * weight), clip_ulps) / weight;
  }
  if (kind == 8) units = kFar[far];
  return round_to(dtype, units * weight);
}

// A reference box for a proposal: shifted by eighths of its size and scaled, or a
// zero-width / zero-height box (log 0), rounded to the dtype.
Box reference_for(DType dtype, const Box& proposal, int eighths_x, int eighths_y, int scale_index) {
  static constexpr double kScales[] = {1.0, 0.5, 2.0, 1.25, 0.0, 1e-3};
  const double scale = kScales[scale_index];
  const double w = proposal.x2 - proposal.x1, h = proposal.y2 - proposal.y1;
  const double x1 = proposal.x1 + eighths_x * w / 8, y1 = proposal.y1 + eighths_y * h / 8;
  return round_box(dtype, {x1, y1, x1 + w * scale, y1 + h * scale});
}

}  // namespace

rc::Gen<BoxCoderProblem> box_coder_problem(const BoxGenOptions& options) {
  const DType dtype = options.dtype;
  using Weights = std::array<double, 4>;
  auto setup = rc::gen::tuple(rc::gen::element(BoxCoderProblem::Mode::decode, BoxCoderProblem::Mode::encode),
                              rc::gen::element(Weights{1, 1, 1, 1}, Weights{10, 10, 5, 5}), box_set(options, 0.5));
  return rc::gen::mapcat(setup, [dtype](const std::tuple<BoxCoderProblem::Mode, Weights, std::vector<Box>>& drawn) {
    const auto& [mode, weights, boxes] = drawn;
    BoxCoderProblem base;
    base.mode = mode;
    base.boxes = boxes;
    base.weights = weights;
    if (mode == BoxCoderProblem::Mode::encode) {
      const Column eighths{-8, 9, 0};
      return rc::gen::map(rows(
                              boxes.size(), [](const Row<3>& r) { return r; }, eighths, eighths, Column{0, 6}),
                          [base, dtype](const std::vector<Row<3>>& drawn) {
                            BoxCoderProblem p = base;
                            for (std::size_t i = 0; i < drawn.size(); ++i)
                              p.references.push_back(reference_for(dtype, base.boxes[i], drawn[i][0], drawn[i][1], drawn[i][2]));
                            return p;
                          });
    }
    const auto columns = delta_row_columns(std::make_index_sequence<4 * kDeltaColumns.size()>());
    auto delta = [dtype, weights = weights](const Row<20>& r) {
      std::array<double, 4> d{};
      for (std::size_t c = 0; c < 4; ++c)
        d[c] = delta_component(dtype, weights[c], c >= 2, r[5 * c], r[5 * c + 1], r[5 * c + 2], r[5 * c + 3], r[5 * c + 4]);
      return d;
    };
    return rc::gen::map(rows(boxes.size(), delta, columns),
                        [base](std::vector<std::array<double, 4>> deltas) {
                          BoxCoderProblem p = base;
                          p.deltas = std::move(deltas);
                          return p;
                        });
  });
}

rc::Gen<GiouLossProblem> giou_loss_problem(const BoxGenOptions& requested) {
  const BoxGenOptions options = within_box_contract(requested);
  auto focus = rc::gen::map(in_range(1, 100), [](int k) { return k / 100.0; });
  return rc::gen::mapcat(focus, [options](double f) {
    return rc::gen::map(rc::gen::tuple(box_set(options, f), box_set(options, f),
                                       rc::gen::element(RegressionLossProblem::Reduction::none,
                                                        RegressionLossProblem::Reduction::sum,
                                                        RegressionLossProblem::Reduction::mean)),
                        [](const std::tuple<std::vector<Box>, std::vector<Box>, RegressionLossProblem::Reduction>& t) {
                          auto [first, second, reduction] = t;
                          // Pairs: the second set cycled (or the first against itself).
                          if (second.empty()) second = first;
                          GiouLossProblem p;
                          p.boxes1 = first;
                          for (std::size_t i = 0; i < first.size(); ++i) p.boxes2.push_back(second[i % second.size()]);
                          p.reduction = reduction;
                          return p;
                        });
  });
}

}  // namespace detfuzz::gen
