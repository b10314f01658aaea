// gen::rows (fuzz/gen/common.h), the bulk generator behind every box, map value and loss
// value: it must draw what rc::gen::container(n, tuple(in_range...)) drew (uniform over each
// column, nothing outside), keep a prefix when the count shrinks, and shrink to the minimal
// failing row as RapidCheck's tuple of integers would.
#include <gtest/gtest.h>

#include <cstdlib>
#include <set>

#include "fuzz/gen/common.h"

namespace detfuzz::gen {
namespace {

using Pairs = std::vector<Row<2>>;

rc::Gen<Pairs> pairs(std::size_t n) {
  return rows(n, [](const Row<2>& r) { return r; }, Column{-3, 4, 0}, Column{10, 13});
}

TEST(Rows, EveryColumnReachesEachOfItsValuesAndNothingOutside) {
  const Pairs drawn = pairs(3000)(rc::Random(42), 0).value();
  ASSERT_EQ(drawn.size(), 3000u);
  std::set<int> first, second;
  std::size_t at_min = 0;
  for (const auto& r : drawn) {
    first.insert(r[0]);
    second.insert(r[1]);
    at_min += r[0] == -3;
  }
  EXPECT_EQ(first, (std::set<int>{-3, -2, -1, 0, 1, 2, 3}));
  EXPECT_EQ(second, (std::set<int>{10, 11, 12}));
  // Uniform: 3000 / 7 = 429 expected at each value of the first column.
  EXPECT_GT(at_min, 330u);
  EXPECT_LT(at_min, 530u);
}

TEST(Rows, MakeSeesEachRowOnceInOrder) {
  auto sums = rows(50, [](const Row<2>& r) { return 100 * r[0] + r[1]; }, Column{0, 9}, Column{0, 100});
  auto raw = rows(50, [](const Row<2>& r) { return r; }, Column{0, 9}, Column{0, 100});
  const auto values = sums(rc::Random(7), 0).value();
  const auto drawn = raw(rc::Random(7), 0).value();
  ASSERT_EQ(values.size(), drawn.size());
  for (std::size_t i = 0; i < drawn.size(); ++i) EXPECT_EQ(values[i], 100 * drawn[i][0] + drawn[i][1]);
}

TEST(Rows, ASmallerCountKeepsAPrefixAndAnotherSeedGivesOtherRows) {
  const Pairs longer = pairs(40)(rc::Random(5), 0).value();
  const Pairs shorter = pairs(12)(rc::Random(5), 0).value();
  ASSERT_EQ(shorter.size(), 12u);
  EXPECT_TRUE(std::equal(shorter.begin(), shorter.end(), longer.begin()));
  EXPECT_NE(pairs(40)(rc::Random(6), 0).value(), longer);
  EXPECT_TRUE(pairs(0)(rc::Random(5), 0).value().empty());
}

TEST(Rows, EachShrinkMovesOneColumnOfOneRowTowardItsTarget) {
  const auto shrinkable = pairs(6)(rc::Random(11), 0);
  const Pairs start = shrinkable.value();
  int candidates = 0;
  auto shrinks = shrinkable.shrinks();
  for (auto candidate = shrinks.next(); candidate; candidate = shrinks.next()) {
    const Pairs smaller = candidate->value();
    ASSERT_EQ(smaller.size(), start.size());
    int changed = 0;
    for (std::size_t i = 0; i < start.size(); ++i)
      for (std::size_t j = 0; j < 2; ++j) {
        if (smaller[i][j] == start[i][j]) continue;
        ++changed;
        const int target = j == 0 ? 0 : 10;
        EXPECT_LT(std::abs(smaller[i][j] - target), std::abs(start[i][j] - target)) << "row " << i << " column " << j;
      }
    EXPECT_EQ(changed, 1);
    ++candidates;
  }
  EXPECT_GT(candidates, 0);
}

// A case fails when some row has a >= 2 and b >= 12: shrinking it by first failing
// candidate must end at exactly one row (2, 12) and every other row at its targets (0, 10).
TEST(Rows, ShrinkingAFailureEndsAtTheMinimalFailingRow) {
  auto fails = [](const Pairs& p) {
    for (const auto& r : p)
      if (r[0] >= 2 && r[1] >= 12) return true;
    return false;
  };
  std::uint64_t seed = 0;
  auto current = pairs(20)(rc::Random(seed), 0);
  while (!fails(current.value())) {
    ASSERT_LT(seed, 1000u) << "no failing case among 1,000 seeds: (2, 12) is never drawn";
    current = pairs(20)(rc::Random(++seed), 0);
  }
  for (bool improved = true; improved;) {
    improved = false;
    auto shrinks = current.shrinks();
    for (auto candidate = shrinks.next(); candidate; candidate = shrinks.next())
      if (fails(candidate->value())) {
        current = *candidate;
        improved = true;
        break;
      }
  }
  int minimal = 0;
  for (const auto& r : current.value()) {
    if (r == Row<2>{2, 12}) {
      ++minimal;
    } else {
      EXPECT_EQ(r, (Row<2>{0, 10}));
    }
  }
  EXPECT_EQ(minimal, 1);
}

TEST(Rows, AnEmptyColumnOrATargetOutsideItIsRefused) {
  EXPECT_THROW(Column(3, 3), std::invalid_argument);
  EXPECT_THROW(Column(0, 4, 4), std::invalid_argument);
  EXPECT_THROW(Column(0, 4, -1), std::invalid_argument);
}

}  // namespace
}  // namespace detfuzz::gen
