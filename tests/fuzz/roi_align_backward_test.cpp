// The backward ops' verdicts (roi_align_backward, ps_roi_align_backward, roi_pool_backward,
// ps_roi_pool_backward):
// correct kernels in the accumulate type and in the storage
// dtype (torchvision's arithmetic) raise no failing finding on either op, an fp16 running sum
// that overflows where the gradient fits is the dtype's doing, a kernel that accepts a RoI
// outside the batch is a finding whether it returns or dies (in a contained child), the
// gradient-doubling property catches a kernel that is not linear in the gradient, and a case
// file with a gradient of the wrong size is refused by name.
#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <limits>

#include "corpus/case_json.h"
#include "fuzz/campaign.h"
#include "fuzz/ops/contained_run.h"
#include "fuzz/ops/op_harness.h"
#include "fuzz/progress.h"
#include "fuzz/runner.h"
#include "kernels/mutants/emulated_targets.h"
#include "support/altered_target.h"
#include "model/error.h"

namespace detfuzz::fuzz {
namespace {

using Target = kernels::Target<RoiAlignBackwardProblem>;

Target twin(bool position_sensitive, bool storage_arithmetic = false) {
  kernels::RoiAlignBackwardVariant variant;
  variant.position_sensitive = position_sensitive;
  variant.storage_arithmetic = storage_arithmetic;
  Target target = kernels::emulated_roi_align_backward("reference", variant);
  if (storage_arithmetic) target.arithmetic = {{"*"}, "a kernel adding into grad_input in its storage dtype"};
  return target;
}

std::unique_ptr<OpHarness> harness_of(bool position_sensitive, std::vector<Target> targets) {
  return position_sensitive ? make_ps_roi_align_backward_harness(std::move(targets))
                            : make_roi_align_backward_harness(std::move(targets));
}

reports::Report campaign(std::unique_ptr<OpHarness> harness, std::uint64_t cases, bool hostile = false) {
  Registry registry;
  registry.ops.push_back(std::move(harness));
  CampaignOptions o;
  o.dtypes = {kFloatDTypes.begin(), kFloatDTypes.end()};
  // fp16's largest coordinate (65504) is a RoI of millions of samples, which the in-process
  // twin would take minutes over; the wider dtypes' extremes are past any grid.
  if (hostile) o.dtypes = {DType::bf16, DType::fp32, DType::fp64};
  o.cases_per_cell = cases;
  o.hostile = hostile;
  auto progress = make_progress(ProgressMode::none);
  InProcessRunner runner;
  return run_campaign(registry, o, *progress, runner);
}

std::string messages(const compare::Judgement& judgement) {
  std::string all;
  for (const auto& v : judgement.verdicts) all += v.property + ": " + v.message + "\n";
  return all;
}

using detfuzz::testing::altered;

class CorrectBackward : public ::testing::TestWithParam<std::tuple<bool, bool>> {};

TEST_P(CorrectBackward, RaisesNoFailingFindingInEitherArithmetic) {
  const auto [position_sensitive, storage_arithmetic] = GetParam();
  const reports::Report report = campaign(harness_of(position_sensitive, {twin(position_sensitive, storage_arithmetic)}), 800);
  // Summing fp16 in fp16 overflows where the gradient fits: that finding is the storage
  // dtype's truth, not a false alarm; any other failing finding is.
  for (const auto& f : report.findings)
    EXPECT_TRUE(!f.fails || (storage_arithmetic && f.kind == "dtype_overflow"))
        << f.dtype << " " << f.kind << ": " << f.message;
  for (const auto& cell : report.cells) EXPECT_EQ(cell.cases, 800u) << cell.dtype;
}

INSTANTIATE_TEST_SUITE_P(RoiAlignBackwardOps, CorrectBackward,
                         ::testing::Combine(::testing::Bool(), ::testing::Bool()),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param) ? "PsRoiAlign" : "RoiAlign") +
                                  (std::get<1>(info.param) ? "InStorageDtype" : "InAccumulateType");
                         });

TEST(RoiAlignBackwardOp, HostileInputsRaiseNoFailingFindingOnACorrectKernelThatRefusesBadIndices) {
  // The twin throws on a RoI outside the batch (what a fixed kernel must do); everything else
  // hostile (NaN and infinite gradients, NaN and huge RoIs) it answers.
  const reports::Report report = campaign(harness_of(false, {twin(false)}), 600, true);
  for (const auto& f : report.findings) EXPECT_FALSE(f.fails) << f.dtype << " " << f.kind << ": " << f.message;
}

RoiAlignBackwardProblem one_sample(std::vector<double> grad = {1.0}) {
  return {{{1, 1, 2, 2, {}}, {{0, 0, 0, 1, 1}}, 1.0, 1, 1, 1, false}, std::move(grad)};
}

TEST(RoiAlignBackwardOp, AnFp16RunningSumThatOverflowsWhereTheGradientFitsIsTheKernelsDtype) {
  // A 1 x 1 map: every sample's weight lands on its one pixel. Three RoIs add 40,000, 40,000
  // and -40,000: the gradient is 40,000, but fp16's running sum passes 80,000 (infinite).
  const RoiAlignBackwardProblem p{
      {{1, 1, 1, 1, {}}, {{0, 0, 0, 1, 1}, {0, 0, 0, 1, 1}, {0, 0, 0, 1, 1}}, 1.0, 1, 1, 1, false},
      {40000, 40000, -40000}};
  const auto judgement = harness_of(false, {twin(false, true)})->judge_json(corpus::to_json(p), "reference", DType::fp16,
                                                                            Device::cpu);
  ASSERT_FALSE(judgement.verdicts.empty());
  EXPECT_EQ(judgement.verdicts.front().kind, FindingKind::dtype_overflow) << messages(judgement);
  EXPECT_NE(judgement.verdicts.front().message.find("running sum"), std::string::npos) << messages(judgement);
  // In the accumulate type the same kernel is right.
  EXPECT_TRUE(harness_of(false, {twin(false)})->judge_json(corpus::to_json(p), "reference", DType::fp16, Device::cpu)
                  .verdicts.empty());
}

TEST(RoiAlignBackwardOp, AKernelThatReturnsOnARoiOutsideTheBatchWroteOutsideGradInput) {
  RoiAlignBackwardProblem p = one_sample();
  p.forward.rois[0].batch_index = 1;
  Target accepting = twin(false);
  accepting.name = "accepting";
  accepting.run = [](const RoiAlignBackwardProblem&, DType, Device) {
    return std::vector<HostTensor>{{{1, 1, 2, 2}, "fp32", "cpu", {0, 0, 0, 0}}};
  };
  auto harness = harness_of(false, {accepting});
  const auto judgement = harness->judge_json(corpus::to_json(p), "accepting", DType::fp32, Device::cpu);
  ASSERT_EQ(judgement.verdicts.size(), 1u) << messages(judgement);
  EXPECT_EQ(judgement.verdicts[0].property, "batch_index");
  EXPECT_NE(judgement.verdicts[0].message.find("wrote outside grad_input"), std::string::npos);
  // The twin refuses it: nothing to report.
  EXPECT_TRUE(harness_of(false, {twin(false)})->judge_json(corpus::to_json(p), "reference", DType::fp32, Device::cpu)
                  .verdicts.empty());
}

TEST(RoiAlignBackwardOp, AKernelThatDiesOnARoiOutsideTheBatchDiesInAChildNotInTheWorker) {
  RoiAlignBackwardProblem p = one_sample();
  p.forward.rois[0].batch_index = 5;
  Target dying = twin(false);
  dying.name = "dying";
  dying.run = [](const RoiAlignBackwardProblem&, DType, Device) -> std::vector<HostTensor> {
    std::raise(SIGSEGV);
    return {};
  };
  const auto judgement = harness_of(false, {dying})->judge_json(corpus::to_json(p), "dying", DType::fp32, Device::cpu);
  ASSERT_EQ(judgement.verdicts.size(), 1u) << messages(judgement);
  EXPECT_EQ(judgement.verdicts[0].kind, FindingKind::crash);
  EXPECT_NE(judgement.verdicts[0].message.find("SIGSEGV"), std::string::npos) << messages(judgement);
}

TEST(ContainedRun, BringsBackOutputsBitForBitAndExceptionsByMessage) {
  const std::vector<HostTensor> sent{{{2, 1}, "float16", "cpu", {0.1, -0.0}}, {{0}, "int32", "cpu", {}}};
  auto back = run_contained([&] { return sent; }, "kernel");
  ASSERT_TRUE(std::holds_alternative<std::vector<HostTensor>>(back));
  const auto& outputs = std::get<std::vector<HostTensor>>(back);
  ASSERT_EQ(outputs.size(), 2u);
  EXPECT_EQ(outputs[0].shape, sent[0].shape);
  EXPECT_EQ(outputs[0].dtype, "float16");
  EXPECT_EQ(outputs[0].values[0], 0.1);
  EXPECT_TRUE(std::signbit(outputs[0].values[1]));
  EXPECT_TRUE(outputs[1].values.empty());
  auto raised = run_contained([]() -> std::vector<HostTensor> { throw std::runtime_error("bad rois\nsecond line"); }, "kernel");
  ASSERT_TRUE(std::holds_alternative<compare::Verdict>(raised));
  EXPECT_EQ(std::get<compare::Verdict>(raised).kind, FindingKind::exception);
  EXPECT_EQ(std::get<compare::Verdict>(raised).message, "the kernel raised: bad rois");
}

TEST(RoiAlignBackwardOp, AKernelNotLinearInTheGradientFailsTheDoublingProperty) {
  // Right on the case itself, one ulp off whenever the gradient is not the one it saw first.
  auto first = std::make_shared<std::vector<double>>();
  Target drifting = altered(twin(false), [first](const RoiAlignBackwardProblem& p, std::vector<HostTensor>& outputs) {
    if (first->empty()) *first = p.grad;
    if (p.grad != *first) outputs[0].values[0] = std::nextafter(outputs[0].values[0], 1e9);
  });
  const auto judgement =
      harness_of(false, {drifting})->judge_json(corpus::to_json(one_sample({4.0})), "altered", DType::fp32, Device::cpu);
  ASSERT_EQ(judgement.verdicts.size(), 1u) << messages(judgement);
  EXPECT_EQ(judgement.verdicts[0].property, "gradient_scaling");
}

TEST(RoiAlignBackwardOp, ACaseFileWithAGradientOfTheWrongSizeIsRefusedByName) {
  nlohmann::json json = corpus::to_json(one_sample());
  json["grad"] = {1.0, 2.0};
  try {
    corpus::roi_align_backward_problem_from_json(json, false);
    FAIL() << "accepted 2 gradient values for 1 RoI of [1, 1, 1]";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::input);
    EXPECT_NE(std::string(error.what()).find("grad: expected an array of 1 numbers"), std::string::npos) << error.what();
  }
  json = corpus::to_json(one_sample());
  json["input_shape"] = {1, 3, 2, 2};
  json["pooled_height"] = 2;
  try {
    corpus::roi_align_backward_problem_from_json(json, true);
    FAIL() << "accepted 3 channels for a 2 x 1 position-sensitive grid";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("not a multiple of pooled_height * pooled_width"), std::string::npos)
        << error.what();
  }
}

TEST(RoiAlignBackwardOp, CaseFilesRoundTripBitForBit) {
  RoiAlignBackwardProblem p = one_sample({0.1f});
  p.forward.spatial_scale = 1.0 / 3;
  const RoiAlignBackwardProblem back = corpus::roi_align_backward_problem_from_json(corpus::to_json(p), false);
  EXPECT_EQ(back.grad, p.grad);
  EXPECT_EQ(back.forward.spatial_scale, p.forward.spatial_scale);
  EXPECT_EQ(back.forward.input.channels, 1);
  EXPECT_TRUE(back.forward.input.values.empty());
}

class CorrectPoolBackward : public ::testing::TestWithParam<bool> {};

TEST_P(CorrectPoolBackward, RaisesNoFailingFindingButItsDtypesOverflow) {
  kernels::RoiPoolBackwardVariant variant;
  variant.storage_arithmetic = GetParam();
  auto target = kernels::emulated_roi_pool_backward("reference", variant);
  if (GetParam()) target.arithmetic = {{"*"}, "a kernel adding into grad_input in its storage dtype"};
  const reports::Report report = campaign(make_roi_pool_backward_harness({target}), 1500);
  for (const auto& f : report.findings)
    EXPECT_TRUE(!f.fails || (GetParam() && f.kind == "dtype_overflow")) << f.dtype << " " << f.kind << ": " << f.message;
  for (const auto& cell : report.cells) EXPECT_EQ(cell.cases, 1500u) << cell.dtype;
}

INSTANTIATE_TEST_SUITE_P(RoiPoolBackwardOp, CorrectPoolBackward, ::testing::Bool(),
                         [](const auto& info) { return std::string(info.param ? "InStorageDtype" : "InAccumulateType"); });

TEST(RoiPoolBackwardOp, ACaseFileWithAnArgmaxOutsideThePlaneIsRefusedByName) {
  const RoiPoolBackwardProblem p{{{1, 1, 2, 2, {}}, {{0, 0, 0, 1, 1}}, 1.0, 1, 1}, {1.0}, {3}};
  nlohmann::json json = corpus::to_json(p);
  EXPECT_EQ(corpus::roi_pool_backward_problem_from_json(json).argmax, p.argmax);
  json["argmax"] = {4};
  try {
    corpus::roi_pool_backward_problem_from_json(json);
    FAIL() << "accepted argmax 4 on a 2 x 2 plane";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("argmax[0]: expected -1 or an index into the 2 x 2 plane"), std::string::npos)
        << error.what();
  }
}

class CorrectPsPoolBackward : public ::testing::TestWithParam<bool> {};

TEST_P(CorrectPsPoolBackward, RaisesNoFailingFindingButItsDtypesOverflow) {
  kernels::PsRoiPoolVariant variant;
  variant.storage_arithmetic = GetParam();
  auto target = kernels::emulated_ps_roi_pool_backward("reference", variant);
  if (GetParam()) target.arithmetic = {{"*"}, "a kernel adding into grad_input in its storage dtype"};
  const reports::Report report = campaign(make_ps_roi_pool_backward_harness({target}), 1000);
  for (const auto& f : report.findings)
    EXPECT_TRUE(!f.fails || (GetParam() && f.kind == "dtype_overflow")) << f.dtype << " " << f.kind << ": " << f.message;
  for (const auto& cell : report.cells) EXPECT_EQ(cell.cases, 1000u) << cell.dtype;
}

INSTANTIATE_TEST_SUITE_P(PsRoiPoolBackwardOp, CorrectPsPoolBackward, ::testing::Bool(),
                         [](const auto& info) { return std::string(info.param ? "InStorageDtype" : "InAccumulateType"); });

TEST(PsRoiPoolBackwardOp, HostileInputsRaiseNoFailingFindingOnACorrectKernelThatRefusesBadIndices) {
  const reports::Report report = campaign(make_ps_roi_pool_backward_harness({kernels::emulated_ps_roi_pool_backward("reference")}),
                                          600, true);
  for (const auto& f : report.findings) EXPECT_FALSE(f.fails) << f.dtype << " " << f.kind << ": " << f.message;
}

PsRoiPoolBackwardProblem whole_map_bin() { return {{{1, 1, 2, 2, {}}, {{0, 0, 0, 2, 2}}, 1.0, 1, 1}, {4.0}}; }

TEST(PsRoiPoolBackwardOp, AShareMissingFromOnePixelIsAFailingMismatch) {
  const auto harness = make_ps_roi_pool_backward_harness({altered(
      kernels::emulated_ps_roi_pool_backward("reference"),
      [](const PsRoiPoolBackwardProblem&, std::vector<HostTensor>& outputs) { outputs.front().values[3] = 0; })});
  const auto judgement = harness->judge_json(corpus::to_json(whole_map_bin()), "altered", DType::fp32, Device::cpu);
  ASSERT_FALSE(judgement.verdicts.empty());
  EXPECT_EQ(judgement.verdicts.front().kind, FindingKind::mismatch) << messages(judgement);
  EXPECT_TRUE(make_ps_roi_pool_backward_harness({kernels::emulated_ps_roi_pool_backward("reference")})
                  ->judge_json(corpus::to_json(whole_map_bin()), "reference", DType::fp32, Device::cpu)
                  .verdicts.empty());
}

TEST(PsRoiPoolBackwardOp, AKernelThatReturnsOnARoiOutsideTheBatchWroteOutsideGradInput) {
  PsRoiPoolBackwardProblem p = whole_map_bin();
  p.forward.rois[0].batch_index = 1;
  auto accepting = kernels::emulated_ps_roi_pool_backward("reference");
  accepting.run = [](const PsRoiPoolBackwardProblem&, DType dtype, Device) {
    return std::vector<HostTensor>{{{1, 1, 2, 2}, std::string(dtype_name(dtype)), "cpu", {0, 0, 0, 0}}};
  };
  const auto judgement = make_ps_roi_pool_backward_harness({accepting})->judge_json(corpus::to_json(p), "reference",
                                                                                     DType::fp32, Device::cpu);
  ASSERT_FALSE(judgement.verdicts.empty());
  EXPECT_NE(messages(judgement).find("wrote outside grad_input"), std::string::npos) << messages(judgement);
}

TEST(PsRoiPoolBackwardOp, CaseFilesRoundTripAndAChannelCountTheGridDoesNotDivideIsRefusedByName) {
  PsRoiPoolBackwardProblem p{{{1, 4, 3, 3, {}}, {{0, 0.5, 0, 3, 2.5}}, 1.0 / 3, 2, 2}, {0.1f, -2, 3, 4}};
  nlohmann::json json = corpus::to_json(p);
  const PsRoiPoolBackwardProblem back = corpus::ps_roi_pool_backward_problem_from_json(json);
  EXPECT_EQ(back.grad, p.grad);
  EXPECT_EQ(back.forward.spatial_scale, p.forward.spatial_scale);
  EXPECT_EQ(back.forward.rois[0].x1, 0.5);
  EXPECT_TRUE(back.forward.input.values.empty());
  json["input_shape"] = {1, 3, 3, 3};
  try {
    corpus::ps_roi_pool_backward_problem_from_json(json);
    FAIL() << "accepted 3 channels for a 2 x 2 position-sensitive grid";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("not a multiple of pooled_height * pooled_width"), std::string::npos)
        << error.what();
  }
  json["input_shape"] = {1, 8, 3, 3};
  try {
    corpus::ps_roi_pool_backward_problem_from_json(json);
    FAIL() << "accepted 4 gradient values where 8 channels need 8";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("grad"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace detfuzz::fuzz
