// RoIAlign / RoIPool oracles against values computed by hand and against the expected
// outputs published in mmcv's test suite (open-mmlab/mmcv tests/test_ops/test_roi_align.py
// and test_roi_pool.py: pooled 2x2, spatial_scale 1, sampling_ratio 2, aligned=True for
// roi_align; mmcv's kernels share torchvision's semantics).
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "oracles/roi_align.h"
#include "oracles/roi_pool.h"

namespace detfuzz::oracles {
namespace {

FeatureMap map_of(std::int64_t channels, std::int64_t height, std::int64_t width, std::vector<double> values) {
  return {1, channels, height, width, std::move(values)};
}

std::vector<double> values_of(const RoiAlignAnswer& elements) {
  std::vector<double> values;
  for (const auto& e : elements) values.push_back(e.value);
  return values;
}

RoiAlignProblem mmcv_align(FeatureMap map, Roi roi) {
  return {std::move(map), {roi}, 1.0, 2, 2, 2, true};
}

TEST(RoiAlignOracle, MatchesMmcvPublishedOutputs) {
  EXPECT_EQ(values_of(roi_align(mmcv_align(map_of(1, 2, 2, {1, 2, 3, 4}), {0, 0, 0, 1, 1}), DType::fp32)),
            (std::vector<double>{1.0, 1.25, 1.5, 1.75}));
  EXPECT_EQ(values_of(roi_align(mmcv_align(map_of(2, 2, 2, {1, 2, 3, 4, 4, 3, 2, 1}), {0, 0, 0, 1, 1}), DType::fp32)),
            (std::vector<double>{1.0, 1.25, 1.5, 1.75, 4.0, 3.75, 3.5, 3.25}));
  FeatureMap four = map_of(1, 4, 4, {1, 2, 5, 6, 3, 4, 7, 8, 9, 10, 13, 14, 11, 12, 15, 16});
  EXPECT_EQ(values_of(roi_align(mmcv_align(four, {0, 0, 0, 3, 3}), DType::fp32)),
            (std::vector<double>{1.9375, 4.75, 7.5625, 10.375}));
}

TEST(RoiAlignOracle, DyadicCasesAreExactInEveryTier) {
  auto elements = roi_align(mmcv_align(map_of(1, 2, 2, {1, 2, 3, 4}), {0, 0, 0, 1, 1}), DType::fp16);
  for (const auto& e : elements) {
    EXPECT_EQ(e.strict.bound, 0.0);
    EXPECT_EQ(e.storage.bound, 0.0);
    EXPECT_EQ(e.strict.low, e.value);
    EXPECT_EQ(e.strict.high, e.value);
  }
}

TEST(RoiAlignOracle, NotAlignedUsesAtLeastOnePixelAndNoShift) {
  // A 0-size RoI at (1, 1), not aligned: size forced to 1, one bin, grid ceil(1/1) = 1,
  // sample at (1.5, 1.5): the mean of the four pixels.
  RoiAlignProblem p{map_of(1, 3, 3, {0, 0, 0, 0, 4, 8, 0, 12, 16}), {{0, 1, 1, 1, 1}}, 1.0, 1, 1, -1, false};
  EXPECT_EQ(values_of(roi_align(p, DType::fp64)), (std::vector<double>{10.0}));
  // Aligned, the same RoI has size 0: grid 0, count max(0, 1) = 1, output 0 (no 0/0).
  p.aligned = true;
  EXPECT_EQ(values_of(roi_align(p, DType::fp64)), (std::vector<double>{0.0}));
}

TEST(RoiAlignOracle, SpatialScaleMapsImageToFeatureCoordinates) {
  // Image RoI [0, 0, 8, 8] at scale 1/4 is feature [0, 0, 2, 2]; pooled 1x1 with 2x2 samples at
  // 0.5 and 1.5 on a map whose value is its x coordinate: mean x = 1.
  RoiAlignProblem p{map_of(1, 3, 3, {0, 1, 2, 0, 1, 2, 0, 1, 2}), {{0, 0, 0, 8, 8}}, 0.25, 1, 1, 2, false};
  EXPECT_EQ(values_of(roi_align(p, DType::fp32)), (std::vector<double>{1.0}));
}

TEST(RoiAlignOracle, SamplesBeyondMinusOneOrTheMapContributeZero) {
  // Not aligned: x from -3 to 1, bin 4, samples at x = -2 (out) and 0 (in); y from 0, size
  // forced to 1, samples at 0.25 and 0.75: 2 of 4 samples count, 6 * 2 / 4 = 3.
  RoiAlignProblem p{map_of(1, 1, 2, {6, 6}), {{0, -3, 0, 1, 0}}, 1.0, 1, 1, 2, false};
  EXPECT_EQ(values_of(roi_align(p, DType::fp64)), (std::vector<double>{3.0}));
}

TEST(RoiAlignOracle, EdgeDecisionsOnlyLowPrecisionCanFlipWidenOnlyThatTier) {
  // The single sample sits at y = 0.3 * -5.00390625 + 0.5 = -1.0012 (out: contributes 0).
  // fp32 positions are off by ~1e-7, fp16 ones by ~1e-3 (0.3 itself rounds): only an fp16
  // kernel may see the sample at or above -1, clamp it to row 0 and return 8.
  RoiAlignProblem p{map_of(1, 2, 1, {8, 8}), {{0, 0, -5.00390625, 0, -5.00390625}}, 0.3, 1, 1, 1, false};
  auto e = roi_align(p, DType::fp16).at(0);
  EXPECT_EQ(e.value, 0.0);
  EXPECT_EQ(e.strict.low, 0.0);
  EXPECT_EQ(e.strict.high, 0.0);
  EXPECT_EQ(e.storage.low, 0.0);
  EXPECT_EQ(e.storage.high, 8.0);
}

bool same_double(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

bool same_tier(const RoiAlignTier& a, const RoiAlignTier& b) {
  return same_double(a.low, b.low) && same_double(a.high, b.high) && same_double(a.bound, b.bound);
}

// Small maps and RoIs that reach every branch: dyadic and arbitrary values (exactness and
// its loss), huge and tiny values (the range flags), RoIs past the map's edges and at -1
// (ambiguous samples), inexact spatial scales, adaptive and fixed grids, both alignments,
// reversed corners.
rc::Gen<RoiAlignProblem> small_roi_align_problems() {
  return rc::gen::exec([] {
    RoiAlignProblem p;
    const auto channels = *rc::gen::inRange<std::int64_t>(1, 3);
    const auto height = *rc::gen::inRange<std::int64_t>(1, 6);
    const auto width = *rc::gen::inRange<std::int64_t>(1, 6);
    p.input = {1, channels, height, width, {}};
    const int value_kind = *rc::gen::inRange(0, 4);
    for (std::int64_t i = 0; i < channels * height * width; ++i) {
      const double dyadic = *rc::gen::inRange(-64, 65) / 8.0;
      const double scale = value_kind == 2 ? 1e30 : value_kind == 3 ? 1e-41 : 1.0;
      p.input.values.push_back(value_kind == 0 ? dyadic : dyadic * scale + *rc::gen::inRange(0, 1000) / 997.0 * scale);
    }
    const double scales[] = {1.0, 0.5, 0.25, 0.3, 1.0 / 3};
    p.spatial_scale = scales[*rc::gen::inRange(0, 5)];
    p.pooled_height = *rc::gen::inRange<std::int64_t>(1, 4);
    p.pooled_width = *rc::gen::inRange<std::int64_t>(1, 4);
    p.sampling_ratio = *rc::gen::inRange<std::int64_t>(-1, 4);
    p.aligned = *rc::gen::arbitrary<bool>();
    const int rois = *rc::gen::inRange(1, 4);
    for (int i = 0; i < rois; ++i) {
      auto coordinate = [] { return *rc::gen::inRange(-40, 200) / 8.0; };
      double x1 = coordinate(), y1 = coordinate(), x2 = coordinate(), y2 = coordinate();
      if (x2 < x1) std::swap(x1, x2);
      if (y2 < y1) std::swap(y1, y2);
      // Now and then x2 < x1 or y2 < y1: aligned, that grid is negative and samples nothing.
      if (*rc::gen::inRange(0, 4) == 0) std::swap(x1, x2);
      if (*rc::gen::inRange(0, 4) == 0) std::swap(y1, y2);
      p.rois.push_back({0, x1, y1, x2, y2});
    }
    return p;
  });
}

// The closed form (oracle) against the general ErrorTracker (reference): the same values
// and decisions bit for bit, a bound never below the tracker's, and the tracker's own result
// wherever the tracker finds the accumulate-type evaluation exact.
void expect_closed_form_agrees(const RoiAlignProblem& p, DType storage, double tightness) {
  const auto oracle = roi_align(p, storage);
  const auto reference = roi_align_reference(p, storage);
  RC_ASSERT(oracle.size() == reference.size());
  for (std::size_t i = 0; i < oracle.size(); ++i) {
    const RoiAlignElement &o = oracle[i], &r = reference[i];
    RC_ASSERT(o.unconstrained == r.unconstrained);
    RC_ASSERT(same_double(o.value, r.value));
    RC_ASSERT(o.range_ok == r.range_ok);
    for (auto tier : {&RoiAlignElement::strict, &RoiAlignElement::storage}) {
      RC_ASSERT(same_double((o.*tier).low, (r.*tier).low));
      RC_ASSERT(same_double((o.*tier).high, (r.*tier).high));
      if (std::isnan(r.value)) continue;
      RC_ASSERT((o.*tier).bound >= (r.*tier).bound * (1 - 1e-12));
      if (tightness < std::numeric_limits<double>::infinity())
        RC_ASSERT((o.*tier).bound <= (r.*tier).bound * tightness + 1e-300);
    }
    // A grid count only the storage tier leaves open may make that tier inexact alone.
    if (storage != DType::fp64 && r.strict.bound == 0) {
      RC_ASSERT(same_tier(o.strict, r.strict));
      if (r.storage.bound == 0) RC_ASSERT(o.storage.bound == 0.0);
    }
  }
}

RC_GTEST_PROP(RoiAlignOracle, ClosedFormNeverUndercutsTheTrackerAndKeepsItsExactCases, ()) {
  const RoiAlignProblem p = *small_roi_align_problems();
  for (DType storage : kFloatDTypes) expect_closed_form_agrees(p, storage, std::numeric_limits<double>::infinity());
}

// Values no format holds (x/997, nonzero): no step of the accumulate-type evaluation can be
// exact, so the closed form must be the tracker's bound itself (fp64 steps may still be
// exact there, which moves the bound by ~1e-9 relative).
RC_GTEST_PROP(RoiAlignOracle, ClosedFormIsTheTrackersBoundWhenNoStepIsExact, ()) {
  RoiAlignProblem p = *small_roi_align_problems();
  for (double& v : p.input.values) v = *rc::gen::inRange(1, 996) / 997.0 * (*rc::gen::arbitrary<bool>() ? 1 : -1);
  for (DType storage : {DType::fp16, DType::bf16, DType::fp32}) expect_closed_form_agrees(p, storage, 1 + 1e-6);
}

// A channel count past one vector register and past one block of the window's transposition
// (8) but not a multiple of it: the lanes of the closed form stay independent (each channel
// its own values).
TEST(RoiAlignOracle, ClosedFormLanesAreTheChannels) {
  RoiAlignProblem p;
  p.input = {1, 11, 9, 11, {}};
  for (std::int64_t i = 0; i < 11 * 9 * 11; ++i) p.input.values.push_back(std::sin(static_cast<double>(i)) * 3);
  p.rois = {{0, 0.3, 1.7, 9.1, 8.2}, {0, -2, -1.5, 4, 3}};
  p.spatial_scale = 0.9;
  p.pooled_height = 3;
  p.pooled_width = 2;
  p.sampling_ratio = -1;
  p.aligned = true;
  for (DType storage : kFloatDTypes) {
    const auto oracle = roi_align(p, storage), reference = roi_align_reference(p, storage);
    ASSERT_EQ(oracle.size(), reference.size());
    for (std::size_t i = 0; i < oracle.size(); ++i) {
      EXPECT_EQ(oracle[i].value, reference[i].value) << i;
      EXPECT_GE(oracle[i].strict.bound, reference[i].strict.bound * (1 - 1e-12)) << i;
    }
  }
}

// PSRoIAlign: element (k, c, ph, pw) is aligned RoIAlign's element (k, c * bins + bin, ph, pw),
// in both the closed form (bin by bin over the bin's channels) and the reference.
TEST(PsRoiAlignOracle, EachElementIsAlignedRoiAlignOfItsBinsChannel) {
  RoiAlignProblem p;
  p.input = {2, 12, 7, 9, {}};
  for (std::int64_t i = 0; i < 2 * 12 * 7 * 9; ++i) p.input.values.push_back(std::cos(static_cast<double>(i)) * 5);
  p.rois = {{1, 0.3, 1.7, 8.1, 6.2}, {0, -2, -1.5, 4, 3}, {1, 2, 2, 2, 2}};
  p.spatial_scale = 0.9;
  p.pooled_height = 3;
  p.pooled_width = 2;
  p.sampling_ratio = -1;
  p.aligned = false;  // ignored: PSRoIAlign always samples as aligned RoIAlign
  RoiAlignProblem aligned = p;
  aligned.aligned = true;
  const std::size_t bins = 6, channels = 12;
  for (DType storage : kFloatDTypes) {
    const auto ps = ps_roi_align(p, storage), reference = ps_roi_align_reference(p, storage);
    const auto plain = roi_align(aligned, storage);
    ASSERT_EQ(ps.size(), 3 * channels);
    ASSERT_EQ(reference.size(), ps.size());
    for (std::size_t i = 0; i < ps.size(); ++i) {
      const std::size_t k = i / channels, within = i % channels, bin = i % bins;
      const RoiAlignElement& same = plain[(k * channels + within) * bins + bin];
      EXPECT_EQ(ps[i].value, same.value) << i;
      EXPECT_EQ(ps[i].strict.low, same.strict.low) << i;
      EXPECT_EQ(ps[i].strict.high, same.strict.high) << i;
      EXPECT_EQ(ps[i].storage.bound, same.storage.bound) << i;
      EXPECT_EQ(ps[i].unconstrained, same.unconstrained) << i;
      EXPECT_EQ(reference[i].value, ps[i].value) << i;
      EXPECT_GE(ps[i].strict.bound, reference[i].strict.bound * (1 - 1e-12)) << i;
    }
  }
}

TEST(PsRoiAlignOracle, MatchesTorchvisionOnTheArangeMap) {
  // Channel c holds 16 c + 4 h + w; the whole-map RoI's four bins each average their own
  // channel's 2 x 2 block (torchvision 0.14.1 and 0.26.0 give these values).
  RoiAlignProblem p{{1, 4, 4, 4, {}}, {{0, 0, 0, 4, 4}}, 1.0, 2, 2, -1, true};
  for (int i = 0; i < 64; ++i) p.input.values.push_back(i);
  EXPECT_EQ(values_of(ps_roi_align(p, DType::fp32)), (std::vector<double>{2.5, 20.5, 42.5, 60.5}));
}

TEST(PsRoiAlignOracle, AChannelCountTheGridDoesNotDivideHasNoAnswer) {
  RoiAlignProblem p{{1, 3, 2, 2, std::vector<double>(12, 1.0)}, {{0, 0, 0, 2, 2}}, 1.0, 2, 1, -1, true};
  EXPECT_TRUE(ps_roi_align(p, DType::fp32).empty());
}

TEST(PsRoiAlignOracle, AZeroSizeRoiWithAdaptiveSamplingAveragesNothingToZero) {
  RoiAlignProblem p{{1, 1, 2, 2, {1, 2, 3, 4}}, {{0, 1, 1, 1, 1}}, 1.0, 1, 1, -1, true};
  EXPECT_EQ(ps_roi_align(p, DType::fp32).at(0).value, 0.0);
}

// The slope that turns a position error into a value error: the cell's own while the error
// stays inside the cell, every cell the position may reach otherwise. Map: 0 except a
// 1024 step between columns 3 and 4. One sample at feature position (0.5, x), aligned, scale
// 0.999; in fp16 (storage tier) positions are off by ~4e-3.
RoiAlignProblem step_map_sample(double feature_x) {
  const double x = (feature_x + 0.5) / 0.999, y = 1.0 / 0.999;
  return {map_of(1, 2, 6, {0, 0, 0, 0, 1024, 1024, 0, 0, 0, 0, 1024, 1024}), {{0, x, y, x, y}}, 0.999, 1, 1, 1, true};
}

TEST(RoiAlignOracle, PositionErrorsReachingTheNextCellTakeItsSlope) {
  const auto flat = roi_align(step_map_sample(2.5), DType::fp16).at(0);     // inside flat cell [2, 3]
  const auto steep = roi_align(step_map_sample(3.5), DType::fp16).at(0);    // inside the step's cell
  const auto edge = roi_align(step_map_sample(2.9995), DType::fp16).at(0);  // flat cell, error reaches 3
  EXPECT_EQ(flat.value, 0.0);
  EXPECT_EQ(edge.value, 0.0);
  EXPECT_LT(flat.storage.bound, 1e-9);
  EXPECT_GT(steep.storage.bound, 1.0);
  EXPECT_GT(edge.storage.bound, 1.0);
  // fp32 positions (strict tier, ~1e-7) stay in the flat cell even at 2.9995.
  EXPECT_LT(edge.strict.bound, 1e-9);
}

// A position error that leaves the cell reaches only the neighbour on its side: with the step
// between columns 5 and 6, a sample just right of 4 (error ~4e-3 in fp16, into cell [3, 4])
// reads flat cells only, one exactly on 5 reaches the step's cell.
RoiAlignProblem step_beyond_sample(double feature_x) {
  const double x = (feature_x + 0.5) / 0.999, y = 1.0 / 0.999;
  std::vector<double> rows;
  for (int row = 0; row < 2; ++row)
    for (int col = 0; col < 8; ++col) rows.push_back(col >= 6 ? 1024 : 0);
  return {map_of(1, 2, 8, rows), {{0, x, y, x, y}}, 0.999, 1, 1, 1, true};
}

TEST(RoiAlignOracle, PositionErrorsReachOnlyTheCellsOnTheirSide) {
  const auto left_crossing = roi_align(step_beyond_sample(4.0005), DType::fp16).at(0);
  const auto on_the_line = roi_align(step_beyond_sample(5.0), DType::fp16).at(0);
  EXPECT_EQ(left_crossing.value, 0.0);
  EXPECT_LT(left_crossing.storage.bound, 1e-9);
  EXPECT_GT(on_the_line.storage.bound, 1.0);
}

// A product below fp16's normal range with every partial sum above it: one sample at
// (0.5, 1.05), plain in both tiers (its position errors stay in the cell), over pixels
// k * 2^-20 with k in 1029..1307 (normal, held, uneven so that fp32 does not match fp64);
// a weight of 0.025 makes a product of ~2^-15, subnormal and inexact in fp16, whose absolute
// error the tracker counts and the closed form's relative model does not. The closed form
// must leave such a sample to the tracker, so its bound may not fall below the tracker's.
TEST(RoiAlignOracle, ProductsBelowTheNormalRangeKeepTheTrackersBound) {
  std::vector<double> pixels;
  for (int k : {1029, 1071, 1103, 1111, 1187, 1201, 1289, 1307}) pixels.push_back(std::ldexp(k, -20));
  RoiAlignProblem p{map_of(1, 2, 4, pixels), {{0, 0.55, 0, 0.55, 0}}, 1.0, 1, 1, 1, false};
  const auto oracle = roi_align(p, DType::fp16).at(0), reference = roi_align_reference(p, DType::fp16).at(0);
  EXPECT_EQ(oracle.value, reference.value);
  EXPECT_GT(reference.strict.bound, 0.0);
  EXPECT_GE(oracle.storage.bound, reference.storage.bound * (1 - 1e-12));
  EXPECT_GE(oracle.strict.bound, reference.strict.bound * (1 - 1e-12));
}

// Four samples of pixels near fp32's largest value: each term is in range, their fp32 sum is
// not. The plain samples' fast path skips the per-step range checks only where the bin
// cannot leave the range, so the oracle must still flag this element, as the tracker does.
TEST(RoiAlignOracle, SumsPastTheAccumulateRangeAreFlagged) {
  std::vector<double> pixels;
  for (int i = 0; i < 16; ++i) pixels.push_back(static_cast<float>(2.5e38 + i * 1e36));
  RoiAlignProblem p{map_of(1, 4, 4, pixels), {{0, 0.3, 0.3, 2.2, 2.2}}, 1.0, 1, 1, 2, false};
  const auto oracle = roi_align(p, DType::fp32).at(0), reference = roi_align_reference(p, DType::fp32).at(0);
  EXPECT_FALSE(reference.range_ok);
  EXPECT_FALSE(oracle.range_ok);
  EXPECT_EQ(oracle.value, reference.value);
}

// An answer's elements are allocated without being initialized (answer_memory.h), and a large
// answer's memory is the previous large answer's: the oracle must write every field of
// every element. Memory filled with 0x7f (doubles near 1.4e306, flags 0x7f) is handed to
// the answer, which must equal the same answer computed in other memory. Sizes on both
// sides of kHugeAnswerBytes; a RoI the oracle gives up on, and fp16 (grid counts rounding
// can move) among the storages.
TEST(RoiAlignOracle, EveryFieldIsWrittenWhateverTheAnswerMemoryHeld) {
  for (std::int64_t rois : {1, 24}) {
    RoiAlignProblem p;
    p.input = {1, 64, 12, 12, {}};
    for (std::int64_t i = 0; i < 64 * 12 * 12; ++i) p.input.values.push_back(std::cos(static_cast<double>(i)) * 5);
    for (std::int64_t r = 0; r < rois; ++r) p.rois.push_back({0, 0.1 * r, 0.2, 7.3 + 0.1 * r, 10.9});
    p.rois.push_back({0, 0, 0, 1e12, 1e12});
    p.spatial_scale = 0.999;
    p.pooled_height = p.pooled_width = 7;
    p.sampling_ratio = -1;
    const std::size_t elements = p.rois.size() * 64 * 49;
    if (rois > 1) {
      ASSERT_GE(elements * sizeof(RoiAlignElement), kHugeAnswerBytes);
    }
    for (DType storage : {DType::fp16, DType::fp32}) {
      const auto expected = roi_align(p, storage);
      {
        RoiAlignAnswer poison(elements);
        std::memset(static_cast<void*>(poison.data()), 0x7f, elements * sizeof(RoiAlignElement));
      }
      const auto answer = roi_align(p, storage);
      ASSERT_EQ(answer.size(), expected.size());
      for (std::size_t i = 0; i < answer.size(); ++i) {
        const RoiAlignElement &a = answer[i], &e = expected[i];
        ASSERT_TRUE(same_double(a.value, e.value) && same_tier(a.strict, e.strict) && same_tier(a.storage, e.storage) &&
                    a.range_ok == e.range_ok && a.unconstrained == e.unconstrained)
            << "element " << i << " of " << answer.size() << ", storage " << dtype_name(storage);
      }
      EXPECT_TRUE(answer.back().unconstrained);
      EXPECT_FALSE(answer.front().unconstrained);
    }
  }
}

TEST(RoiAlignOracle, EmptyRoiListGivesNoElements) {
  RoiAlignProblem p{map_of(1, 2, 2, {1, 2, 3, 4}), {}, 1.0, 2, 2, 2, true};
  EXPECT_TRUE(roi_align(p, DType::fp32).empty());
}

std::vector<double> pooled_values(const std::vector<RoiPoolElement>& elements) {
  std::vector<double> values;
  for (const auto& e : elements) values.push_back(e.nominal.value);
  return values;
}

std::vector<std::int64_t> pooled_argmax(const std::vector<RoiPoolElement>& elements) {
  std::vector<std::int64_t> values;
  for (const auto& e : elements) values.push_back(e.nominal.argmax);
  return values;
}

TEST(RoiPoolOracle, MatchesMmcvPublishedOutputs) {
  RoiPoolProblem a{map_of(1, 2, 2, {1, 2, 3, 4}), {{0, 0, 0, 1, 1}}, 1.0, 2, 2};
  EXPECT_EQ(pooled_values(roi_pool(a, DType::fp32)), (std::vector<double>{1, 2, 3, 4}));
  FeatureMap four = map_of(1, 4, 4, {1, 2, 5, 6, 3, 4, 7, 8, 9, 10, 13, 14, 11, 12, 15, 16});
  RoiPoolProblem b{four, {{0, 0, 0, 3, 3}}, 1.0, 2, 2};
  EXPECT_EQ(pooled_values(roi_pool(b, DType::fp32)), (std::vector<double>{4, 8, 12, 16}));
  // mmcv's gradient puts 1 at the maxima: flat indices 5, 7, 13, 15.
  EXPECT_EQ(pooled_argmax(roi_pool(b, DType::fp32)), (std::vector<std::int64_t>{5, 7, 13, 15}));
}

TEST(RoiPoolOracle, EmptyBinsAreZeroWithArgmaxMinusOne) {
  // A RoI wholly right of the map: every bin is clipped to nothing.
  RoiPoolProblem p{map_of(1, 2, 2, {5, 6, 7, 8}), {{0, 10, 0, 12, 1}}, 1.0, 1, 1};
  auto e = roi_pool(p, DType::fp32).at(0);
  EXPECT_EQ(e.nominal.value, 0.0);
  EXPECT_EQ(e.nominal.argmax, -1);
}

TEST(RoiPoolOracle, HalfwayCoordinatesAreAmbiguousOnlyWhenTheirProductIsInexact) {
  // 2.5 * 1 is exact: round half away from zero -> 3, one option.
  RoiPoolProblem exact{map_of(1, 1, 8, {0, 1, 2, 3, 4, 5, 6, 7}), {{0, 2.5, 0, 7, 0}}, 1.0, 1, 1};
  EXPECT_EQ(roi_pool(exact, DType::fp32).at(0).strict.size(), 1u);
  // 25 * 0.1: 0.1 rounds in fp32/fp16, the product straddles 2.5 in fp16: start 2 or 3.
  RoiPoolProblem inexact{map_of(1, 1, 8, {7, 1, 6, 3, 4, 5, 6, 7}), {{0, 25, 0, 70, 0}}, 0.1, 1, 1};
  auto e = roi_pool(inexact, DType::fp16).at(0);
  EXPECT_GE(e.storage.size(), e.strict.size());
  EXPECT_FALSE(e.storage.empty());
}

TEST(RoiPoolOracle, TakesTheTrueMaxEvenBelowMinusFltMax) {
  RoiPoolProblem p{map_of(1, 1, 2, {-1e300, -2e300}), {{0, 0, 0, 1, 0}}, 1.0, 1, 1};
  auto e = roi_pool(p, DType::fp64).at(0);
  EXPECT_EQ(e.nominal.value, -1e300);
  EXPECT_EQ(e.nominal.argmax, 0);
}

}  // namespace
}  // namespace detfuzz::oracles
