#include "support/planted_targets.h"

#include <algorithm>
#include <memory>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include "model/error.h"

namespace detfuzz::testing {
namespace {

struct Arithmetic {
  DType compute;
  double r(double v) const { return round_to(compute, v); }
  double sub(double a, double b) const { return r(a - b); }
  double add(double a, double b) const { return r(a + b); }
  double mul(double a, double b) const { return r(a * b); }
  double div(double a, double b) const { return r(a / b); }
};

double iou_in(const Box& a, const Box& b, const Arithmetic& m) {
  double area_a = m.mul(m.sub(a.x2, a.x1), m.sub(a.y2, a.y1));
  double area_b = m.mul(m.sub(b.x2, b.x1), m.sub(b.y2, b.y1));
  double w = std::max(0.0, m.sub(std::min(a.x2, b.x2), std::max(a.x1, b.x1)));
  double h = std::max(0.0, m.sub(std::min(a.y2, b.y2), std::max(a.y1, b.y1)));
  double inter = m.mul(w, h);
  return m.div(inter, m.sub(m.add(area_a, area_b), inter));
}

kernels::Availability cpu_only(Device device) {
  if (device == Device::cuda) return {false, "test targets run on the CPU only"};
  return {};
}

HostTensor tensor(std::vector<std::int64_t> shape, DType dtype, std::vector<double> values) {
  return {std::move(shape), std::string(dtype_name(dtype)), "cpu", std::move(values)};
}

}  // namespace

double emulated_iou(const Box& a, const Box& b, DType compute) {
  Box ra{round_to(compute, a.x1), round_to(compute, a.y1), round_to(compute, a.x2), round_to(compute, a.y2)};
  Box rb{round_to(compute, b.x1), round_to(compute, b.y1), round_to(compute, b.x2), round_to(compute, b.y2)};
  return iou_in(ra, rb, {compute});
}

kernels::Target<NmsProblem> planted_nms(const std::string& name, NmsVariant variant) {
  kernels::Target<NmsProblem> target;
  target.name = name;
  target.description = "test target: greedy NMS in plain C++";
  target.availability = cpu_only;
  auto calls = std::make_shared<int>(0);
  target.run = [variant, calls](const NmsProblem& problem, DType dtype, Device) {
    if (variant.unsupported_low_precision && (dtype == DType::fp16 || dtype == DType::bf16))
      throw Error(ErrorKind::unsupported, "planted: no kernel for low precision");
    if (variant.throws_on_empty && problem.boxes.empty())
      throw std::runtime_error("planted: cannot handle 0 boxes");
    const Arithmetic m{variant.storage_arithmetic ? dtype : accumulate_type(dtype)};
    const auto n = problem.boxes.size();
    std::vector<std::int64_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    if (!variant.assumes_sorted)
      std::sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) {
        if (problem.scores[a] != problem.scores[b]) return problem.scores[a] > problem.scores[b];
        return variant.reverse_ties ? a > b : a < b;
      });
    std::vector<bool> suppressed(n, false);
    std::vector<double> keep;
    for (std::size_t oi = 0; oi < n; ++oi) {
      auto i = order[oi];
      if (suppressed[i]) continue;
      keep.push_back(static_cast<double>(i));
      for (std::size_t oj = oi + 1; oj < n; ++oj) {
        auto j = order[oj];
        if (suppressed[j]) continue;
        double iou = iou_in(problem.boxes[i], problem.boxes[j], m);
        bool suppress = variant.greater_equal ? iou >= problem.iou_threshold : iou > problem.iou_threshold;
        if (suppress) suppressed[j] = true;
      }
    }
    if (variant.corrupt_every_third_call && ++*calls % 3 == 0) keep.push_back(static_cast<double>(n));
    if (variant.wrong_above_count && n > variant.wrong_above_count && !keep.empty()) keep.pop_back();
    std::vector<std::int64_t> shape{static_cast<std::int64_t>(keep.size())};
    return std::vector<HostTensor>{
        tensor(shape, variant.int32_output ? DType::int32 : DType::int64, keep)};
  };
  return target;
}

kernels::Target<BoxIouProblem> planted_box_iou(const std::string& name, BoxIouVariant variant) {
  kernels::Target<BoxIouProblem> target;
  target.name = name;
  target.description = "test target: box IoU in plain C++";
  target.availability = cpu_only;
  auto calls = std::make_shared<int>(0);
  target.run = [variant, calls](const BoxIouProblem& problem, DType dtype, Device) {
    const Arithmetic m{variant.storage_arithmetic ? dtype : accumulate_type(dtype)};
    const auto rows = static_cast<std::int64_t>(problem.boxes1.size());
    const auto cols = static_cast<std::int64_t>(problem.boxes2.size());
    std::vector<double> values;
    for (const Box& a : problem.boxes1)
      for (const Box& b : problem.boxes2) values.push_back(iou_in(a, b, m));
    DType output = variant.fp64_output ? DType::fp64 : accumulate_type(dtype);
    for (double& v : values) v = round_to(output, v);
    if (variant.corrupt_every_third_call && ++*calls % 3 == 0 && !values.empty()) values[0] += 0.25;
    std::vector<std::int64_t> shape = variant.transposed ? std::vector<std::int64_t>{cols, rows}
                                                         : std::vector<std::int64_t>{rows, cols};
    return std::vector<HostTensor>{tensor(shape, output, values)};
  };
  return target;
}

}  // namespace detfuzz::testing
