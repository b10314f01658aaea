#include <gtest/gtest.h>

#include <cmath>

#include "fuzz/compare/continuous.h"

namespace detfuzz::compare {
namespace {

OutputContract contract() { return {"iou", {1, 2}, "fp32", Device::cpu}; }

HostTensor output(double a, double b, std::string dtype = "fp32") {
  return {{1, 2}, std::move(dtype), "cpu", {a, b}};
}

// Oracle 0.5 with a strict bound of 1e-7 and a storage bound of 1e-3.
ExpectedValue half(bool range_ok = true) { return ExpectedValue::point(0.5, 1e-7, 1e-3, range_ok); }

FindingKind only_kind(const Judgement& j) {
  EXPECT_EQ(j.verdicts.size(), 1u);
  return j.verdicts.empty() ? FindingKind::hang : j.verdicts[0].kind;
}

TEST(ContinuousCompare, WithinStrictToleranceIsOk) {
  Judgement j = compare_continuous(output(0.5, 0.5 + 5e-8), {half(), half()}, contract(), DType::fp32);
  EXPECT_TRUE(j.consistent());
  EXPECT_GT(j.max_normalized_error, 0.3);
  EXPECT_LT(j.max_normalized_error, 1.0);
}

TEST(ContinuousCompare, BeyondStrictWithinStorageIsPrecision) {
  Judgement j = compare_continuous(output(0.5, 0.5 + 1e-4), {half(), half()}, contract(), DType::fp16);
  EXPECT_EQ(only_kind(j), FindingKind::precision);
  EXPECT_EQ(j.verdicts[0].details["element"], nlohmann::json({0, 1}));
  EXPECT_GT(j.max_normalized_error, 100);
}

TEST(ContinuousCompare, BeyondBothIsMismatchUnlessOutOfRange) {
  EXPECT_EQ(only_kind(compare_continuous(output(0.5, 0.6), {half(), half()}, contract(), DType::fp32)),
            FindingKind::mismatch);
  EXPECT_EQ(only_kind(compare_continuous(output(0.5, 0.6), {half(), half(false)}, contract(), DType::fp32)),
            FindingKind::overflow);
}

TEST(ContinuousCompare, RangeHazardsStayOutOfTheMaxNormalizedError) {
  Judgement j = compare_continuous(output(0.5, 0.9), {half(), half(false)}, contract(), DType::fp32);
  EXPECT_EQ(only_kind(j), FindingKind::overflow);
  EXPECT_EQ(j.max_normalized_error, 0.0);
}

TEST(ContinuousCompare, NanForAFiniteTrueValueIsNan) {
  EXPECT_EQ(only_kind(compare_continuous(output(NAN, 0.5), {half(), half()}, contract(), DType::fp32)),
            FindingKind::nan);
  EXPECT_EQ(only_kind(compare_continuous(output(INFINITY, 0.5), {half(), half()}, contract(), DType::fp32)),
            FindingKind::nan);
  EXPECT_EQ(only_kind(compare_continuous(output(NAN, 0.5), {half(false), half()}, contract(), DType::fp32)),
            FindingKind::overflow);
}

TEST(ContinuousCompare, UndefinedTrueValueAcceptsAnything) {
  ExpectedValue undefined = ExpectedValue::point(NAN, 0, 0, true, true);
  EXPECT_TRUE(compare_continuous(output(NAN, 0.5), {undefined, half()}, contract(), DType::fp32).consistent());
  EXPECT_TRUE(compare_continuous(output(0.0, 0.5), {undefined, half()}, contract(), DType::fp32).consistent());
}

TEST(ContinuousCompare, ExactExpectationAllowsOnlyOutputRounding) {
  ExpectedValue exact = ExpectedValue::point(0.5, 0, 0, true);
  EXPECT_TRUE(compare_continuous(output(0.5, 0.5), {exact, exact}, contract(), DType::fp32).consistent());
  EXPECT_FALSE(compare_continuous(output(0.5, 0.5 + std::ldexp(1.0, -23)), {exact, exact}, contract(),
                                  DType::fp32).consistent());
}

TEST(ContinuousCompare, IntervalsAcceptEveryValueTheirTierLeavesOpen) {
  // Storage arithmetic may flip a decision between 0 and 8; accumulate-type arithmetic may not.
  ExpectedValue open{0.0, false, {0.0, 0.0, 1e-7}, {0.0, 8.0, 1e-3}, true};
  EXPECT_TRUE(compare_continuous(output(0.0, 0.0), {open, open}, contract(), DType::fp16).consistent());
  EXPECT_EQ(only_kind(compare_continuous(output(0.0, 8.0), {open, open}, contract(), DType::fp16)),
            FindingKind::precision);
  EXPECT_EQ(only_kind(compare_continuous(output(0.0, 4.0), {open, open}, contract(), DType::fp16)),
            FindingKind::precision);
  EXPECT_EQ(only_kind(compare_continuous(output(0.0, 8.5), {open, open}, contract(), DType::fp16)),
            FindingKind::mismatch);
}

TEST(ContinuousCompare, OneVerdictPerKindNamingTheWorstElement) {
  Judgement j = compare_continuous(output(0.5 + 1e-4, 0.5 + 2e-4), {half(), half()}, contract(), DType::fp16);
  ASSERT_EQ(j.verdicts.size(), 1u);
  EXPECT_EQ(j.verdicts[0].details["element"], nlohmann::json({0, 1}));
  EXPECT_EQ(j.verdicts[0].details["elements_of_this_kind"], 2);
}

TEST(ContinuousCompare, ContractIsCheckedBeforeValues) {
  HostTensor wrong_shape{{2, 1}, "fp32", "cpu", {0.5, 0.5}};
  EXPECT_EQ(only_kind(compare_continuous(wrong_shape, {half(), half()}, contract(), DType::fp32)),
            FindingKind::shape);
  EXPECT_EQ(only_kind(compare_continuous(output(0.5, 0.5, "fp64"), {half(), half()}, contract(), DType::fp32)),
            FindingKind::dtype);
  HostTensor elsewhere{{1, 2}, "fp32", "cuda:0", {0.5, 0.5}};
  EXPECT_EQ(only_kind(compare_continuous(elsewhere, {half(), half()}, contract(), DType::fp32)),
            FindingKind::device);
}

}  // namespace
}  // namespace detfuzz::compare
