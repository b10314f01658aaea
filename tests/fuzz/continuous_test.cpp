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

// A true output beyond the dtype's range whose intermediates fit the accumulate type: the
// message says so, not that the intermediates left the accumulate type's range.
TEST(ContinuousCompare, ATrueValueBeyondTheDtypesRangeIsSaidToBeOne) {
  const OutputContract fp16{"out", {1, 2}, "fp16", Device::cpu};
  const Judgement j = compare_continuous(output(-INFINITY, 0.5, "fp16"),
                                         {ExpectedValue::point(-70000, 1e-2, 100, true), half()}, fp16, DType::fp16);
  ASSERT_EQ(only_kind(j), FindingKind::overflow);
  EXPECT_NE(j.verdicts[0].message.find("the true value is beyond fp16's largest finite 65504"), std::string::npos)
      << j.verdicts[0].message;
  const Judgement k = compare_continuous(output(-INFINITY, 0.5, "fp16"),
                                         {ExpectedValue::point(-70000, 1e-2, 100, false), half()}, fp16, DType::fp16);
  EXPECT_NE(k.verdicts.at(0).message.find("the true intermediates leave fp32's range"), std::string::npos)
      << k.verdicts[0].message;
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

// A NaN or an infinity has no error to measure: the message names the value and says why it
// matters, the details say "unbounded", and no tolerance tier is quoted for it.
TEST(ContinuousCompare, NonFiniteOutputsAreNamedNeverAnErrorOfZero) {
  for (auto [kernel, name] : {std::pair{NAN, "kernel NaN"}, std::pair{-INFINITY, "kernel -inf"},
                              std::pair{INFINITY, "kernel +inf"}}) {
    Judgement j = compare_continuous(output(kernel, 0.5), {half(), half()}, contract(), DType::fp16);
    ASSERT_EQ(only_kind(j), FindingKind::nan);
    const std::string& message = j.verdicts[0].message;
    EXPECT_NE(message.find(name), std::string::npos) << message;
    EXPECT_EQ(message.find("error 0"), std::string::npos) << message;
    EXPECT_EQ(message.find("arithmetic)"), std::string::npos) << "no tolerance tiers for a non-finite value: " << message;
    EXPECT_EQ(j.verdicts[0].details["error"], "unbounded");
  }
}

// The tolerance a verdict shows is the one a replay's table and `eval oracle` print.
TEST(ContinuousCompare, VerdictAndReplayShowOneTolerance) {
  const ExpectedValue zero = ExpectedValue::point(0.0, 0.0, 0.0, true);
  const ExpectedValue interval{0.25, false, {0.2, 0.3, 1e-6}, {0.1, 0.4, 1e-3}, true};
  for (const ExpectedValue& e : {zero, interval, half()}) {
    Judgement j = compare_continuous(output(0.9, 0.9), {e, e}, contract(), DType::fp16);
    ASSERT_FALSE(j.verdicts.empty());
    EXPECT_EQ(j.verdicts[0].details["tolerance"].get<double>(), strict_tolerances({e}, DType::fp32).at(0));
    EXPECT_EQ(j.verdicts[0].details["tolerance"].get<double>(), tolerance(e.strict, DType::fp32));
  }
}

// The target's own arithmetic decides the kind: an explained overflow of a narrower dtype is
// dtype_overflow (failing, named), an unexplained NaN stays nan, and a true value past the
// accumulate type's range stays a range hazard whatever the explainer says.
TEST(ContinuousCompare, OverflowInTheTargetsOwnDtypeIsDtypeOverflow) {
  int asked = 0;
  const OverflowExplainer explain = [&](std::size_t element) -> std::optional<StageOverflow> {
    ++asked;
    if (element != 0) return std::nullopt;
    return StageOverflow{"rb - lt (intersection width)", 65520, 65520, DType::fp16, "boxes.py"};
  };
  Judgement j = compare_continuous(output(NAN, 0.5), {half(), half()}, contract(), DType::fp16, explain);
  ASSERT_EQ(only_kind(j), FindingKind::dtype_overflow);
  EXPECT_TRUE(fails_by_default(FindingKind::dtype_overflow));
  EXPECT_EQ(asked, 1) << "only wrong elements are explained";
  const std::string& message = j.verdicts[0].message;
  EXPECT_NE(message.find("rb - lt (intersection width) in fp16"), std::string::npos) << message;
  EXPECT_NE(message.find("65520"), std::string::npos) << message;
  EXPECT_NE(message.find("largest finite 65504"), std::string::npos) << message;
  EXPECT_FALSE(j.verdicts[0].details["intermediates_in_range"].get<bool>());
  EXPECT_EQ(j.verdicts[0].details["overflowing_intermediate"]["dtype"], "fp16");
  EXPECT_EQ(j.verdicts[0].details["range_judged_in"], "fp16");

  EXPECT_EQ(only_kind(compare_continuous(output(0.5, NAN), {half(), half()}, contract(), DType::fp16, explain)),
            FindingKind::nan);
  EXPECT_EQ(only_kind(compare_continuous(output(NAN, 0.5), {half(false), half()}, contract(), DType::fp16, explain)),
            FindingKind::overflow);
  // Finite but wrong by an overflow the target's dtype caused: dtype_overflow too.
  EXPECT_EQ(only_kind(compare_continuous(output(0.9, 0.5), {half(), half()}, contract(), DType::fp16, explain)),
            FindingKind::dtype_overflow);
}

}  // namespace
}  // namespace detfuzz::compare
