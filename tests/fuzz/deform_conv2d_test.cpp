// The deform_conv2d verdicts: a correct kernel in the accumulate type and in the storage
// dtype (torchvision's arithmetic) raises no failing finding on generated or hostile cases, a
// kernel that computes shapes torchvision refuses is a finding, a wrong element or a kernel
// that is not linear in the map is caught, and case files round-trip bit for bit or are
// refused by name.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "corpus/case_json.h"
#include "fuzz/campaign.h"
#include "fuzz/ops/op_harness.h"
#include "fuzz/progress.h"
#include "fuzz/runner.h"
#include "kernels/mutants/emulated_targets.h"
#include "support/altered_target.h"
#include "model/error.h"

namespace detfuzz::fuzz {
namespace {

using Target = kernels::Target<DeformConv2dProblem>;

Target twin(bool storage_arithmetic = false) {
  kernels::DeformConv2dVariant variant;
  variant.storage_arithmetic = storage_arithmetic;
  Target target = kernels::emulated_deform_conv2d("reference", variant);
  if (storage_arithmetic) target.arithmetic = {{"*"}, "a kernel computing every step in its storage dtype"};
  return target;
}

reports::Report campaign(std::vector<Target> targets, std::uint64_t cases, bool hostile = false) {
  Registry registry;
  registry.ops.push_back(make_deform_conv2d_harness(std::move(targets)));
  CampaignOptions o;
  o.dtypes = {kFloatDTypes.begin(), kFloatDTypes.end()};
  o.cases_per_cell = cases;
  o.hostile = hostile;
  auto progress = make_progress(ProgressMode::none);
  InProcessRunner runner;
  return run_campaign(registry, o, *progress, runner);
}

using detfuzz::testing::altered;

// A 1 x 1 x 3 x 3 map of 1..9 under a 3 x 3 kernel of ones with padding 1, offsets a quarter
// pixel right, no mask: nine outputs of sums of bilinear samples.
DeformConv2dProblem small_problem() {
  DeformConv2dProblem p;
  p.batch = p.in_channels = p.out_channels = 1;
  p.height = p.width = 3;
  p.kernel_h = p.kernel_w = 3;
  p.pad_h = p.pad_w = 1;
  for (int i = 1; i <= 9; ++i) p.input.push_back(i);
  p.weight.assign(9, 1.0);
  p.offset.assign(2 * 9 * 9, 0.0);
  for (std::size_t i = 0; i < p.offset.size(); ++i)
    if ((i / 9) % 2 == 1) p.offset[i] = 0.25;
  p.bias = {0.5};
  return p;
}

compare::Judgement judge(const Target& target, const DeformConv2dProblem& p, DType dtype = DType::fp32) {
  auto harness = make_deform_conv2d_harness({target});
  return harness->judge_json(corpus::to_json(p), target.name, dtype, Device::cpu);
}

bool fails(const compare::Judgement& judgement) {
  return std::any_of(judgement.verdicts.begin(), judgement.verdicts.end(),
                     [](const compare::Verdict& v) { return fails_by_default(v.kind); });
}

std::string messages(const compare::Judgement& judgement) {
  std::string all;
  for (const auto& v : judgement.verdicts) all += v.property + ": " + v.message + "\n";
  return all;
}

class CorrectDeformConv2d : public ::testing::TestWithParam<bool> {};

TEST_P(CorrectDeformConv2d, RaisesNoFailingFindingOnGeneratedCases) {
  const bool storage_arithmetic = GetParam();
  const reports::Report report = campaign({twin(storage_arithmetic)}, 600);
  for (const auto& f : report.findings)
    EXPECT_TRUE(!f.fails || (storage_arithmetic && f.kind == "dtype_overflow"))
        << f.dtype << " " << f.kind << " " << f.property << ": " << f.message << "\n" << f.input.dump();
  ASSERT_EQ(report.cells.size(), kFloatDTypes.size());
  for (const auto& cell : report.cells) EXPECT_EQ(cell.cases, 600u) << cell.dtype;
}

TEST_P(CorrectDeformConv2d, RaisesNoFailingFindingOnHostileCases) {
  const bool storage_arithmetic = GetParam();
  const reports::Report report = campaign({twin(storage_arithmetic)}, 600, true);
  for (const auto& f : report.findings)
    EXPECT_TRUE(!f.fails || (storage_arithmetic && f.kind == "dtype_overflow"))
        << f.dtype << " " << f.kind << " " << f.property << ": " << f.message << "\n" << f.input.dump();
}

INSTANTIATE_TEST_SUITE_P(DeformConv2dOp, CorrectDeformConv2d, ::testing::Bool(),
                         [](const auto& info) { return std::string(info.param ? "InStorageDtype" : "InAccumulateType"); });

TEST(DeformConv2dOp, OneWrongElementIsAMismatchAtThatElement) {
  ASSERT_FALSE(fails(judge(twin(), small_problem()))) << messages(judge(twin(), small_problem()));
  const Target wrong = altered(twin(), [](const DeformConv2dProblem&, std::vector<HostTensor>& outputs) {
    outputs.front().values[4] += 1e-3;
  });
  const compare::Judgement judgement = judge(wrong, small_problem());
  EXPECT_TRUE(fails(judgement)) << messages(judgement);
}

TEST(DeformConv2dOp, AKernelNotLinearInTheMapFailsTheDoublingProperty) {
  // Within tolerance of the oracle, but a fixed absolute error does not double with the map.
  const Target offset_by_an_ulp = altered(twin(), [](const DeformConv2dProblem& p, std::vector<HostTensor>& outputs) {
    if (p.input.at(0) == 1.0)
      for (double& v : outputs.front().values) v = static_cast<double>(std::nextafter(static_cast<float>(v), 1e9f));
  });
  const compare::Judgement judgement = judge(offset_by_an_ulp, small_problem());
  ASSERT_TRUE(fails(judgement)) << messages(judgement);
  EXPECT_NE(messages(judgement).find("value_scaling"), std::string::npos) << messages(judgement);
}

TEST(DeformConv2dOp, AKernelComputingShapesTorchvisionRefusesIsAFinding) {
  DeformConv2dProblem p = small_problem();
  p.in_channels = 3;
  p.offset_groups = 2;  // does not divide three input channels
  p.input.resize(27, 1.0);
  p.weight.assign(27, 1.0);
  p.offset.assign(2 * 2 * 9 * 9, 0.0);
  Target accepting = twin();
  accepting.run = [](const DeformConv2dProblem&, DType dtype, Device) {
    return std::vector<HostTensor>{{{1, 1, 3, 3}, std::string(dtype_name(dtype)), "cpu", std::vector<double>(9, 0.0)}};
  };
  const compare::Judgement judgement = judge(accepting, p);
  ASSERT_TRUE(fails(judgement));
  EXPECT_NE(messages(judgement).find("offset_groups must divide the input channels"), std::string::npos)
      << messages(judgement);
  EXPECT_FALSE(fails(judge(twin(), p))) << messages(judge(twin(), p));  // the twin refuses them too
}

TEST(DeformConv2dOp, ANanOffsetLeavesOnlyItsOwnPositionUnconstrained) {
  DeformConv2dProblem p = small_problem();
  p.offset[9 + 4] = std::nan("");  // tap 0's dx at the centre output
  // The twin reads 0 there; a kernel answering anything at the centre is not wrong ...
  const Target anything_at_the_centre = altered(twin(), [](const DeformConv2dProblem&, std::vector<HostTensor>& o) {
    o.front().values[4] = 1234;
  });
  EXPECT_FALSE(fails(judge(anything_at_the_centre, p))) << messages(judge(anything_at_the_centre, p));
  // ... but a wrong value anywhere else still is.
  const Target wrong_corner = altered(twin(), [](const DeformConv2dProblem&, std::vector<HostTensor>& o) {
    o.front().values[0] += 1;
  });
  EXPECT_TRUE(fails(judge(wrong_corner, p)));
}

TEST(DeformConv2dOp, CaseFilesRoundTripBitForBit) {
  DeformConv2dProblem p = small_problem();
  p.use_mask = true;
  p.mask.assign(9 * 9, 1.0 / 3);
  p.stride_w = 2;
  p.pad_w = 2;
  p.dilation_h = 2;
  p.pad_h = 2;
  p.offset.assign(static_cast<std::size_t>(2 * 9 * p.out_height() * p.out_width()), 0.1);
  p.mask.assign(static_cast<std::size_t>(9 * p.out_height() * p.out_width()), 1.0 / 3);
  const DeformConv2dProblem back = corpus::deform_conv2d_problem_from_json(corpus::to_json(p));
  EXPECT_EQ(back.input, p.input);
  EXPECT_EQ(back.offset, p.offset);
  EXPECT_EQ(back.mask, p.mask);
  EXPECT_EQ(back.weight, p.weight);
  EXPECT_EQ(back.bias, p.bias);
  EXPECT_EQ(std::tie(back.stride_h, back.stride_w, back.pad_h, back.pad_w, back.dilation_h, back.dilation_w),
            std::tie(p.stride_h, p.stride_w, p.pad_h, p.pad_w, p.dilation_h, p.dilation_w));
  EXPECT_TRUE(back.use_mask);
}

TEST(DeformConv2dOp, ACaseFileWithTensorsOfTheWrongSizeIsRefusedByName) {
  nlohmann::json json = corpus::to_json(small_problem());
  json["offset"].erase(json["offset"].begin());
  try {
    corpus::deform_conv2d_problem_from_json(json);
    FAIL() << "accepted 161 offsets where the shapes ask for 162";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::input);
    EXPECT_NE(std::string(error.what()).find("offset"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("162"), std::string::npos) << error.what();
  }
  json = corpus::to_json(small_problem());
  json["kernel"] = {9, 9};
  try {
    corpus::deform_conv2d_problem_from_json(json);
    FAIL() << "accepted a 9 x 9 kernel on a 3 x 3 map with padding 1";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("the output would be"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace detfuzz::fuzz
