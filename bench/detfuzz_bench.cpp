// Throughput of the oracles and comparators next to the torchvision CPU kernels they check,
// on the same inputs (issue: "oracles that keep up"), and of case generation. Boxes: integer coordinates in a
// 1024 x 1024 image, sides 8..135, distinct scores (exact in fp32), fixed seeds.
// Run: ./build/bench/detfuzz_bench [--benchmark_filter=Nms]
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <algorithm>
#include <random>
#include <stdexcept>

#include "fuzz/compare/batched_nms_compare.h"
#include "fuzz/compare/nms_replay.h"
#include "fuzz/gen/boxes.h"
#include "fuzz/gen/common.h"
#include "fuzz/gen/losses.h"
#include "fuzz/gen/rois.h"
#include "kernels/native/launch.h"
#include "kernels/target.h"
#include "kernels/tensor_convert.h"
#include "kernels/torchvision/dispatch.h"
#include "oracles/batched_nms.h"
#include "oracles/box_iou.h"
#include "oracles/deform_conv2d.h"
#include "oracles/giou.h"
#include "oracles/nms.h"
#include "oracles/ps_roi_pool.h"
#include "oracles/ps_roi_pool_backward.h"
#include "oracles/roi_align.h"
#include "oracles/roi_align_backward.h"
#include "oracles/roi_pool.h"
#include "oracles/roi_pool_backward.h"

namespace detfuzz {
namespace {

std::vector<Box> random_boxes(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> corner(0, 1023), side(8, 135);
  std::vector<Box> boxes;
  for (std::size_t i = 0; i < n; ++i) {
    const double x = corner(rng), y = corner(rng);
    boxes.push_back({x, y, x + side(rng), y + side(rng)});
  }
  return boxes;
}

std::vector<double> distinct_scores(std::size_t n, std::uint64_t seed) {
  std::vector<double> scores(n);
  for (std::size_t i = 0; i < n; ++i) scores[i] = static_cast<double>(i) / static_cast<double>(n + 1);
  std::shuffle(scores.begin(), scores.end(), std::mt19937_64(seed));
  return scores;
}

NmsProblem nms_problem(std::size_t n) { return {random_boxes(n, 1), distinct_scores(n, 2), 0.5}; }

BatchedNmsProblem batched_problem(std::size_t n) {
  BatchedNmsProblem p;
  p.boxes = random_boxes(n, 3);
  p.scores = distinct_scores(n, 4);
  for (std::size_t i = 0; i < n; ++i) p.classes.push_back(static_cast<std::int64_t>(i % 10));
  p.iou_threshold = 0.5;
  return p;
}

template <class Problem>
const kernels::Target<Problem>& target_named(const std::vector<kernels::Target<Problem>>& targets,
                                             const std::string& name) {
  for (const auto& t : targets)
    if (t.name == name) return t;
  throw std::runtime_error("no target " + name);
}

const kernels::KernelConfig kConfig{};

void max_rss(benchmark::State& state) {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  state.counters["max_rss_MiB"] = static_cast<double>(usage.ru_maxrss) / 1024.0;
}

void BM_NmsOracle(benchmark::State& state) {
  const NmsProblem p = nms_problem(static_cast<std::size_t>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(oracles::nms(p));
}

// The naive O(n^2) reference the sweep is tested against.
void BM_NmsOracleQuadratic(benchmark::State& state) {
  const NmsProblem p = nms_problem(static_cast<std::size_t>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(oracles::nms_quadratic(p));
}

// A target's whole call (torchvision's, or native: detfuzz's bitmask NMS in host emulation),
// fp32, boxes converted and sorted as a campaign's case does.
void BM_NmsTarget(benchmark::State& state, const char* name) {
  static const auto targets = kernels::nms_targets(kConfig);
  const auto& target = target_named(targets, name);
  const NmsProblem p = nms_problem(static_cast<std::size_t>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(target.run(p, DType::fp32, Device::cpu));
}

// The whole NMS verdict: the oracle's replay of torchvision's kept set, with tolerances.
void BM_NmsJudge(benchmark::State& state) {
  static const auto targets = kernels::nms_targets(kConfig);
  const NmsProblem p = nms_problem(static_cast<std::size_t>(state.range(0)));
  const HostTensor keep = target_named(targets, "torchvision").run(p, DType::fp32, Device::cpu).front();
  for (auto _ : state) benchmark::DoNotOptimize(compare::judge_nms_output(p, keep, DType::fp32, Device::cpu));
}

// Pairwise IoU and GIoU: n x n pairs of the NMS benchmark's boxes, the oracle next to the
// ATen port of torchvision's ops.box_iou / generalized_box_iou it checks (fp32).
BoxIouProblem pairwise_problem(std::size_t n) { return {random_boxes(n, 5), random_boxes(n, 6)}; }

void BM_BoxIouOracle(benchmark::State& state) {
  const BoxIouProblem p = pairwise_problem(static_cast<std::size_t>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(oracles::box_iou(p.boxes1, p.boxes2));
}

void BM_GeneralizedBoxIouOracle(benchmark::State& state) {
  const BoxIouProblem p = pairwise_problem(static_cast<std::size_t>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(oracles::generalized_box_iou(p));
}

void BM_PairwiseTarget(benchmark::State& state, std::vector<kernels::Target<BoxIouProblem>> (*targets_of)(const kernels::KernelConfig&),
                       const char* name) {
  const auto targets = targets_of(kConfig);
  const auto& target = target_named(targets, name);
  const BoxIouProblem p = pairwise_problem(static_cast<std::size_t>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(target.run(p, DType::fp32, Device::cpu));
}

void BM_BatchedNmsOracle(benchmark::State& state) {
  const BatchedNmsProblem p = batched_problem(static_cast<std::size_t>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(oracles::batched_nms(p));
  max_rss(state);
}

void BM_TorchvisionBatchedNms(benchmark::State& state) {
  static const auto targets = kernels::batched_nms_targets(kConfig);
  const auto& torchvision = target_named(targets, "torchvision");
  const BatchedNmsProblem p = batched_problem(static_cast<std::size_t>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(torchvision.run(p, DType::fp32, Device::cpu));
  max_rss(state);
}

void BM_BatchedNmsJudge(benchmark::State& state) {
  static const auto targets = kernels::batched_nms_targets(kConfig);
  const BatchedNmsProblem p = batched_problem(static_cast<std::size_t>(state.range(0)));
  const auto outputs = target_named(targets, "torchvision").run(p, DType::fp32, Device::cpu);
  for (auto _ : state)
    benchmark::DoNotOptimize(compare::judge_batched_nms_output(p, outputs, DType::fp32, Device::cpu));
  max_rss(state);
}

// 256 channels on a 200 x 256 map (a stride-4 FPN level of an 800 x 1024 image), 7 x 7
// bins, 2 x 2 samples, RoIs of 32..512 pixels.
RoiAlignProblem roi_align_problem(std::size_t rois) {
  RoiAlignProblem p;
  p.input = {1, 256, 200, 256, {}};
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> value(-4, 4);
  p.input.values.resize(256 * 200 * 256);
  for (double& v : p.input.values) v = static_cast<double>(static_cast<float>(value(rng)));
  std::uniform_int_distribution<int> corner(0, 500), side(32, 512);
  for (std::size_t i = 0; i < rois; ++i) {
    const double x = corner(rng), y = corner(rng);
    p.rois.push_back({0, x, y, x + side(rng), y + side(rng)});
  }
  p.spatial_scale = 0.25;
  p.pooled_height = p.pooled_width = 7;
  p.sampling_ratio = 2;
  p.aligned = true;
  return p;
}

// Each RoIAlign benchmark calls once before timing: at 1,000 RoIs one timed call is all a
// run gets, and a cold first call pays for mapping its answer (the oracle's: 800 MB, a
// third of the call) where every later call of a campaign reuses it. (Google Benchmark
// 1.7.1's MinWarmUpTime did not call it here.)
void BM_RoiAlignOracle(benchmark::State& state) {
  const RoiAlignProblem p = roi_align_problem(static_cast<std::size_t>(state.range(0)));
  benchmark::DoNotOptimize(oracles::roi_align(p, DType::fp32));
  for (auto _ : state) benchmark::DoNotOptimize(oracles::roi_align(p, DType::fp32));
}

// The naive all-tracker version the oracle is tested against.
void BM_RoiAlignOracleReference(benchmark::State& state) {
  const RoiAlignProblem p = roi_align_problem(static_cast<std::size_t>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(oracles::roi_align_reference(p, DType::fp32));
}

void BM_TorchvisionRoiAlign(benchmark::State& state) {
  static const auto targets = kernels::roi_align_targets(kConfig);
  const auto& torchvision = target_named(targets, "torchvision");
  const RoiAlignProblem p = roi_align_problem(static_cast<std::size_t>(state.range(0)));
  benchmark::DoNotOptimize(torchvision.run(p, DType::fp32, Device::cpu));
  for (auto _ : state) benchmark::DoNotOptimize(torchvision.run(p, DType::fp32, Device::cpu));
}

// The kernel alone: tensors built once, outside the timed loop (Target::run converts the
// 13 M-value map on every call, which dwarfs the kernel at small RoI counts). fp32 is what
// the oracle's speed goal is stated against; fp64 reads the map the oracle reads (doubles:
// twice the bytes), so the two bracket how much of the gap is memory traffic.
void BM_TorchvisionRoiAlignKernel(benchmark::State& state, DType dtype) {
  const kernels::LibraryStatus& library = kernels::load_torchvision(kConfig);
  if (!library.loaded) {
    state.SkipWithError(library.error.c_str());
    return;
  }
  const auto op = kernels::find_op("torchvision::roi_align");
  const RoiAlignProblem p = roi_align_problem(static_cast<std::size_t>(state.range(0)));
  std::vector<double> flat;
  for (const Roi& r : p.rois) flat.insert(flat.end(), {r.batch_index, r.x1, r.y1, r.x2, r.y2});
  const at::Tensor input = kernels::values_tensor(p.input.values, dtype, Device::cpu)
                               .reshape({p.input.batch, p.input.channels, p.input.height, p.input.width});
  const at::Tensor rois =
      kernels::values_tensor(flat, dtype, Device::cpu).reshape({static_cast<std::int64_t>(p.rois.size()), 5});
  auto call = [&] {
    return kernels::call_boxed(*op, {input, rois, p.spatial_scale, p.pooled_height, p.pooled_width, p.sampling_ratio,
                                     p.aligned});
  };
  benchmark::DoNotOptimize(call());
  for (auto _ : state) benchmark::DoNotOptimize(call());
}

// R-FCN's position-sensitive score maps: 5 x 7 x 7 = 245 channels on the same 200 x 256
// level, 7 x 7 bins, 2 x 2 samples (PSRoIAlign), the same RoIs.
RoiAlignProblem ps_roi_align_problem(std::size_t rois) {
  RoiAlignProblem p = roi_align_problem(rois);
  p.input.channels = 245;
  p.input.values.resize(static_cast<std::size_t>(245 * 200 * 256));
  return p;
}

RoiPoolProblem ps_roi_pool_problem(std::size_t rois) {
  const RoiAlignProblem a = ps_roi_align_problem(rois);
  return {a.input, a.rois, a.spatial_scale, a.pooled_height, a.pooled_width};
}

void BM_PsRoiAlignOracle(benchmark::State& state) {
  const RoiAlignProblem p = ps_roi_align_problem(static_cast<std::size_t>(state.range(0)));
  benchmark::DoNotOptimize(oracles::ps_roi_align(p, DType::fp32));
  for (auto _ : state) benchmark::DoNotOptimize(oracles::ps_roi_align(p, DType::fp32));
}

void BM_PsRoiPoolOracle(benchmark::State& state) {
  const RoiPoolProblem p = ps_roi_pool_problem(static_cast<std::size_t>(state.range(0)));
  benchmark::DoNotOptimize(oracles::ps_roi_pool(p, DType::fp32));
  for (auto _ : state) benchmark::DoNotOptimize(oracles::ps_roi_pool(p, DType::fp32));
}

// The torchvision kernel alone, fp32, tensors built once (as TorchvisionRoiAlignKernel).
void BM_TorchvisionPsKernel(benchmark::State& state, const char* op_name) {
  const kernels::LibraryStatus& library = kernels::load_torchvision(kConfig);
  if (!library.loaded) {
    state.SkipWithError(library.error.c_str());
    return;
  }
  const auto op = kernels::find_op(op_name);
  const RoiAlignProblem p = ps_roi_align_problem(static_cast<std::size_t>(state.range(0)));
  std::vector<double> flat;
  for (const Roi& r : p.rois) flat.insert(flat.end(), {r.batch_index, r.x1, r.y1, r.x2, r.y2});
  const at::Tensor input = kernels::values_tensor(p.input.values, DType::fp32, Device::cpu)
                               .reshape({p.input.batch, p.input.channels, p.input.height, p.input.width});
  const at::Tensor rois =
      kernels::values_tensor(flat, DType::fp32, Device::cpu).reshape({static_cast<std::int64_t>(p.rois.size()), 5});
  const bool align = std::string(op_name) == "torchvision::ps_roi_align";
  auto call = [&] {
    std::vector<c10::IValue> args{input, rois, p.spatial_scale, p.pooled_height, p.pooled_width};
    if (align) args.emplace_back(p.sampling_ratio);
    return kernels::call_boxed(*op, std::move(args));
  };
  benchmark::DoNotOptimize(call());
  for (auto _ : state) benchmark::DoNotOptimize(call());
}

// detfuzz's own RoIAlign kernel in host emulation (one output element at a time, the CUDA
// kernel's element function), fp32, the map converted once outside the timed loop: the
// counterpart of TorchvisionRoiAlignKernel/fp32.
void BM_NativeRoiAlignKernel(benchmark::State& state) {
  const RoiAlignProblem p = roi_align_problem(static_cast<std::size_t>(state.range(0)));
  const std::vector<float> input(p.input.values.begin(), p.input.values.end());  // exact: the values are floats
  std::vector<float> rois;
  for (const Roi& r : p.rois)
    for (double v : {r.batch_index, r.x1, r.y1, r.x2, r.y2}) rois.push_back(static_cast<float>(v));
  const native::RoiShape shape{p.input.batch, p.input.channels, p.input.height, p.input.width,
                               static_cast<std::int64_t>(p.rois.size()), p.pooled_height, p.pooled_width};
  auto call = [&] {
    return native::roi_align<float>(native::Backend::host_emulation, shape, input, rois, p.spatial_scale,
                                    p.sampling_ratio, p.aligned);
  };
  benchmark::DoNotOptimize(call());
  for (auto _ : state) benchmark::DoNotOptimize(call());
}

// Generation, what every campaign case pays before its kernel runs: one case after another
// at the campaign's sizes (0..100 in turn), fp32, --max-boxes 64.
template <class Problem>
void BM_GenerateCase(benchmark::State& state, rc::Gen<Problem> (*make)(const gen::BoxGenOptions&)) {
  const rc::Gen<Problem> generator = make({DType::fp32, 64, false});
  std::uint64_t seed = 0;
  for (auto _ : state) {
    ++seed;
    benchmark::DoNotOptimize(generator(rc::Random(seed), static_cast<int>(seed % 101)).value());
  }
}

// 64 boxes from four integer columns: gen::rows against the RapidCheck container of tuples
// it replaced in the box generators (same distribution and shrinking).
Box lattice_box(int x, int y, int w, int h) { return {1.0 * x, 1.0 * y, 1.0 * (x + w), 1.0 * (y + h)}; }

void BM_BoxRows(benchmark::State& state) {
  const gen::Column position{0, 4097};
  const auto generator = gen::rows(
      64, [](const gen::Row<4>& r) { return lattice_box(r[0], r[1], r[2], r[3]); }, position, position, position,
      position);
  std::uint64_t seed = 0;
  for (auto _ : state) benchmark::DoNotOptimize(generator(rc::Random(++seed), 100).value());
}

void BM_BoxRowsRapidCheck(benchmark::State& state) {
  const auto position = gen::in_range(0, 4097);
  const auto generator = rc::gen::container<std::vector<Box>>(
      64, rc::gen::map(rc::gen::tuple(position, position, position, position), [](const std::tuple<int, int, int, int>& t) {
        return lattice_box(std::get<0>(t), std::get<1>(t), std::get<2>(t), std::get<3>(t));
      }));
  std::uint64_t seed = 0;
  for (auto _ : state) benchmark::DoNotOptimize(generator(rc::Random(++seed), 100).value());
}

// The backward of the RoIAlign benchmark's problem (and of PSRoIAlign's and PSRoIPool's): the
// map's shape, a gradient of fp32 values in [-4, 4) over the forward output.
template <class Forward>
GradientOf<Forward> backward_problem(Forward forward, bool position_sensitive) {
  const std::int64_t bins = forward.pooled_height * forward.pooled_width;
  const std::int64_t channels_out = position_sensitive ? forward.input.channels / bins : forward.input.channels;
  forward.input.values = {};
  GradientOf<Forward> p{std::move(forward), {}};
  std::mt19937_64 rng(6);
  std::uniform_real_distribution<double> value(-4, 4);
  p.grad.resize(p.forward.rois.size() * static_cast<std::size_t>(channels_out * bins));
  for (double& v : p.grad) v = static_cast<double>(static_cast<float>(value(rng)));
  return p;
}

void BM_RoiAlignBackwardOracle(benchmark::State& state, bool position_sensitive) {
  const auto rois = static_cast<std::size_t>(state.range(0));
  const RoiAlignBackwardProblem p =
      backward_problem(position_sensitive ? ps_roi_align_problem(rois) : roi_align_problem(rois), position_sensitive);
  auto oracle = [&] {
    return position_sensitive ? oracles::ps_roi_align_backward(p, DType::fp32) : oracles::roi_align_backward(p, DType::fp32);
  };
  benchmark::DoNotOptimize(oracle());
  for (auto _ : state) benchmark::DoNotOptimize(oracle());
}

// torchvision's backward kernel alone, fp32, tensors built once.
void BM_TorchvisionRoiAlignBackwardKernel(benchmark::State& state, bool position_sensitive) {
  const kernels::LibraryStatus& library = kernels::load_torchvision(kConfig);
  if (!library.loaded) {
    state.SkipWithError(library.error.c_str());
    return;
  }
  const auto rois_count = static_cast<std::size_t>(state.range(0));
  const RoiAlignBackwardProblem p = backward_problem(
      position_sensitive ? ps_roi_align_problem(rois_count) : roi_align_problem(rois_count), position_sensitive);
  const RoiAlignProblem& f = p.forward;
  const std::int64_t bins = f.pooled_height * f.pooled_width;
  const std::int64_t channels_out = position_sensitive ? f.input.channels / bins : f.input.channels;
  std::vector<double> flat;
  for (const Roi& r : f.rois) flat.insert(flat.end(), {r.batch_index, r.x1, r.y1, r.x2, r.y2});
  const auto k = static_cast<std::int64_t>(f.rois.size());
  const at::Tensor grad = kernels::values_tensor(p.grad, DType::fp32, Device::cpu)
                              .reshape({k, channels_out, f.pooled_height, f.pooled_width});
  const at::Tensor rois = kernels::values_tensor(flat, DType::fp32, Device::cpu).reshape({k, 5});
  // The channel_mapping the forward returns beside its output (built by the library: this
  // file's ATen headers need not be the linked LibTorch's).
  at::Tensor mapping;
  if (position_sensitive) {
    const RoiAlignProblem forward = ps_roi_align_problem(rois_count);
    const at::Tensor input = kernels::values_tensor(forward.input.values, DType::fp32, Device::cpu)
                                 .reshape({forward.input.batch, forward.input.channels, forward.input.height,
                                           forward.input.width});
    mapping = kernels::call_boxed(*kernels::find_op("torchvision::ps_roi_align"),
                                  {input, rois, f.spatial_scale, f.pooled_height, f.pooled_width, f.sampling_ratio})[1]
                  .toTensor();
  }
  const auto op = kernels::find_op(position_sensitive ? "torchvision::_ps_roi_align_backward" : "torchvision::_roi_align_backward");
  auto call = [&] {
    if (position_sensitive)
      return kernels::call_boxed(*op, {grad, rois, mapping, f.spatial_scale, f.pooled_height, f.pooled_width,
                                       f.sampling_ratio, f.input.batch, f.input.channels, f.input.height, f.input.width});
    return kernels::call_boxed(*op, {grad, rois, f.spatial_scale, f.pooled_height, f.pooled_width, f.input.batch,
                                     f.input.channels, f.input.height, f.input.width, f.sampling_ratio, f.aligned});
  };
  benchmark::DoNotOptimize(call());
  for (auto _ : state) benchmark::DoNotOptimize(call());
}

// RoIPool's backward on the RoIAlign benchmark's RoIs and map (7 x 7 bins), routed by the
// argmax the fp64 forward oracle gives.
RoiPoolBackwardProblem roi_pool_backward_problem(std::size_t rois) {
  const RoiAlignProblem a = roi_align_problem(rois);
  RoiPoolProblem forward{a.input, a.rois, a.spatial_scale, a.pooled_height, a.pooled_width};
  RoiPoolBackwardProblem p;
  for (const auto& e : oracles::roi_pool(forward, DType::fp32)) p.argmax.push_back(e.nominal.argmax);
  forward.input.values = {};
  p.forward = std::move(forward);
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> value(-4, 4);
  for (std::size_t i = 0; i < p.argmax.size(); ++i) p.grad.push_back(static_cast<double>(static_cast<float>(value(rng))));
  return p;
}

void BM_RoiPoolBackwardOracle(benchmark::State& state) {
  const RoiPoolBackwardProblem p = roi_pool_backward_problem(static_cast<std::size_t>(state.range(0)));
  benchmark::DoNotOptimize(oracles::roi_pool_backward(p, DType::fp32));
  for (auto _ : state) benchmark::DoNotOptimize(oracles::roi_pool_backward(p, DType::fp32));
}

// The target's run: it builds the grad and argmax tensors per call (the kernel alone is the
// smaller part at these sizes).
void BM_TorchvisionRoiPoolBackward(benchmark::State& state) {
  static const auto targets = kernels::roi_pool_backward_targets(kConfig);
  const auto& torchvision = target_named(targets, "torchvision");
  const RoiPoolBackwardProblem p = roi_pool_backward_problem(static_cast<std::size_t>(state.range(0)));
  benchmark::DoNotOptimize(torchvision.run(p, DType::fp32, Device::cpu));
  for (auto _ : state) benchmark::DoNotOptimize(torchvision.run(p, DType::fp32, Device::cpu));
}

void BM_PsRoiPoolBackwardOracle(benchmark::State& state) {
  const PsRoiPoolBackwardProblem p = backward_problem(ps_roi_pool_problem(static_cast<std::size_t>(state.range(0))), true);
  benchmark::DoNotOptimize(oracles::ps_roi_pool_backward(p, DType::fp32));
  for (auto _ : state) benchmark::DoNotOptimize(oracles::ps_roi_pool_backward(p, DType::fp32));
}

// The target's run: grad, RoI and channel_mapping tensors built per call.
void BM_TorchvisionPsRoiPoolBackward(benchmark::State& state) {
  static const auto targets = kernels::ps_roi_pool_backward_targets(kConfig);
  const auto& torchvision = target_named(targets, "torchvision");
  const PsRoiPoolBackwardProblem p = backward_problem(ps_roi_pool_problem(static_cast<std::size_t>(state.range(0))), true);
  benchmark::DoNotOptimize(torchvision.run(p, DType::fp32, Device::cpu));
  for (auto _ : state) benchmark::DoNotOptimize(torchvision.run(p, DType::fp32, Device::cpu));
}

// A ResNet-like 3x3 deformable layer: N x 64 x 56 x 56, 64 outputs, padding 1, offsets within
// two pixels, a mask (DCNv2), values fp32-representable.
DeformConv2dProblem deform_conv2d_layer(std::int64_t batch) {
  DeformConv2dProblem p;
  p.batch = batch;
  p.in_channels = p.out_channels = 64;
  p.height = p.width = 56;
  p.kernel_h = p.kernel_w = 3;
  p.pad_h = p.pad_w = 1;
  p.use_mask = true;
  std::mt19937_64 rng(11);
  auto fill = [&rng](std::vector<double>& values, std::size_t n, double low, double high) {
    std::uniform_real_distribution<double> value(low, high);
    for (std::size_t i = 0; i < n; ++i) values.push_back(static_cast<double>(static_cast<float>(value(rng))));
  };
  const auto plane = static_cast<std::size_t>(p.out_height() * p.out_width()), n = static_cast<std::size_t>(batch);
  fill(p.input, n * 64 * 56 * 56, -1, 1);
  fill(p.weight, 64 * 64 * 9, -0.1, 0.1);
  fill(p.offset, n * 18 * plane, -2, 2);
  fill(p.mask, n * 9 * plane, 0, 1);
  fill(p.bias, 64, -1, 1);
  return p;
}

void BM_DeformConv2dOracle(benchmark::State& state) {
  const DeformConv2dProblem p = deform_conv2d_layer(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(oracles::deform_conv2d(p, DType::fp32));
}

// The target's run: torchvision::deform_conv2d through the dispatcher, tensors built per call.
void BM_TorchvisionDeformConv2d(benchmark::State& state) {
  static const auto targets = kernels::deform_conv2d_targets(kConfig);
  const auto& torchvision = target_named(targets, "torchvision");
  const DeformConv2dProblem p = deform_conv2d_layer(state.range(0));
  benchmark::DoNotOptimize(torchvision.run(p, DType::fp32, Device::cpu));
  for (auto _ : state) benchmark::DoNotOptimize(torchvision.run(p, DType::fp32, Device::cpu));
}

#define DETFUZZ_BOX_SIZES ->Arg(10)->Arg(1000)->Arg(10000)->Arg(30000)->Unit(benchmark::kMillisecond)
BENCHMARK(BM_NmsOracle) DETFUZZ_BOX_SIZES;
BENCHMARK(BM_NmsOracleQuadratic)->Arg(10)->Arg(1000)->Arg(10000)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_NmsTarget, torchvision, "torchvision") DETFUZZ_BOX_SIZES;
BENCHMARK_CAPTURE(BM_NmsTarget, native, "native") DETFUZZ_BOX_SIZES;
BENCHMARK(BM_NmsJudge) DETFUZZ_BOX_SIZES;
BENCHMARK(BM_BatchedNmsOracle) DETFUZZ_BOX_SIZES;
BENCHMARK(BM_TorchvisionBatchedNms) DETFUZZ_BOX_SIZES;
BENCHMARK(BM_BatchedNmsJudge) DETFUZZ_BOX_SIZES;
#define DETFUZZ_PAIRWISE_SIZES ->Arg(10)->Arg(100)->Arg(1000)->Unit(benchmark::kMillisecond)
BENCHMARK(BM_BoxIouOracle) DETFUZZ_PAIRWISE_SIZES;
BENCHMARK_CAPTURE(BM_PairwiseTarget, box_iou_aten, &kernels::box_iou_targets, "aten") DETFUZZ_PAIRWISE_SIZES;
BENCHMARK(BM_GeneralizedBoxIouOracle) DETFUZZ_PAIRWISE_SIZES;
BENCHMARK_CAPTURE(BM_PairwiseTarget, generalized_box_iou_torchvision, &kernels::generalized_box_iou_targets,
                  "torchvision") DETFUZZ_PAIRWISE_SIZES;
#define DETFUZZ_ROI_COUNTS ->Arg(1)->Arg(10)->Arg(100)->Arg(1000)->Unit(benchmark::kMillisecond)
BENCHMARK(BM_RoiAlignOracle) DETFUZZ_ROI_COUNTS;
BENCHMARK(BM_RoiAlignOracleReference)->Arg(1)->Arg(10)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TorchvisionRoiAlign) DETFUZZ_ROI_COUNTS;
BENCHMARK_CAPTURE(BM_TorchvisionRoiAlignKernel, fp32, DType::fp32) DETFUZZ_ROI_COUNTS;
BENCHMARK_CAPTURE(BM_TorchvisionRoiAlignKernel, fp64, DType::fp64) DETFUZZ_ROI_COUNTS;
BENCHMARK(BM_NativeRoiAlignKernel) DETFUZZ_ROI_COUNTS;
BENCHMARK(BM_PsRoiAlignOracle) DETFUZZ_ROI_COUNTS;
BENCHMARK_CAPTURE(BM_TorchvisionPsKernel, ps_roi_align, "torchvision::ps_roi_align") DETFUZZ_ROI_COUNTS;
BENCHMARK(BM_PsRoiPoolOracle) DETFUZZ_ROI_COUNTS;
BENCHMARK_CAPTURE(BM_TorchvisionPsKernel, ps_roi_pool, "torchvision::ps_roi_pool") DETFUZZ_ROI_COUNTS;
BENCHMARK_CAPTURE(BM_RoiAlignBackwardOracle, roi_align, false) DETFUZZ_ROI_COUNTS;
BENCHMARK_CAPTURE(BM_TorchvisionRoiAlignBackwardKernel, roi_align, false) DETFUZZ_ROI_COUNTS;
BENCHMARK_CAPTURE(BM_RoiAlignBackwardOracle, ps_roi_align, true) DETFUZZ_ROI_COUNTS;
BENCHMARK_CAPTURE(BM_TorchvisionRoiAlignBackwardKernel, ps_roi_align, true) DETFUZZ_ROI_COUNTS;
BENCHMARK(BM_RoiPoolBackwardOracle) DETFUZZ_ROI_COUNTS;
BENCHMARK(BM_TorchvisionRoiPoolBackward) DETFUZZ_ROI_COUNTS;
BENCHMARK(BM_PsRoiPoolBackwardOracle) DETFUZZ_ROI_COUNTS;
BENCHMARK(BM_TorchvisionPsRoiPoolBackward) DETFUZZ_ROI_COUNTS;
BENCHMARK(BM_DeformConv2dOracle)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TorchvisionDeformConv2d)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_GenerateCase, nms, &gen::nms_problem)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_GenerateCase, batched_nms, &gen::batched_nms_problem)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_GenerateCase, regression_loss, &gen::regression_loss_problem)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_GenerateCase, fast_rcnn_loss, &gen::fast_rcnn_loss_problem)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_GenerateCase, roi_align, &gen::roi_align_problem)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_BoxRows)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_BoxRowsRapidCheck)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace detfuzz

int main(int argc, char** argv) {
  detfuzz::kernels::set_single_threaded();  // one core per kernel, as in the campaign's workers
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
