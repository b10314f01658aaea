#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cmath>

#include "fuzz/campaign.h"
#include "fuzz/ops/minimize.h"
#include "kernels/mutants/emulated_targets.h"

namespace detfuzz::fuzz {
namespace {

TEST(Minimize, RemovalRangesGoFromHalvesToSingles) {
  auto ranges = removal_ranges(4);
  ASSERT_FALSE(ranges.empty());
  EXPECT_EQ(ranges.front(), (std::pair<std::size_t, std::size_t>{0, 2}));
  EXPECT_EQ(ranges.back(), (std::pair<std::size_t, std::size_t>{3, 4}));
  EXPECT_EQ(removal_ranges(1), (std::vector<std::pair<std::size_t, std::size_t>>{{0, 1}}));
  EXPECT_TRUE(removal_ranges(0).empty());
  EXPECT_EQ(without(std::vector<int>{1, 2, 3, 4}, {1, 3}), (std::vector<int>{1, 4}));
}

TEST(Minimize, SimplerValuesPreferIntegersThenSmallMagnitudes) {
  auto candidates = simpler_values(3.7, DType::fp32);
  EXPECT_NE(std::find(candidates.begin(), candidates.end(), 0.0), candidates.end());
  EXPECT_NE(std::find(candidates.begin(), candidates.end(), 3.0), candidates.end());
  EXPECT_NE(std::find(candidates.begin(), candidates.end(), 4.0), candidates.end());
  EXPECT_TRUE(simpler_values(0.0, DType::fp32).empty());
  // 0.0625 has 4 fraction bits; halving it would add one: not simpler. 1 has none: a
  // failure that needs a small positive value ends at 1, not at 2^-4.
  EXPECT_EQ(simpler_values(0.0625, DType::fp32), (std::vector<double>{0.0, 1.0}));
  EXPECT_EQ(simpler_values(-0.0009765625, DType::fp16), (std::vector<double>{0.0, -1.0}));
}

RC_GTEST_PROP(Minimize, SimplificationChainsEndAndStayRepresentable, ()) {
  const DType dtype = *rc::gen::elementOf(kFloatDTypes);
  double value = round_to(dtype, std::ldexp(*rc::gen::inRange(-(1 << 20), 1 << 20), *rc::gen::inRange(-30, 30)));
  for (int step = 0;; ++step) {
    RC_ASSERT(step < 2000);
    auto candidates = simpler_values(value, dtype);
    for (double c : candidates) {
      RC_ASSERT(representable(dtype, c));
      RC_ASSERT(c != value);
    }
    if (candidates.empty()) break;
    value = candidates.back();  // the slowest descent still ends
  }
}

TEST(Minimize, SimplerBoxesStayValid) {
  std::vector<Box> boxes{{1.25, 2.5, 3.75, 2.5}, {-7.5, -3, -1.5, 9.125}};
  auto candidates = simpler_boxes(boxes, DType::fp16);
  EXPECT_GT(candidates.size(), 8u);
  for (const auto& candidate : candidates)
    for (const Box& b : candidate) {
      EXPECT_LE(b.x1, b.x2);
      EXPECT_LE(b.y1, b.y2);
    }
  // The whole set moved to the origin comes first.
  EXPECT_EQ(candidates.front()[1].x1, 0.0);
  EXPECT_EQ(candidates.front()[0].y1, 5.5);
}

// The recorded shrink path rebuilds the minimized case without judging anything.
TEST(Minimize, ShrinkPathRebuildsTheMinimizedCase) {
  kernels::NmsVariant variant;
  variant.greater_equal = true;
  auto op = make_nms_harness({kernels::emulated_nms("ge", variant)});
  for (std::uint64_t index = 0; index < 2000; ++index) {
    CaseRequest request{"ge", DType::fp32, Device::cpu, case_seed(5, "nms", DType::fp32, index),
                        generator_size(index), 64};
    CaseOutcome outcome = op->run_case(request);
    if (outcome.judgement.verdicts.empty()) continue;
    ShrinkLimits limits{std::chrono::steady_clock::now() + std::chrono::seconds(30), 5000, nullptr};
    ShrinkResult shrunk = op->shrink(request, outcome.judgement.verdicts[0], limits);
    ASSERT_TRUE(shrunk.complete);
    EXPECT_LE(shrunk.size, 2u) << shrunk.input.dump();
    EXPECT_FALSE(shrunk.path.rapidcheck.empty() && shrunk.path.domain.empty());
    EXPECT_EQ(op->follow_shrink_path(request, shrunk.path), shrunk.input);
    EXPECT_EQ(op->follow_shrink_path(request, {}), op->generated_input(request));
    return;
  }
  FAIL() << "no case of 2000 met the planted >= bug";
}

}  // namespace
}  // namespace detfuzz::fuzz
