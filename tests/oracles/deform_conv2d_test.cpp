// The deform_conv2d oracle against independent references: with zero offsets it is the plain
// grouped convolution, with integral offsets the convolution of the shifted map, between
// pixels torchvision's bilinear rule (zero beyond -1 and the map's size), and its two error
// tiers cover what a kernel rounding in each tier's type can do (position rounding, subnormal
// products, sums past the accumulate type's range).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "oracles/deform_conv2d.h"

namespace detfuzz::oracles {
namespace {

// A problem of the given shapes with every tensor sized, the offsets and mask zero, the mask
// one where used.
DeformConv2dProblem shaped(std::int64_t batch, std::int64_t channels, std::int64_t height, std::int64_t width,
                           std::int64_t out_channels, std::int64_t kernel, std::int64_t groups = 1,
                           std::int64_t offset_groups = 1, bool use_mask = false) {
  DeformConv2dProblem p;
  p.batch = batch;
  p.in_channels = channels;
  p.height = height;
  p.width = width;
  p.out_channels = out_channels;
  p.kernel_h = p.kernel_w = kernel;
  p.groups = groups;
  p.offset_groups = offset_groups;
  p.use_mask = use_mask;
  const std::int64_t taps = kernel * kernel;
  p.input.assign(static_cast<std::size_t>(batch * channels * height * width), 0.0);
  p.weight.assign(static_cast<std::size_t>(out_channels * (channels / groups) * taps), 0.0);
  p.bias.assign(static_cast<std::size_t>(out_channels), 0.0);
  return p;
}

// Sizes the offset and mask tensors for the problem's output (call after setting stride,
// padding and dilation).
void size_offsets(DeformConv2dProblem& p, double dy = 0, double dx = 0, double mask = 1) {
  const std::int64_t taps = p.kernel_h * p.kernel_w, plane = p.out_height() * p.out_width();
  p.offset.assign(static_cast<std::size_t>(p.batch * p.offset_groups * 2 * taps * plane), 0.0);
  for (std::size_t i = 0; i < p.offset.size(); ++i)
    p.offset[i] = (i / static_cast<std::size_t>(plane)) % 2 == 0 ? dy : dx;
  p.mask.assign(p.use_mask ? static_cast<std::size_t>(p.batch * p.offset_groups * taps * plane) : 0, mask);
}

// The grouped convolution written out directly, each tap reading the map at an integral shift
// (shift_y, shift_x) of its position, zero outside the map.
std::vector<double> naive_convolution(const DeformConv2dProblem& p, std::int64_t shift_y = 0, std::int64_t shift_x = 0) {
  const std::int64_t oh = p.out_height(), ow = p.out_width();
  const std::int64_t cg = p.in_channels / p.groups, og = p.out_channels / p.groups;
  std::vector<double> out;
  for (std::int64_t b = 0; b < p.batch; ++b)
    for (std::int64_t o = 0; o < p.out_channels; ++o)
      for (std::int64_t oy = 0; oy < oh; ++oy)
        for (std::int64_t ox = 0; ox < ow; ++ox) {
          double sum = p.bias[static_cast<std::size_t>(o)];
          for (std::int64_t gc = 0; gc < cg; ++gc)
            for (std::int64_t i = 0; i < p.kernel_h; ++i)
              for (std::int64_t j = 0; j < p.kernel_w; ++j) {
                const std::int64_t c = (o / og) * cg + gc;
                const std::int64_t y = oy * p.stride_h - p.pad_h + i * p.dilation_h + shift_y;
                const std::int64_t x = ox * p.stride_w - p.pad_w + j * p.dilation_w + shift_x;
                if (y < 0 || y >= p.height || x < 0 || x >= p.width) continue;
                sum += p.weight[static_cast<std::size_t>(((o * cg + gc) * p.kernel_h + i) * p.kernel_w + j)] *
                       p.input[static_cast<std::size_t>(((b * p.in_channels + c) * p.height + y) * p.width + x)];
              }
          out.push_back(sum);
        }
  return out;
}

std::vector<double> values_of(const std::vector<DeformConv2dElement>& elements) {
  std::vector<double> values;
  for (const auto& e : elements) values.push_back(e.value);
  return values;
}

// Random shapes over groups, strides, padding and dilation, small integer values: every sum is
// exact in double, so the oracle must match the naive convolution exactly.
DeformConv2dProblem random_problem(std::mt19937_64& rng) {
  auto pick = [&](std::int64_t low, std::int64_t high) {
    return std::uniform_int_distribution<std::int64_t>(low, high)(rng);
  };
  const std::int64_t groups = pick(1, 2), offset_groups = pick(1, 2);
  const std::int64_t channels = groups * offset_groups * pick(1, 2);
  DeformConv2dProblem p = shaped(pick(1, 2), channels, pick(3, 7), pick(3, 7), groups * pick(1, 2), pick(1, 3), groups,
                                 offset_groups, pick(0, 1) == 1);
  p.stride_h = pick(1, 2);
  p.stride_w = pick(1, 2);
  p.pad_h = pick(0, 2);
  p.pad_w = pick(0, 2);
  p.dilation_h = pick(1, 2);
  p.dilation_w = pick(1, 2);
  for (auto* values : {&p.input, &p.weight, &p.bias})
    for (double& v : *values) v = static_cast<double>(pick(-4, 4));
  return p;
}

TEST(DeformConv2dOracle, ZeroOffsetsAreTheGroupedConvolution) {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 60; ++round) {
    DeformConv2dProblem p = random_problem(rng);
    if (p.out_height() <= 0 || p.out_width() <= 0) continue;
    size_offsets(p);
    ASSERT_FALSE(deform_conv2d_shape_error(p)) << *deform_conv2d_shape_error(p);
    EXPECT_EQ(values_of(deform_conv2d(p, DType::fp32)), naive_convolution(p)) << "round " << round;
  }
}

TEST(DeformConv2dOracle, IntegralOffsetsConvolveTheShiftedMap) {
  std::mt19937_64 rng(11);
  for (int round = 0; round < 60; ++round) {
    DeformConv2dProblem p = random_problem(rng);
    if (p.out_height() <= 0 || p.out_width() <= 0) continue;
    const std::int64_t dy = round % 5 - 2, dx = round % 3 - 1;
    size_offsets(p, static_cast<double>(dy), static_cast<double>(dx));
    EXPECT_EQ(values_of(deform_conv2d(p, DType::fp32)), naive_convolution(p, dy, dx)) << "round " << round;
  }
}

TEST(DeformConv2dOracle, TheMaskScalesEverySample) {
  DeformConv2dProblem p = shaped(1, 2, 4, 5, 2, 3, 1, 1, true);
  p.pad_h = p.pad_w = 1;
  std::iota(p.input.begin(), p.input.end(), 1.0);
  std::iota(p.weight.begin(), p.weight.end(), -8.0);
  size_offsets(p, 0, 0, 0.25);
  const std::vector<double> full = naive_convolution(p);
  const auto masked = deform_conv2d(p, DType::fp32);
  ASSERT_EQ(masked.size(), full.size());
  for (std::size_t i = 0; i < full.size(); ++i) EXPECT_EQ(masked[i].value, full[i] / 4) << i;
}

TEST(DeformConv2dOracle, EachOffsetGroupMovesOnlyItsOwnChannels) {
  // Two channels in two offset groups, group 1 moved one column right; output channel k reads
  // channel k alone.
  DeformConv2dProblem p = shaped(1, 2, 1, 3, 2, 1, 1, 2);
  p.input = {1, 2, 3, 10, 20, 30};
  p.weight = {1, 0, 0, 1};
  size_offsets(p);
  for (std::size_t x = 0; x < 3; ++x) p.offset[2 * 3 + 3 + x] = 1;  // group 1, tap 0, dx
  EXPECT_EQ(values_of(deform_conv2d(p, DType::fp64)), (std::vector<double>{1, 2, 3, 20, 30, 0}));
}

TEST(DeformConv2dOracle, BilinearFollowsTorchvisionsRuleAtAndBeyondTheMapsEdges) {
  DeformConv2dProblem p = shaped(1, 1, 2, 2, 1, 1);
  p.input = {1, 2, 3, 4};
  EXPECT_EQ(deform_bilinear(p, 0, 0, 0.5, 0.5), 2.5);
  EXPECT_EQ(deform_bilinear(p, 0, 0, 0.25, 0), 1.5);
  // Past the last row the missing corners read 0; at -1 and at the size the value is 0.
  EXPECT_EQ(deform_bilinear(p, 0, 0, 1.5, 1), 2.0);
  EXPECT_EQ(deform_bilinear(p, 0, 0, -0.5, 0), 0.5);
  EXPECT_EQ(deform_bilinear(p, 0, 0, -1, 0), 0.0);
  EXPECT_EQ(deform_bilinear(p, 0, 0, 2, 0), 0.0);
  EXPECT_EQ(deform_bilinear(p, 0, 0, 0, 2), 0.0);
  // Continuous there: just inside -1 and the size the value is nearly 0.
  EXPECT_LT(deform_bilinear(p, 0, 0, -1 + 1e-9, 0), 1e-8);
  EXPECT_LT(deform_bilinear(p, 0, 0, 2 - 1e-9, 1), 1e-8);
}

TEST(DeformConv2dOracle, ShapesTorchvisionRefusesHaveNoAnswerAndAReason) {
  DeformConv2dProblem p = shaped(1, 3, 4, 4, 2, 1, 1, 2);
  ASSERT_TRUE(deform_conv2d_shape_error(p));
  EXPECT_NE(deform_conv2d_shape_error(p)->find("offset_groups must divide the input channels"), std::string::npos);
  EXPECT_TRUE(deform_conv2d(p, DType::fp32).empty());
  DeformConv2dProblem q = shaped(1, 4, 4, 4, 3, 1, 2);
  ASSERT_TRUE(deform_conv2d_shape_error(q));
  EXPECT_NE(deform_conv2d_shape_error(q)->find("groups must divide the output channels"), std::string::npos);
  DeformConv2dProblem r = shaped(1, 1, 2, 2, 1, 5);
  ASSERT_TRUE(deform_conv2d_shape_error(r));
  EXPECT_NE(deform_conv2d_shape_error(r)->find("the output size must be positive"), std::string::npos);
}

TEST(DeformConv2dOracle, TheTermsSumToTheConvolutionSum) {
  DeformConv2dProblem p = shaped(2, 2, 3, 3, 2, 2, 2, 1, true);
  std::iota(p.input.begin(), p.input.end(), 0.5);
  std::iota(p.weight.begin(), p.weight.end(), -3.0);
  p.bias = {100, 200};
  size_offsets(p, 0.25, -0.5, 0.75);
  const auto answer = deform_conv2d(p, DType::fp32);
  for (std::size_t e = 0; e < answer.size(); ++e) {
    const auto terms = deform_conv2d_terms(p, e);
    EXPECT_EQ(terms.size(), 4u);  // one group's channel, four taps
    double sum = 0;
    for (const auto& t : terms) {
      sum += t.value();
      EXPECT_GE(t.peak, std::fabs(t.column));
    }
    EXPECT_NEAR(sum, answer[e].sum, 1e-12) << e;
    EXPECT_EQ(answer[e].value, answer[e].sum + p.bias[(e / 4) % 2]);
  }
}

// A kernel computing the sample position in fp16 rounds 100 + 0.1 to 100.125: the storage
// tier must cover the value moving by that much along the map's slope, the strict tier (fp32
// positions) far less.
TEST(DeformConv2dOracle, APositionTheStorageDtypeRoundsWidensItsTierBySlope) {
  DeformConv2dProblem p = shaped(1, 1, 1, 128, 1, 1);
  for (std::size_t x = 0; x < p.input.size(); ++x) p.input[x] = static_cast<double>(x % 2 == 0 ? 0 : 64);
  p.weight = {1};
  size_offsets(p, 0, 0.1);
  const auto answer = deform_conv2d(p, DType::fp16);
  const DeformConv2dElement& e = answer.at(100);
  const double rounded = deform_bilinear(p, 0, 0, 0, 100.125), exact = deform_bilinear(p, 0, 0, 0, 100.1);
  EXPECT_NEAR(e.value, exact, 1e-12);
  EXPECT_GE(e.storage_bound, std::fabs(rounded - exact));
  EXPECT_LT(e.strict_bound, std::fabs(rounded - exact) / 100);
}

// A product below fp32's normal range rounds to a multiple of the smallest subnormal: the
// error is absolute, not relative to the value (a campaign once flagged 1.4e-45 against 4.2e-46).
TEST(DeformConv2dOracle, ProductsBelowTheNormalRangeKeepTheirRoundingInTheBound) {
  DeformConv2dProblem p = shaped(1, 1, 1, 1, 1, 1);
  const float tiny = std::numeric_limits<float>::denorm_min();
  p.input = {tiny};
  p.weight = {0.3f};
  size_offsets(p);
  const DeformConv2dElement e = deform_conv2d(p, DType::fp32).at(0);
  const float kernel = tiny * 0.3f;
  EXPECT_GT(std::fabs(static_cast<double>(kernel) - e.value), 0.0);
  EXPECT_GE(e.strict_bound, std::fabs(static_cast<double>(kernel) - e.value));
  EXPECT_GE(e.storage_bound, std::fabs(static_cast<double>(kernel) - e.value));
}

TEST(DeformConv2dOracle, SumsPastTheAccumulateRangeAreFlaggedPerDtype) {
  DeformConv2dProblem p = shaped(1, 1, 1, 2, 1, 1);
  p.input = {60000, 60000};
  p.weight = {1};
  p.bias = {60000};
  size_offsets(p);
  // fp16 accumulates in fp32: in range. bf16 too. Past fp32's range only with a huge map.
  for (const auto& e : deform_conv2d(p, DType::fp16)) EXPECT_TRUE(e.range_ok);
  p.input = {3e38, 3e38};
  p.bias = {3e38};
  for (const auto& e : deform_conv2d(p, DType::fp32)) EXPECT_FALSE(e.range_ok);
  for (const auto& e : deform_conv2d(p, DType::fp64)) EXPECT_TRUE(e.range_ok);
  // A mask past 1 takes one sample past fp32's range, though its weight brings the sum back.
  p.use_mask = true;
  size_offsets(p, 0, 0, -1.25);
  p.input = {3e38, 0};
  p.weight = {0.5};
  p.bias = {0};
  const auto masked = deform_conv2d(p, DType::fp32);
  EXPECT_FALSE(masked.at(0).range_ok);
  EXPECT_TRUE(masked.at(1).range_ok);
}

TEST(DeformConv2dOracle, ExactProblemsHaveBoundsNoLargerThanTheSumsOwnRounding) {
  // Integers, integral offsets: the bound is a few units in the last place of fp32 at most.
  DeformConv2dProblem p = shaped(1, 1, 3, 3, 1, 3);
  p.pad_h = p.pad_w = 1;
  std::iota(p.input.begin(), p.input.end(), 1.0);
  std::fill(p.weight.begin(), p.weight.end(), 1.0);
  size_offsets(p, 1, -1);
  for (const auto& e : deform_conv2d(p, DType::fp32)) {
    EXPECT_GT(e.strict_bound, 0.0);
    EXPECT_LT(e.strict_bound, 1e-4 * std::max(1.0, std::fabs(e.value)) * 9);
  }
}

}  // namespace
}  // namespace detfuzz::oracles
