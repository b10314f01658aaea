// Mutant NMS targets: a correct greedy NMS (torchvision semantics, fp32/fp64 arithmetic in
// the box dtype, like torchvision's CPU kernel) with ONE deviation each. They exist to
// measure the fuzzer (does it catch the bug class, does it survive it), never to be fuzzed
// by default: `--targets` must name them.
//
//   mutant:nms_crash_7x3  raises SIGSEGV when a box is exactly 7 wide and 3 high, like a
//                         kernel that indexes past a buffer for one box shape (the
//                         torchvision RoIAlign segfaults on odd inputs are the real class)
//   mutant:nms_hang_5x9   loops forever when a box is exactly 5 wide and 9 high, like a
//                         kernel whose loop bound never converges on one input
#include <chrono>
#include <csignal>
#include <numeric>
#include <thread>

#include "kernels/target.h"
#include "model/error.h"

namespace detfuzz::kernels {
namespace {

bool has_box(const NmsProblem& problem, double width, double height) {
  for (const Box& b : problem.boxes)
    if (b.x2 - b.x1 == width && b.y2 - b.y1 == height) return true;
  return false;
}

std::vector<HostTensor> greedy_nms(const NmsProblem& p, DType dtype) {
  if (dtype != DType::fp32 && dtype != DType::fp64)
    throw Error(ErrorKind::unsupported, "mutant NMS targets implement fp32 and fp64 only");
  auto r = [dtype](double v) { return round_to(dtype, v); };
  std::vector<std::int64_t> order(p.boxes.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return p.scores[a] > p.scores[b]; });
  std::vector<bool> suppressed(p.boxes.size(), false);
  std::vector<double> keep;
  for (std::size_t oi = 0; oi < order.size(); ++oi) {
    const auto i = order[oi];
    if (suppressed[i]) continue;
    keep.push_back(static_cast<double>(i));
    const Box& a = p.boxes[i];
    for (std::size_t oj = oi + 1; oj < order.size(); ++oj) {
      const auto j = order[oj];
      const Box& b = p.boxes[j];
      const double area_a = r(r(a.x2 - a.x1) * r(a.y2 - a.y1)), area_b = r(r(b.x2 - b.x1) * r(b.y2 - b.y1));
      const double w = std::max(0.0, r(std::min(a.x2, b.x2) - std::max(a.x1, b.x1)));
      const double h = std::max(0.0, r(std::min(a.y2, b.y2) - std::max(a.y1, b.y1)));
      const double inter = r(w * h);
      if (r(inter / r(r(area_a + area_b) - inter)) > p.iou_threshold) suppressed[j] = true;
    }
  }
  return {HostTensor{{static_cast<std::int64_t>(keep.size())}, "int64", "cpu", keep}};
}

Target<NmsProblem> mutant(const std::string& name, const std::string& description,
                          std::function<void(const NmsProblem&)> deviation) {
  Target<NmsProblem> target;
  target.name = "mutant:" + name;
  target.description = description;
  target.availability = [](Device device) -> Availability {
    if (device == Device::cuda) return {false, "mutants run on the CPU only"};
    return {};
  };
  target.run = [deviation](const NmsProblem& problem, DType dtype, Device) {
    deviation(problem);
    return greedy_nms(problem, dtype);
  };
  return target;
}

}  // namespace

std::vector<Target<NmsProblem>> nms_mutants() {
  return {
      mutant("nms_crash_7x3", "greedy NMS that raises SIGSEGV on a box exactly 7 wide and 3 high",
             [](const NmsProblem& p) {
               if (has_box(p, 7, 3)) std::raise(SIGSEGV);
             }),
      mutant("nms_hang_5x9", "greedy NMS that never returns on a box exactly 5 wide and 9 high",
             [](const NmsProblem& p) {
               while (has_box(p, 5, 9)) std::this_thread::sleep_for(std::chrono::seconds(1));
             }),
  };
}

}  // namespace detfuzz::kernels
