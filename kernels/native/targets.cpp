// Target "native": detfuzz's own kernels (kernels/native/elements.cuh). On device cpu they
// run as host emulation (what CI fuzzes: no GPU there), on device cuda as the real kernels.
// Torch-free: problems become plain arrays of the storage type, outputs HostTensors.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "kernels/factories.h"
#include "kernels/native/launch.h"
#include "model/error.h"

namespace detfuzz::kernels {
namespace {

using native::acc_of;
using native::Backend;
using native::Scalar;

template <class T>
struct Tag {
  using type = T;
};

// One body for the four storage types: the one dtype switch of the native targets.
template <class Body>
auto with_storage_type(DType dtype, Body&& body) {
  switch (dtype) {
    case DType::fp16: return body(Tag<native::half_t>{});
    case DType::bf16: return body(Tag<native::bfloat16_t>{});
    case DType::fp32: return body(Tag<float>{});
    case DType::fp64: return body(Tag<double>{});
    default: break;
  }
  throw Error(ErrorKind::unsupported, std::string("native kernels take fp16, bf16, fp32 or fp64, not ") +
                                          std::string(dtype_name(dtype)));
}

template <class T>
std::vector<T> stored(const std::vector<double>& values) {
  std::vector<T> out;
  out.reserve(values.size());
  for (double v : values) out.push_back(Scalar<T>::store(static_cast<acc_of<T>>(v)));
  return out;
}

template <class T>
std::vector<T> stored_boxes(const std::vector<Box>& boxes) {
  std::vector<double> flat;
  flat.reserve(boxes.size() * 4);
  for (const Box& b : boxes) flat.insert(flat.end(), {b.x1, b.y1, b.x2, b.y2});
  return stored<T>(flat);
}

template <class T>
std::vector<T> stored_rois(const std::vector<Roi>& rois) {
  std::vector<double> flat;
  flat.reserve(rois.size() * 5);
  for (const Roi& r : rois) flat.insert(flat.end(), {r.batch_index, r.x1, r.y1, r.x2, r.y2});
  return stored<T>(flat);
}

template <class T>
std::vector<double> loaded(const std::vector<T>& values) {
  std::vector<double> out;
  out.reserve(values.size());
  for (const T& v : values) out.push_back(static_cast<double>(Scalar<T>::load(v)));
  return out;
}

template <class A>
std::vector<double> widened(const std::vector<A>& values) {
  return std::vector<double>(values.begin(), values.end());
}

// Which compilation of the host emulation a target calls: as the compiler contracts by
// default, or with FMA contraction (fma_contracted: -mfma -ffp-contract=fast, host only).
#define DETFUZZ_LAUNCHER_POLICY(Policy, arithmetic)                                                       \
  struct Policy {                                                                                         \
    template <class T, class... Args>                                                                     \
    static auto nms_masks(Args&&... args) { return native::arithmetic::nms_masks<T>(args...); }           \
    template <class T, class... Args>                                                                     \
    static auto box_iou(Args&&... args) { return native::arithmetic::box_iou<T>(args...); }               \
    template <class T, class... Args>                                                                     \
    static auto roi_align(Args&&... args) { return native::arithmetic::roi_align<T>(args...); }           \
    template <class T, class... Args>                                                                     \
    static auto roi_pool(Args&&... args) { return native::arithmetic::roi_pool<T>(args...); }             \
    template <class T, class... Args>                                                                     \
    static auto smooth_l1(Args&&... args) { return native::arithmetic::smooth_l1<T>(args...); }           \
  };
DETFUZZ_LAUNCHER_POLICY(AsCompiled, as_compiled)
#if defined(DETFUZZ_HOST_FMA_EMULATION)
DETFUZZ_LAUNCHER_POLICY(FmaContracted, fma_contracted)
#endif
#undef DETFUZZ_LAUNCHER_POLICY

Backend backend_of(Device device) { return device == Device::cuda ? Backend::cuda : Backend::host_emulation; }

template <class Launchers>
struct Variant;

template <>
struct Variant<AsCompiled> {
  static constexpr const char* name = "native";
  static constexpr const char* how = "; cpu: host emulation of the CUDA kernel, cuda: the kernel";
  static Availability availability(Device device) {
    std::string reason;
    if (device == Device::cuda && !native::cuda_available(&reason)) return {false, reason};
    return {};
  }
};

#if defined(DETFUZZ_HOST_FMA_EMULATION)
template <>
struct Variant<FmaContracted> {
  static constexpr const char* name = "native:fma";
  static constexpr const char* how =
      "; its host emulation compiled with FMA contraction (-mfma -ffp-contract=fast), as nvcc --fmad=true "
      "compiles the device code; cpu only";
  static Availability availability(Device device) {
    if (device == Device::cuda) return {false, "native:fma is the host emulation; target native runs the CUDA kernel"};
    if (!__builtin_cpu_supports("fma")) return {false, "this CPU has no FMA instructions"};
    return {};
  }
};
#endif

template <class Launchers, class Problem>
Target<Problem> native_target(const std::string& description,
                              std::function<std::vector<HostTensor>(const Problem&, DType, Device)> run) {
  Target<Problem> target;
  target.name = Variant<Launchers>::name;
  target.description = description + Variant<Launchers>::how;
  target.availability = Variant<Launchers>::availability;
  target.run = std::move(run);
  return target;
}

native::RoiShape roi_shape(const FeatureMap& map, std::size_t rois, std::int64_t pooled_height,
                           std::int64_t pooled_width) {
  return {map.batch, map.channels, map.height, map.width, static_cast<std::int64_t>(rois), pooled_height, pooled_width};
}

// The device cannot throw: absurd RoIs are refused before the launch, with the RoI named.
void check_rois(const std::vector<Roi>& rois, const FeatureMap& map, double spatial_scale, std::int64_t pooled_height,
                std::int64_t pooled_width, std::int64_t sampling_ratio) {
  for (std::size_t k = 0; k < rois.size(); ++k) {
    const Roi& r = rois[k];
    if (!(r.batch_index >= 0 && r.batch_index < static_cast<double>(map.batch)))
      throw Error(ErrorKind::input, "native: RoI " + std::to_string(k) + " has batch index " +
                                        std::to_string(r.batch_index) + ", outside 0.." + std::to_string(map.batch - 1));
    if (sampling_ratio > 0) continue;
    const double grid_h = std::ceil(std::max((r.y2 - r.y1) * spatial_scale, 1.0) / static_cast<double>(pooled_height));
    const double grid_w = std::ceil(std::max((r.x2 - r.x1) * spatial_scale, 1.0) / static_cast<double>(pooled_width));
    if (!(grid_h * grid_w <= 1e6))
      throw Error(ErrorKind::input, "native: RoI " + std::to_string(k) + " needs a sampling grid of " +
                                        std::to_string(grid_h) + " x " + std::to_string(grid_w) + " per bin");
  }
}

HostTensor host_tensor(std::vector<std::int64_t> shape, DType dtype, Device device, std::vector<double> values) {
  return {std::move(shape), std::string(dtype_name(dtype)), device_name(device), std::move(values)};
}

template <class L>
Target<NmsProblem> nms_target(NativeNmsReduction reduction) {
  const std::int64_t first_block_offset = reduction == NativeNmsReduction::from_next_block ? 1 : 0;
  return native_target<L, NmsProblem>(
      "detfuzz's bitmask NMS (64-box column blocks, sequential reduction; sorted on the host)",
      [first_block_offset](const NmsProblem& p, DType dtype, Device device) {
        return with_storage_type(dtype, [&](auto tag) {
          using T = typename decltype(tag)::type;
          const std::int64_t n = static_cast<std::int64_t>(p.boxes.size());
          std::vector<std::int64_t> order(p.boxes.size());
          std::iota(order.begin(), order.end(), 0);
          std::stable_sort(order.begin(), order.end(),
                           [&](std::int64_t a, std::int64_t b) { return p.scores[a] > p.scores[b]; });
          std::vector<Box> sorted;
          for (std::int64_t i : order) sorted.push_back(p.boxes[i]);
          const auto masks = L::template nms_masks<T>(backend_of(device), stored_boxes<T>(sorted), n, p.iou_threshold);
          const std::int64_t column_blocks = (n + native::kNmsBlock - 1) / native::kNmsBlock;
          std::vector<std::uint64_t> removed(static_cast<std::size_t>(column_blocks), 0);
          std::vector<double> keep;
          for (std::int64_t i = 0; i < n; ++i) {
            if (removed[i / native::kNmsBlock] & (std::uint64_t(1) << (i % native::kNmsBlock))) continue;
            keep.push_back(static_cast<double>(order[i]));
            for (std::int64_t block = i / native::kNmsBlock + first_block_offset; block < column_blocks; ++block)
              removed[block] |= masks[i * column_blocks + block];
          }
          const auto kept = static_cast<std::int64_t>(keep.size());
          return std::vector<HostTensor>{host_tensor({kept}, DType::int64, device, std::move(keep))};
        });
      });
}

template <class L>
Target<BoxIouProblem> box_iou_target() {
  return native_target<L, BoxIouProblem>(
      "detfuzz's box IoU (one thread per pair, in the accumulate type)",
      [](const BoxIouProblem& p, DType dtype, Device device) {
        return with_storage_type(dtype, [&](auto tag) {
          using T = typename decltype(tag)::type;
          auto iou = L::template box_iou<T>(backend_of(device), stored_boxes<T>(p.boxes1), stored_boxes<T>(p.boxes2));
          return std::vector<HostTensor>{host_tensor(
              {static_cast<std::int64_t>(p.boxes1.size()), static_cast<std::int64_t>(p.boxes2.size())},
              accumulate_type(dtype), device, widened(iou))};
        });
      });
}

template <class L>
Target<RoiAlignProblem> roi_align_target() {
  return native_target<L, RoiAlignProblem>(
      "detfuzz's RoIAlign forward (one thread per output element, in the accumulate type)",
      [](const RoiAlignProblem& p, DType dtype, Device device) {
        check_rois(p.rois, p.input, p.spatial_scale, p.pooled_height, p.pooled_width, p.sampling_ratio);
        return with_storage_type(dtype, [&](auto tag) {
          using T = typename decltype(tag)::type;
          const auto shape = roi_shape(p.input, p.rois.size(), p.pooled_height, p.pooled_width);
          auto out = L::template roi_align<T>(backend_of(device), shape, stored<T>(p.input.values), stored_rois<T>(p.rois),
                                       p.spatial_scale, p.sampling_ratio, p.aligned);
          return std::vector<HostTensor>{host_tensor({shape.rois, shape.channels, shape.pooled_height, shape.pooled_width},
                                                     dtype, device, loaded(out))};
        });
      });
}

template <class L>
Target<RoiPoolProblem> roi_pool_target() {
  return native_target<L, RoiPoolProblem>(
      "detfuzz's RoIPool forward with argmax (one thread per output element)",
      [](const RoiPoolProblem& p, DType dtype, Device device) {
        check_rois(p.rois, p.input, p.spatial_scale, p.pooled_height, p.pooled_width, 1);
        return with_storage_type(dtype, [&](auto tag) {
          using T = typename decltype(tag)::type;
          const auto shape = roi_shape(p.input, p.rois.size(), p.pooled_height, p.pooled_width);
          std::vector<std::int32_t> argmax;
          auto out = L::template roi_pool<T>(backend_of(device), shape, stored<T>(p.input.values), stored_rois<T>(p.rois),
                                      p.spatial_scale, argmax);
          std::vector<std::int64_t> dims{shape.rois, shape.channels, shape.pooled_height, shape.pooled_width};
          return std::vector<HostTensor>{host_tensor(dims, dtype, device, loaded(out)),
                                         host_tensor(dims, DType::int32, device, widened(argmax))};
        });
      });
}

template <class L>
Target<RegressionLossProblem> regression_loss_target() {
  return native_target<L, RegressionLossProblem>(
      "detfuzz's smooth L1 / L1 loss (one thread per element; none/sum/mean reduced in element order)",
      [](const RegressionLossProblem& p, DType dtype, Device device) {
        return with_storage_type(dtype, [&](auto tag) {
          using T = typename decltype(tag)::type;
          using A = acc_of<T>;
          const bool l1 = p.loss == RegressionLossProblem::Loss::l1;
          auto losses = L::template smooth_l1<T>(backend_of(device), stored<T>(p.input), stored<T>(p.target), p.beta, l1);
          if (p.reduction == RegressionLossProblem::Reduction::none) {
            std::vector<T> out;
            for (A loss : losses) out.push_back(Scalar<T>::store(loss));
            return std::vector<HostTensor>{
                host_tensor({static_cast<std::int64_t>(out.size())}, dtype, device, loaded(out))};
          }
          A sum = 0;
          for (A loss : losses) sum += loss;
          if (p.reduction == RegressionLossProblem::Reduction::mean) sum /= static_cast<A>(losses.size());
          return std::vector<HostTensor>{host_tensor({}, dtype, device, loaded(std::vector<T>{Scalar<T>::store(sum)}))};
        });
      });
}

}  // namespace

Target<NmsProblem> native_nms_target(NativeNmsReduction reduction) { return nms_target<AsCompiled>(reduction); }
Target<BoxIouProblem> native_box_iou_target() { return box_iou_target<AsCompiled>(); }
Target<RoiAlignProblem> native_roi_align_target() { return roi_align_target<AsCompiled>(); }
Target<RoiPoolProblem> native_roi_pool_target() { return roi_pool_target<AsCompiled>(); }
Target<RegressionLossProblem> native_regression_loss_target() { return regression_loss_target<AsCompiled>(); }

#if defined(DETFUZZ_HOST_FMA_EMULATION)
std::vector<Target<NmsProblem>> native_fma_nms_targets() { return {nms_target<FmaContracted>({})}; }
std::vector<Target<BoxIouProblem>> native_fma_box_iou_targets() { return {box_iou_target<FmaContracted>()}; }
std::vector<Target<RoiAlignProblem>> native_fma_roi_align_targets() { return {roi_align_target<FmaContracted>()}; }
std::vector<Target<RoiPoolProblem>> native_fma_roi_pool_targets() { return {roi_pool_target<FmaContracted>()}; }
std::vector<Target<RegressionLossProblem>> native_fma_regression_loss_targets() {
  return {regression_loss_target<FmaContracted>()};
}
#else
std::vector<Target<NmsProblem>> native_fma_nms_targets() { return {}; }
std::vector<Target<BoxIouProblem>> native_fma_box_iou_targets() { return {}; }
std::vector<Target<RoiAlignProblem>> native_fma_roi_align_targets() { return {}; }
std::vector<Target<RoiPoolProblem>> native_fma_roi_pool_targets() { return {}; }
std::vector<Target<RegressionLossProblem>> native_fma_regression_loss_targets() { return {}; }
#endif

}  // namespace detfuzz::kernels
