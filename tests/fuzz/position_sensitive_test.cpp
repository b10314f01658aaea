// The position-sensitive ops' verdicts. ps_roi_pool: a correct kernel raises nothing,
// torchvision's edge clip is named as such, a wrong channel_mapping and an accepted
// indivisible channel count are findings, and an fp16 bin sum that overflows is the dtype's
// doing. ps_roi_align: a correct kernel raises nothing, the 0 / 0 of an empty adaptive grid
// is named, and a case file with aligned false is refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <numeric>

#include "corpus/case_json.h"
#include "fuzz/campaign.h"
#include "fuzz/ops/op_harness.h"
#include "fuzz/progress.h"
#include "fuzz/runner.h"
#include "kernels/mutants/emulated_targets.h"
#include "model/error.h"
#include "oracles/ps_roi_pool.h"

namespace detfuzz::fuzz {
namespace {

using Target = kernels::Target<RoiPoolProblem>;
using AlignTarget = kernels::Target<RoiAlignProblem>;

std::unique_ptr<OpHarness> harness_of(std::vector<Target> targets) { return make_ps_roi_pool_harness(std::move(targets)); }

// 4 channels of 4 x 4, channel c holding 16 c + 4 h + w; one RoI over the whole map, 2 x 2 bins.
RoiPoolProblem whole_map_problem() {
  std::vector<double> values(64);
  std::iota(values.begin(), values.end(), 0.0);
  return {{1, 4, 4, 4, std::move(values)}, {{0, 0, 0, 4, 4}}, 1.0, 2, 2};
}

bool fails(const compare::Judgement& judgement, const std::string& property = "") {
  return std::any_of(judgement.verdicts.begin(), judgement.verdicts.end(), [&](const compare::Verdict& v) {
    return fails_by_default(v.kind) && (property.empty() || v.property == property);
  });
}

std::string messages(const compare::Judgement& judgement) {
  std::string all;
  for (const auto& v : judgement.verdicts) all += v.property + ": " + v.message + "\n";
  return all;
}

// A target that runs `base` and then changes its outputs.
template <class Problem>
kernels::Target<Problem> altered(kernels::Target<Problem> base, std::function<void(std::vector<HostTensor>&)> change) {
  kernels::Target<Problem> target = base;
  target.name = "altered";
  target.run = [base, change](const Problem& p, DType dtype, Device device) {
    auto outputs = base.run(p, dtype, device);
    change(outputs);
    return outputs;
  };
  return target;
}

reports::Report campaign(std::unique_ptr<OpHarness> harness, std::uint64_t cases) {
  Registry registry;
  registry.ops.push_back(std::move(harness));
  CampaignOptions o;
  o.dtypes = {kFloatDTypes.begin(), kFloatDTypes.end()};
  o.cases_per_cell = cases;
  auto progress = make_progress(ProgressMode::none);
  InProcessRunner runner;
  return run_campaign(registry, o, *progress, runner);
}

TEST(PsRoiPoolOp, ACorrectKernelWithAccumulateTypeArithmeticRaisesNoFailingFinding) {
  const reports::Report report = campaign(harness_of({kernels::emulated_ps_roi_pool("reference")}), 1500);
  for (const auto& f : report.findings) EXPECT_FALSE(f.fails) << f.dtype << " " << f.kind << ": " << f.message;
  for (const auto& cell : report.cells) EXPECT_EQ(cell.cases, 1500u) << cell.dtype;
}

TEST(PsRoiPoolOp, TorchvisionsClipBeforeTheLastRowAndColumnIsAMismatchThatSaysSo) {
  kernels::PsRoiPoolVariant clipped;
  clipped.clips_before_last_pixel = true;
  auto harness = harness_of({kernels::emulated_ps_roi_pool("clipped", clipped)});
  const auto judgement = harness->judge_json(corpus::to_json(whole_map_problem()), "clipped", DType::fp32, Device::cpu);
  ASSERT_TRUE(fails(judgement, "oracle")) << messages(judgement);
  EXPECT_NE(messages(judgement).find("the bin's mean without the map's last row"), std::string::npos)
      << messages(judgement);
}

TEST(PsRoiPoolOp, AMismatchAwayFromTheMapsEdgeIsNotBlamedOnTheClip) {
  kernels::PsRoiPoolVariant shifted;
  shifted.channel_off_by_one = true;
  auto harness = harness_of({kernels::emulated_ps_roi_pool("shifted", shifted)});
  RoiPoolProblem inner = whole_map_problem();
  inner.rois = {{0, 0, 0, 2, 2}};  // bins end at row and column 1 and 2, inside the map
  const auto judgement = harness->judge_json(corpus::to_json(inner), "shifted", DType::fp32, Device::cpu);
  ASSERT_TRUE(fails(judgement, "oracle")) << messages(judgement);
  EXPECT_EQ(messages(judgement).find("last row"), std::string::npos) << messages(judgement);
}

TEST(PsRoiPoolOp, AChannelMappingThatIsNotTheChannelReadIsAFinding) {
  auto wrong = altered<RoiPoolProblem>(kernels::emulated_ps_roi_pool("reference"), [](std::vector<HostTensor>& outputs) {
    outputs[1].values[2] = 1;  // bin (1, 0) reads channel 2
  });
  auto harness = harness_of({wrong});
  const auto judgement = harness->judge_json(corpus::to_json(whole_map_problem()), "altered", DType::fp32, Device::cpu);
  EXPECT_TRUE(fails(judgement, "channel_mapping")) << messages(judgement);
  EXPECT_FALSE(fails(judgement, "oracle")) << messages(judgement);
}

TEST(PsRoiPoolOp, AnIndivisibleChannelCountMustBeRefused) {
  RoiPoolProblem three_channels{{1, 3, 2, 2, std::vector<double>(12, 1.0)}, {{0, 0, 0, 2, 2}}, 1.0, 2, 1};
  auto refusing = harness_of({kernels::emulated_ps_roi_pool("reference")});
  EXPECT_TRUE(refusing->judge_json(corpus::to_json(three_channels), "reference", DType::fp32, Device::cpu).verdicts.empty());
  Target accepting = kernels::emulated_ps_roi_pool("reference");
  accepting.name = "accepting";
  accepting.run = [](const RoiPoolProblem& p, DType dtype, Device) {
    const std::vector<std::int64_t> shape{static_cast<std::int64_t>(p.rois.size()), 1, p.pooled_height, p.pooled_width};
    return std::vector<HostTensor>{{shape, std::string(dtype_name(dtype)), "cpu", {0, 0}}, {shape, "int32", "cpu", {0, 1}}};
  };
  auto harness = harness_of({accepting});
  EXPECT_TRUE(fails(harness->judge_json(corpus::to_json(three_channels), "accepting", DType::fp32, Device::cpu), "channels"));
}

TEST(PsRoiPoolOp, AnFp16BinSumThatOverflowsWhereTheMeanFitsIsTheKernelsDtype) {
  // Four values of 30,000 inside the map: the mean fits fp16, the sum (120,000) does not.
  RoiPoolProblem p{{1, 1, 3, 3, {30000, 30000, 0, 30000, 30000, 0, 0, 0, 0}}, {{0, 0, 0, 2, 2}}, 1.0, 1, 1};
  Target fp16_sum = altered<RoiPoolProblem>(kernels::emulated_ps_roi_pool("reference"), [](std::vector<HostTensor>& outputs) {
    outputs[0].values[0] = std::numeric_limits<double>::infinity();
  });
  fp16_sum.arithmetic = {{"*"}, "a kernel summing in its storage dtype"};
  auto harness = harness_of({fp16_sum});
  const auto judgement = harness->judge_json(corpus::to_json(p), "altered", DType::fp16, Device::cpu);
  ASSERT_FALSE(judgement.verdicts.empty());
  EXPECT_EQ(judgement.verdicts.front().kind, FindingKind::dtype_overflow) << messages(judgement);
}

kernels::Target<RoiAlignProblem> ps_roi_align_twin() {
  kernels::RoiAlignVariant position_sensitive;
  position_sensitive.position_sensitive = true;
  return kernels::emulated_roi_align("reference", position_sensitive);
}

TEST(PsRoiAlignOp, ACorrectKernelWithAccumulateTypeArithmeticRaisesNoFailingFinding) {
  const reports::Report report = campaign(make_ps_roi_align_harness({ps_roi_align_twin()}), 1000);
  for (const auto& f : report.findings) EXPECT_FALSE(f.fails) << f.dtype << " " << f.kind << ": " << f.message;
  for (const auto& cell : report.cells) EXPECT_EQ(cell.cases, 1000u) << cell.dtype;
}

TEST(PsRoiAlignOp, NaNFromAnEmptyAdaptiveGridIsNamedAsTorchvisionsMissingMaxOfTheCount) {
  // A zero-size RoI, adaptive sampling: no samples; the oracle (and RoIAlign) give 0.
  RoiAlignProblem zero{{1, 1, 2, 2, {1, 2, 3, 4}}, {{0, 1, 1, 1, 1}}, 1.0, 1, 1, -1, true};
  auto nan_on_empty = altered<RoiAlignProblem>(ps_roi_align_twin(), [](std::vector<HostTensor>& outputs) {
    outputs[0].values[0] = std::numeric_limits<double>::quiet_NaN();
  });
  auto harness = make_ps_roi_align_harness({nan_on_empty});
  auto judgement = harness->judge_json(corpus::to_json(zero), "altered", DType::fp32, Device::cpu);
  ASSERT_TRUE(fails(judgement, "oracle")) << messages(judgement);
  EXPECT_NE(messages(judgement).find("without roi_align's max(count, 1)"), std::string::npos) << messages(judgement);
  // With a fixed sampling ratio the grid is not empty: a NaN there is not blamed on it.
  zero.sampling_ratio = 2;
  judgement = harness->judge_json(corpus::to_json(zero), "altered", DType::fp32, Device::cpu);
  ASSERT_TRUE(fails(judgement, "oracle")) << messages(judgement);
  EXPECT_EQ(messages(judgement).find("max(count, 1)"), std::string::npos) << messages(judgement);
}

TEST(PsRoiAlignOp, ACaseFileWithAlignedFalseIsRefusedNamingTheField) {
  RoiAlignProblem p{{1, 1, 2, 2, {1, 2, 3, 4}}, {{0, 0, 0, 1, 1}}, 1.0, 1, 1, -1, false};
  auto harness = make_ps_roi_align_harness({ps_roi_align_twin()});
  try {
    harness->judge_json(corpus::to_json(p), "reference", DType::fp32, Device::cpu);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::input);
    EXPECT_NE(std::string(e.what()).find("\"aligned\": true"), std::string::npos) << e.what();
  }
}

TEST(PsRoiAlignOp, ChannelMappingIsCheckedAsForPsRoiPool) {
  RoiAlignProblem p{{1, 4, 4, 4, std::vector<double>(64, 1.0)}, {{0, 0, 0, 4, 4}}, 1.0, 2, 2, 2, true};
  auto wrong = altered<RoiAlignProblem>(ps_roi_align_twin(), [](std::vector<HostTensor>& outputs) {
    std::swap(outputs[1].values[0], outputs[1].values[1]);
  });
  auto harness = make_ps_roi_align_harness({wrong});
  EXPECT_TRUE(fails(harness->judge_json(corpus::to_json(p), "altered", DType::fp32, Device::cpu), "channel_mapping"));
}

}  // namespace
}  // namespace detfuzz::fuzz
