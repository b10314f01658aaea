// The backward oracles as adjoints of the forward oracles: RoIAlign's and PSRoIAlign's
// (oracles/roi_align_backward.h) satisfy <backward(g), x> = <g, forward(x)> to fp64 rounding on
// random problems and central differences of the forward agree with each gradient; RoIPool's
// (oracles/roi_pool_backward.h) does for the routing the forward's argmax fixes; PSRoIPool's
// (oracles/ps_roi_pool_backward.h) is the adjoint of its forward oracle, which central
// differences confirm. And hand-computed scatters.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cmath>
#include <vector>

#include "oracles/roi_align.h"
#include "oracles/ps_roi_pool.h"
#include "oracles/ps_roi_pool_backward.h"
#include "oracles/roi_align_backward.h"
#include "oracles/roi_pool.h"
#include "oracles/roi_pool_backward.h"

namespace detfuzz::oracles {
namespace {

// A random forward problem with a map of random values: RoIs inside, across and outside the
// edges, adaptive and fixed sampling, aligned or not, spatial scales other than 1.
rc::Gen<RoiAlignProblem> forward_problems(bool position_sensitive) {
  return rc::gen::exec([position_sensitive] {
    RoiAlignProblem p;
    p.pooled_height = *rc::gen::inRange<std::int64_t>(1, 4);
    p.pooled_width = *rc::gen::inRange<std::int64_t>(1, 4);
    const std::int64_t bins = p.pooled_height * p.pooled_width;
    p.input.batch = *rc::gen::inRange<std::int64_t>(1, 3);
    p.input.channels = position_sensitive ? bins * *rc::gen::inRange<std::int64_t>(1, 3)
                                          : *rc::gen::inRange<std::int64_t>(1, 4);
    p.input.height = *rc::gen::inRange<std::int64_t>(1, 12);
    p.input.width = *rc::gen::inRange<std::int64_t>(1, 12);
    const auto size = static_cast<std::size_t>(p.input.batch * p.input.channels * p.input.height * p.input.width);
    for (std::size_t i = 0; i < size; ++i) p.input.values.push_back(*rc::gen::inRange(-64, 65) / 8.0);
    p.spatial_scale = *rc::gen::element(1.0, 0.5, 0.25, 1.0 / 3, 1.7);
    p.sampling_ratio = *rc::gen::element<std::int64_t>(-1, 0, 1, 2, 3);
    p.aligned = position_sensitive || *rc::gen::arbitrary<bool>();
    const int rois = *rc::gen::inRange(0, 5);
    for (int k = 0; k < rois; ++k) {
      const double scale = 1 / p.spatial_scale;
      const double x1 = *rc::gen::inRange(-40, 140) / 10.0 * scale, y1 = *rc::gen::inRange(-40, 140) / 10.0 * scale;
      p.rois.push_back({static_cast<double>(*rc::gen::inRange<std::int64_t>(0, p.input.batch)), x1, y1,
                        x1 + *rc::gen::inRange(-10, 100) / 10.0 * scale, y1 + *rc::gen::inRange(-10, 100) / 10.0 * scale});
    }
    return p;
  });
}

RoiAlignAnswer forward_of(const RoiAlignProblem& p, bool position_sensitive) {
  return position_sensitive ? ps_roi_align(p, DType::fp64) : roi_align(p, DType::fp64);
}

RoiAlignBackwardProblem backward_of(const RoiAlignProblem& p, std::vector<double> grad) {
  RoiAlignBackwardProblem b{p, std::move(grad)};
  b.forward.input.values.clear();  // a backward reads the map's shape only
  return b;
}

RoiAlignAnswer gradient_of(const RoiAlignBackwardProblem& b, bool position_sensitive, DType dtype = DType::fp64) {
  return position_sensitive ? ps_roi_align_backward(b, dtype) : roi_align_backward(b, dtype);
}

// <backward(g), x> = <g, forward(x)> to fp64 rounding of the two sums' terms.
template <class Backward, class Forward>
void assert_adjoint(const Backward& backward, const std::vector<double>& x, const std::vector<double>& grad,
                    const Forward& forward) {
  RC_ASSERT(backward.size() == x.size());
  double left = 0, right = 0, scale = 0;
  for (std::size_t i = 0; i < backward.size(); ++i) {
    left += backward[i].value * x[i];
    scale += std::fabs(backward[i].value * x[i]);
  }
  for (std::size_t i = 0; i < forward.size(); ++i) {
    right += grad[i] * forward[i].value;
    scale += std::fabs(grad[i] * forward[i].value);
  }
  RC_ASSERT(std::fabs(left - right) <= 1e-12 * (scale + 1));
}

void check_adjoint_identity(bool position_sensitive) {
  const RoiAlignProblem p = *forward_problems(position_sensitive);
  const RoiAlignAnswer forward = forward_of(p, position_sensitive);
  std::vector<double> grad;
  for (std::size_t i = 0; i < forward.size(); ++i) grad.push_back(*rc::gen::inRange(-64, 65) / 16.0);
  assert_adjoint(gradient_of(backward_of(p, grad), position_sensitive), p.input.values, grad, forward);
}

RC_GTEST_PROP(RoiAlignBackwardOracle, IsTheAdjointOfTheForwardOracle, ()) { check_adjoint_identity(false); }

RC_GTEST_PROP(PsRoiAlignBackwardOracle, IsTheAdjointOfTheForwardOracle, ()) { check_adjoint_identity(true); }

// The forward is linear in the map, so central differences are exact up to rounding: each
// input value's gradient is d<g, forward(x)>/dx_i.
RC_GTEST_PROP(RoiAlignBackwardOracle, CentralDifferencesOfTheForwardAgreeWithEachGradient, ()) {
  const bool position_sensitive = *rc::gen::arbitrary<bool>();
  RoiAlignProblem p = *forward_problems(position_sensitive);
  // A RoI over the map's corner when none was drawn (discarding such cases can exhaust
  // RapidCheck's discard budget on an unlucky seed).
  if (p.rois.empty()) p.rois.push_back({0, 0, 0, 2 / p.spatial_scale, 2 / p.spatial_scale});
  const RoiAlignAnswer forward = forward_of(p, position_sensitive);
  std::vector<double> grad;
  for (std::size_t i = 0; i < forward.size(); ++i) grad.push_back(*rc::gen::inRange(-8, 9) / 4.0);
  const RoiAlignAnswer backward = gradient_of(backward_of(p, grad), position_sensitive);
  auto loss = [&](const RoiAlignProblem& q) {
    double sum = 0;
    const RoiAlignAnswer out = forward_of(q, position_sensitive);
    for (std::size_t i = 0; i < out.size(); ++i) sum += grad[i] * out[i].value;
    return sum;
  };
  const std::size_t i = *rc::gen::inRange<std::size_t>(0, p.input.values.size());
  const double h = 0.5;
  RoiAlignProblem plus = p, minus = p;
  plus.input.values[i] += h;
  minus.input.values[i] -= h;
  const double difference = (loss(plus) - loss(minus)) / (2 * h);
  RC_ASSERT(std::fabs(difference - backward[i].value) <= 1e-9 * (1 + std::fabs(difference)));
}

FeatureMap shape_only(std::int64_t channels, std::int64_t height, std::int64_t width) {
  return {1, channels, height, width, {}};
}

TEST(RoiAlignBackwardOracle, OneSampleSplitsItsGradientOverFourPixelsExactly) {
  // A unit RoI at the origin, not aligned, one sample at (0.5, 0.5): a quarter to each pixel.
  const RoiAlignBackwardProblem b{{shape_only(1, 2, 2), {{0, 0, 0, 1, 1}}, 1.0, 1, 1, 1, false}, {4.0}};
  const RoiAlignAnswer g = roi_align_backward(b, DType::fp32);
  ASSERT_EQ(g.size(), 4u);
  for (const auto& e : g) {
    EXPECT_EQ(e.value, 1.0);
    EXPECT_EQ(e.strict.low, 1.0);
    EXPECT_EQ(e.strict.high, 1.0);
    EXPECT_GT(e.strict.bound, 0.0);  // two roundings of the term in any format
    EXPECT_LT(e.strict.bound, 1e-6);
    EXPECT_FALSE(e.unconstrained);
  }
}

TEST(RoiAlignBackwardOracle, PixelsNoSampleReachesGetExactlyZero) {
  // The same RoI on a 4x4 map: the two far rows and columns get nothing, with no bound.
  const RoiAlignBackwardProblem b{{shape_only(1, 4, 4), {{0, 0, 0, 1, 1}}, 1.0, 1, 1, 1, false}, {4.0}};
  const RoiAlignAnswer g = roi_align_backward(b, DType::fp16);
  for (std::size_t i = 0; i < g.size(); ++i) {
    const bool reached = i == 0 || i == 1 || i == 4 || i == 5;
    EXPECT_EQ(g[i].value, reached ? 1.0 : 0.0) << i;
    if (!reached) {
      EXPECT_EQ(g[i].storage.bound, 0.0) << i;
      EXPECT_EQ(g[i].storage.low, 0.0) << i;
    }
  }
}

TEST(RoiAlignBackwardOracle, ABinWithNoSamplesScattersNothing) {
  // Aligned with x2 < x1: the adaptive grid is ceil(negative) <= 0, the kernel's loops do not
  // run (the forward divides by max(count, 1); the backward never divides).
  const RoiAlignBackwardProblem b{{shape_only(1, 3, 3), {{0, 2, 2, 1, 1}}, 1.0, 1, 1, 0, true}, {5.0}};
  for (const auto& e : roi_align_backward(b, DType::fp32)) EXPECT_EQ(e.value, 0.0);
}

TEST(RoiAlignBackwardOracle, ASampleNearTheMinusOneEdgeWidensOnlyTheTierThatCanFlipIt) {
  // Not aligned, spatial_scale 0.1 (inexact): the sample row is -1 + 2^-12, inside (y >= -1)
  // and clamped to row 0 in fp64; fp16's position error reaches past -1, fp32's does not.
  const double y1 = (-1.5 + std::ldexp(1, -12)) / 0.1;
  const RoiAlignBackwardProblem b{{shape_only(1, 2, 2), {{0, 0, y1, 10, y1 + 10}}, 0.1, 1, 1, 1, false}, {1.0}};
  const RoiAlignAnswer g = roi_align_backward(b, DType::fp16);
  for (std::size_t i : {0u, 1u}) {
    EXPECT_NEAR(g[i].value, 0.5, 1e-12) << i;
    EXPECT_EQ(g[i].strict.low, g[i].value) << i;  // fp32 cannot drop the sample
    EXPECT_EQ(g[i].storage.low, 0.0) << i;        // fp16 may drop it whole
    EXPECT_EQ(g[i].storage.high, g[i].value) << i;
  }
}

TEST(RoiAlignBackwardOracle, ARoiOutsideTheBatchLeavesEveryElementUnconstrained) {
  const RoiAlignBackwardProblem b{{shape_only(1, 2, 2), {{1, 0, 0, 1, 1}}, 1.0, 1, 1, 1, false}, {4.0}};
  for (const auto& e : roi_align_backward(b, DType::fp32)) EXPECT_TRUE(e.unconstrained);
}

TEST(RoiAlignBackwardOracle, AGradientOfTheWrongSizeIsRefusedByName) {
  const RoiAlignBackwardProblem b{{shape_only(1, 2, 2), {{0, 0, 0, 1, 1}}, 1.0, 2, 2, 1, false}, {4.0}};
  try {
    roi_align_backward(b, DType::fp32);
    FAIL() << "accepted a grad of 1 value for 1 RoI of [1, 2, 2]";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("grad holds 1 values"), std::string::npos) << error.what();
  }
}

TEST(PsRoiAlignBackwardOracle, EachBinScattersIntoItsOwnChannel) {
  // 4 channels, a 2x2 grid, one output channel: bin b's gradient lands in channel b only.
  const RoiAlignBackwardProblem b{{shape_only(4, 4, 4), {{0, 0.5, 0.5, 4.5, 4.5}}, 1.0, 2, 2, 1, true}, {1, 2, 3, 4}};
  const RoiAlignAnswer g = ps_roi_align_backward(b, DType::fp32);
  ASSERT_EQ(g.size(), 64u);
  for (std::int64_t c = 0; c < 4; ++c) {
    double total = 0;
    for (std::int64_t i = 0; i < 16; ++i) total += g[static_cast<std::size_t>(c * 16 + i)].value;
    EXPECT_DOUBLE_EQ(total, static_cast<double>(c + 1)) << c;
  }
  EXPECT_TRUE(ps_roi_align_backward({{shape_only(3, 4, 4), {}, 1.0, 2, 2, 1, true}, {}}, DType::fp32).empty());
}

// For the routing the forward's argmax fixes, RoIPool is linear in the map: forward(x)[e] =
// x[argmax e], so <backward(g), x> = <g, forward(x)> holds exactly for a map whose maxima are
// unique (distinct values: no tie can move an argmax).
RC_GTEST_PROP(RoiPoolBackwardOracle, IsTheAdjointOfTheForwardOracleForItsRouting, ()) {
  RoiAlignProblem a = *forward_problems(false);
  double next = 0;
  for (double& v : a.input.values) v = (next += 1) * (*rc::gen::element(-1.0, 1.0));
  const RoiPoolProblem p{a.input, a.rois, a.spatial_scale, a.pooled_height, a.pooled_width};
  const auto forward = roi_pool(p, DType::fp64);
  std::vector<double> grad;
  std::vector<std::int64_t> argmax;
  for (const auto& e : forward) {
    grad.push_back(*rc::gen::inRange(-64, 65) / 16.0);
    argmax.push_back(e.nominal.argmax);
  }
  RoiPoolBackwardProblem b{p, grad, argmax};
  b.forward.input.values.clear();
  const RoiAlignAnswer backward = roi_pool_backward(b, DType::fp64);
  RC_ASSERT(backward.size() == p.input.values.size());
  double left = 0, right = 0;
  for (std::size_t i = 0; i < backward.size(); ++i) left += backward[i].value * p.input.values[i];
  for (std::size_t i = 0; i < forward.size(); ++i) right += grad[i] * (argmax[i] < 0 ? 0.0 : forward[i].nominal.value);
  RC_ASSERT(std::fabs(left - right) <= 1e-12 * (std::fabs(left) + 1));
}

TEST(RoiPoolBackwardOracle, SumsWhatTheArgmaxRoutesAndSkipsEmptyBins) {
  // Two RoIs on one 2 x 2 map: bins routed to pixels 3, 3 and 0, one bin empty (-1).
  const RoiPoolBackwardProblem b{{shape_only(1, 2, 2), {{0, 0, 0, 1, 1}, {0, 0, 0, 1, 1}}, 1.0, 1, 2},
                                 {1.5, 2.0, 0.25, 8.0}, {3, 0, 3, -1}};
  const RoiAlignAnswer g = roi_pool_backward(b, DType::fp16);
  ASSERT_EQ(g.size(), 4u);
  EXPECT_EQ(g[0].value, 2.0);
  EXPECT_EQ(g[3].value, 1.75);
  EXPECT_EQ(g[1].value, 0.0);
  EXPECT_EQ(g[0].storage.bound, 0.0);  // one term: nothing rounds
  EXPECT_GT(g[3].storage.bound, 0.0);  // two terms: one addition rounds in general
  EXPECT_EQ(g[3].strict.low, 1.75);
  EXPECT_FALSE(g[3].unconstrained);
}

TEST(RoiPoolBackwardOracle, AnArgmaxOutsideThePlaneOrARoiOutsideTheBatchConstrainsNothing) {
  RoiPoolBackwardProblem b{{shape_only(1, 2, 2), {{0, 0, 0, 1, 1}}, 1.0, 1, 1}, {1.0}, {4}};
  for (const auto& e : roi_pool_backward(b, DType::fp32)) EXPECT_TRUE(e.unconstrained);
  b.argmax = {0};
  b.forward.rois[0].batch_index = 1;
  for (const auto& e : roi_pool_backward(b, DType::fp32)) EXPECT_TRUE(e.unconstrained);
}

// A random PSRoIPool problem: channels a multiple of the grid, RoIs inside, across and
// outside the map, spatial scales other than 1.
rc::Gen<RoiPoolProblem> ps_pool_problems() {
  return rc::gen::map(forward_problems(true), [](const RoiAlignProblem& a) {
    return RoiPoolProblem{a.input, a.rois, a.spatial_scale, a.pooled_height, a.pooled_width};
  });
}

PsRoiPoolBackwardProblem ps_pool_backward_of(const RoiPoolProblem& p, std::vector<double> grad) {
  PsRoiPoolBackwardProblem b{p, std::move(grad)};
  b.forward.input.values.clear();
  return b;
}

// PSRoIPool is linear in the map (each output the mean of a span the geometry alone fixes), so
// its adjoint holds to fp64 rounding whatever the values.
RC_GTEST_PROP(PsRoiPoolBackwardOracle, IsTheAdjointOfTheForwardOracle, ()) {
  const RoiPoolProblem p = *ps_pool_problems();
  const auto forward = ps_roi_pool(p, DType::fp64);
  std::vector<double> grad;
  for (std::size_t i = 0; i < forward.size(); ++i) grad.push_back(*rc::gen::inRange(-64, 65) / 16.0);
  assert_adjoint(ps_roi_pool_backward(ps_pool_backward_of(p, grad), DType::fp64), p.input.values, grad, forward);
}

// d <g, forward(x)> / d x_i by central differences of the forward oracle, against the
// gradient the backward oracle gives element i.
RC_GTEST_PROP(PsRoiPoolBackwardOracle, AgreesWithCentralDifferencesOfTheForward, ()) {
  RoiPoolProblem p = *ps_pool_problems();
  const auto forward = ps_roi_pool(p, DType::fp64);
  std::vector<double> grad;
  for (std::size_t i = 0; i < forward.size(); ++i) grad.push_back(*rc::gen::inRange(-64, 65) / 16.0);
  const RoiAlignAnswer backward = ps_roi_pool_backward(ps_pool_backward_of(p, grad), DType::fp64);
  auto objective = [&](const RoiPoolProblem& q) {
    double total = 0;
    const auto out = ps_roi_pool(q, DType::fp64);
    for (std::size_t i = 0; i < out.size(); ++i) total += grad[i] * out[i].value;
    return total;
  };
  const std::size_t element = *rc::gen::inRange<std::size_t>(0, p.input.values.size());
  const double h = 1.0 / 1024, x = p.input.values[element];
  p.input.values[element] = x + h;
  const double up = objective(p);
  p.input.values[element] = x - h;
  const double down = objective(p);
  RC_ASSERT(std::fabs((up - down) / (2 * h) - backward[element].value) <= 1e-9 * (std::fabs(backward[element].value) + 1));
}

TEST(PsRoiPoolBackwardOracle, EachBinSpreadsItsGradientOverItsPixelsInItsOwnChannel) {
  // Four channels, a 2 x 2 grid over a 2 x 2 map: bin b is pixel b of channel b alone.
  const PsRoiPoolBackwardProblem one_pixel_bins{{shape_only(4, 2, 2), {{0, 0, 0, 2, 2}}, 1.0, 2, 2}, {1, 2, 3, 4}};
  const RoiAlignAnswer g = ps_roi_pool_backward(one_pixel_bins, DType::fp32);
  ASSERT_EQ(g.size(), 16u);
  for (std::size_t c = 0; c < 4; ++c)
    for (std::size_t pixel = 0; pixel < 4; ++pixel)
      EXPECT_EQ(g[c * 4 + pixel].value, pixel == c ? static_cast<double>(c + 1) : 0.0) << c << " " << pixel;
  // One bin over the whole map, the last row and column included (torchvision's backward
  // clips to height, its forward to height - 1): a quarter of 4 on each pixel.
  const PsRoiPoolBackwardProblem whole{{shape_only(1, 2, 2), {{0, 0, 0, 2, 2}}, 1.0, 1, 1}, {4}};
  for (const auto& e : ps_roi_pool_backward(whole, DType::fp16)) {
    EXPECT_EQ(e.value, 1.0);
    // One share: its division's rounding (fp16's unit roundoff of 1, x + x^2 for x = u) and
    // fp16's subnormal floor, no addition.
    EXPECT_NEAR(e.storage.bound, 0x1p-11 + 0x1p-22 + 2 * 0x1p-14 * 0x1p-11, 0x1p-40);
    EXPECT_NEAR(e.strict.bound, 0x1p-24 + 0x1p-48, 0x1p-50);  // fp64's own rounding aside
  }
  EXPECT_TRUE(ps_roi_pool_backward({{shape_only(3, 2, 2), {}, 1.0, 2, 2}, {}}, DType::fp32).empty());
}

TEST(PsRoiPoolBackwardOracle, SharesFromSeveralRoisAddAndCarryTheirAdditionsBound) {
  const PsRoiPoolBackwardProblem b{{shape_only(1, 1, 3), {{0, 0, 0, 3, 1}, {0, 0, 0, 1, 1}}, 1.0, 1, 1}, {0.3, 0.7}};
  const RoiAlignAnswer g = ps_roi_pool_backward(b, DType::fp32);
  ASSERT_EQ(g.size(), 3u);
  EXPECT_DOUBLE_EQ(g[0].value, 0.1 + 0.7);
  EXPECT_DOUBLE_EQ(g[2].value, 0.1);
  EXPECT_GT(g[0].strict.bound, g[2].strict.bound);  // two shares, one addition more
  const std::vector<double> terms = ps_roi_pool_backward_terms(b, 0);
  ASSERT_EQ(terms.size(), 2u);
  EXPECT_DOUBLE_EQ(terms[0], 0.1);
  EXPECT_DOUBLE_EQ(terms[1], 0.7);
}

TEST(PsRoiPoolBackwardOracle, AHalfwayCoordinateThatFp16CanMoveWidensOnlyItsTier) {
  // 25 * 0.1 is 2.5 in fp64 (the start rounds to 3); fp16's 0.1 may put it either side, so
  // column 2 may or may not get a share: [0, 1/4] in the storage tier, 0 in fp64's.
  const PsRoiPoolBackwardProblem b{{shape_only(1, 1, 8), {{0, 25, 0, 70, 0}}, 0.1, 1, 1}, {1}};
  const RoiAlignAnswer g = ps_roi_pool_backward(b, DType::fp16);
  EXPECT_EQ(g[2].value, 0.0);
  EXPECT_EQ(g[2].storage.low, 0.0);
  EXPECT_GE(g[2].storage.high, 0.2);
  EXPECT_EQ(g[1].storage.high, 0.0);
}

TEST(PsRoiPoolBackwardOracle, ARoiOutsideTheBatchConstrainsNothing) {
  PsRoiPoolBackwardProblem b{{shape_only(1, 2, 2), {{1, 0, 0, 1, 1}}, 1.0, 1, 1}, {1.0}};
  for (const auto& e : ps_roi_pool_backward(b, DType::fp32)) EXPECT_TRUE(e.unconstrained);
  b.forward.rois[0].batch_index = 0;
  for (const auto& e : ps_roi_pool_backward(b, DType::fp32)) EXPECT_FALSE(e.unconstrained);
}

}  // namespace
}  // namespace detfuzz::oracles
