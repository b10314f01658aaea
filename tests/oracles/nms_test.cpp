#include <gtest/gtest.h>

#include "oracles/nms.h"

namespace detfuzz::oracles {
namespace {

using Keep = std::vector<std::int64_t>;

TEST(NmsOracle, SuppressesOnlyStrictlyAboveThreshold) {
  // IoU exactly 0.5: kept at threshold 0.5, suppressed just below it.
  NmsProblem problem{{{0, 0, 3, 1}, {1, 0, 4, 1}}, {0.9, 0.8}, 0.5};
  EXPECT_EQ(nms(problem).keep, (Keep{0, 1}));
  problem.iou_threshold = 0.49;
  EXPECT_EQ(nms(problem).keep, (Keep{0}));
  ASSERT_EQ(nms(problem).suppressions.size(), 1u);
  EXPECT_EQ(nms(problem).suppressions[0].suppressed, 1);
}

TEST(NmsOracle, VisitsByDecreasingScoreAndReturnsThatOrder) {
  NmsProblem problem{{{0, 0, 1, 1}, {5, 5, 6, 6}, {0, 0, 1, 1.1}}, {0.1, 0.5, 0.9}, 0.5};
  EXPECT_EQ(nms(problem).keep, (Keep{2, 1}));
}

TEST(NmsOracle, EqualScoresVisitedInIndexOrder) {
  NmsProblem problem{{{0, 0, 1, 1}, {0, 0, 1, 1}, {3, 3, 4, 4}}, {0.5, 0.5, 0.5}, 0.5};
  EXPECT_EQ(nms(problem).keep, (Keep{0, 2}));
}

TEST(NmsOracle, EmptyInputKeepsNothing) {
  EXPECT_TRUE(nms(NmsProblem{}).keep.empty());
}

TEST(NmsOracle, SuppressedBoxesDoNotSuppressOthers) {
  // 0 suppresses 1; 1 would suppress 2, but 1 is gone, and 0 does not overlap 2.
  NmsProblem problem{{{0, 0, 2, 1}, {1, 0, 3, 1}, {2, 0, 4, 1}}, {0.9, 0.8, 0.7}, 0.3};
  EXPECT_EQ(nms(problem).keep, (Keep{0, 2}));
}

TEST(NmsOracle, LegacyConventionSuppressesTouchingPixelBoxes) {
  NmsProblem problem{{{0, 0, 1, 1}, {1, 0, 2, 1}}, {0.9, 0.8}, 0.3};
  EXPECT_EQ(nms(problem).keep, (Keep{0, 1}));
  EXPECT_EQ(nms(problem, BoxConvention::legacy_plus_one).keep, (Keep{0}));
}

}  // namespace
}  // namespace detfuzz::oracles
