// The run policy (kernels/run_policy.h): repeated runs of one call that differ bit for bit
// are a nondeterministic finding whatever the oracle says, in a judgement and in a campaign;
// the default repeats backward ops on CUDA only; under --deterministic a kernel's refusal makes
// its cell unsupported; and the difference is named with both values.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <stdexcept>

#include "corpus/case_json.h"
#include "fuzz/ops/op_harness.h"
#include "kernels/mutants/emulated_targets.h"
#include "kernels/run_policy.h"
#include "support/in_process_campaign.h"

namespace detfuzz::fuzz {
namespace {

using Target = kernels::Target<PsRoiPoolBackwardProblem>;

// One bin over a 2 x 2 map: a quarter of the gradient on each pixel.
nlohmann::json whole_map_bin() {
  return corpus::to_json(PsRoiPoolBackwardProblem{{{1, 1, 2, 2, {}}, {{0, 0, 0, 2, 2}}, 1.0, 1, 1}, {4.0}});
}

// The correct twin, except that every second call moves one element by one ulp: within
// every tolerance, so the oracle alone would pass both runs.
Target flaky() {
  Target target = kernels::emulated_ps_roi_pool_backward("flaky");
  auto calls = std::make_shared<int>(0);
  target.run = [base = target.run, calls](const PsRoiPoolBackwardProblem& p, DType dtype, Device device) {
    auto outputs = base(p, dtype, device);
    if (++*calls % 2 == 0) outputs.front().values[1] = std::nextafter(outputs.front().values[1], 2.0);
    return outputs;
  };
  return target;
}

std::unique_ptr<OpHarness> harness(Target target, int repeats, bool deterministic = false) {
  kernels::KernelConfig config;
  config.repeats = repeats;
  config.deterministic = deterministic;
  return make_ps_roi_pool_backward_harness(
      kernels::under_run_policy(std::vector<Target>{std::move(target)}, config, "ps_roi_pool_backward"));
}

TEST(RunPolicy, RunsThatDifferAreANondeterministicFindingWhateverTheOracleSays) {
  const compare::Judgement once = harness(flaky(), 1)->judge_json(whole_map_bin(), "flaky", DType::fp32, Device::cpu);
  EXPECT_TRUE(once.verdicts.empty());  // each run alone is within tolerance
  const compare::Judgement twice = harness(flaky(), 2)->judge_json(whole_map_bin(), "flaky", DType::fp32, Device::cpu);
  ASSERT_EQ(twice.verdicts.size(), 1u);
  const compare::Verdict& v = twice.verdicts.front();
  EXPECT_EQ(v.kind, FindingKind::nondeterministic);
  EXPECT_EQ(v.property, "run_to_run");
  EXPECT_NE(v.message.find("run 2 of 2 differs from run 1: output 0 element [0, 0, 0, 1] is 1 (0x1p+0), then "
                           "1.0000000000000002 (0x1.0000000000001p+0); 1 of 4 elements differ"),
            std::string::npos)
      << v.message;
  EXPECT_TRUE(fails_by_default(v.kind));
}

TEST(RunPolicy, ACampaignRecordsAFailingNondeterministicFinding) {
  CampaignOptions o;
  o.dtypes = {DType::fp32};
  o.cases_per_cell = 20;
  const reports::Report report = detfuzz::testing::in_process_campaign(harness(flaky(), 3), o);
  ASSERT_FALSE(report.findings.empty());
  EXPECT_EQ(report.findings.front().kind, "nondeterministic");
  EXPECT_TRUE(report.findings.front().fails);
  EXPECT_TRUE(report.has_failing_finding());
}

TEST(RunPolicy, ByDefaultOnlyBackwardOpsOnCudaRunTwice) {
  const kernels::KernelConfig automatic;
  EXPECT_EQ(kernels::repeats_for(automatic, "roi_align_backward", Device::cuda), 2);
  EXPECT_EQ(kernels::repeats_for(automatic, "roi_align_backward", Device::cpu), 1);
  EXPECT_EQ(kernels::repeats_for(automatic, "roi_align", Device::cuda), 1);
  kernels::KernelConfig asked;
  asked.repeats = 3;
  EXPECT_EQ(kernels::repeats_for(asked, "nms", Device::cpu), 3);
  EXPECT_EQ(kernels::repeats_for(asked, "roi_align_backward", Device::cuda), 3);
}

TEST(RunPolicy, TheFirstDifferenceIsBitForBit) {
  const HostTensor a{{2, 2}, "fp32", "cpu", {0.0, 1.0, std::numeric_limits<double>::quiet_NaN(), 3.0}};
  EXPECT_FALSE(kernels::first_difference({a}, {a}));  // the same NaN is no difference
  HostTensor signed_zero = a;
  signed_zero.values[0] = -0.0;  // equal as numbers, not as bits
  ASSERT_TRUE(kernels::first_difference({a}, {signed_zero}));
  EXPECT_NE(kernels::first_difference({a}, {signed_zero})->find("element [0, 0] is 0 (0x0p+0), then -0 (-0x0p+0)"),
            std::string::npos);
  HostTensor reshaped = a;
  reshaped.shape = {4};
  EXPECT_EQ(*kernels::first_difference({a}, {reshaped}), "output 0 has shape [2, 2], then [4]");
  HostTensor moved = a;
  moved.device = "cuda";
  EXPECT_EQ(*kernels::first_difference({a}, {moved}), "output 0 is fp32 on cpu, then fp32 on cuda");
  EXPECT_EQ(*kernels::first_difference({a}, {a, a}), "1 outputs, then 2");
}

// What LibTorch raises for a kernel without a deterministic implementation (torchvision's
// CUDA roi_align backward calls at::globalContext().alertNotDeterministic).
Target refusing() {
  Target target = kernels::emulated_ps_roi_pool_backward("refusing");
  target.run = [](const PsRoiPoolBackwardProblem&, DType, Device) -> std::vector<HostTensor> {
    throw std::runtime_error(
        "roi_align_backward_kernel does not have a deterministic implementation, but you set "
        "'torch.use_deterministic_algorithms(True)'.\nYou can turn off determinism just for this operation");
  };
  return target;
}

TEST(RunPolicy, UnderDeterministicAKernelsRefusalMakesItsCellUnsupportedNamingIt) {
  const auto reason = harness(refusing(), 1, true)->unsupported_reason("refusing", DType::fp32, Device::cpu);
  ASSERT_TRUE(reason.has_value());
  EXPECT_EQ(*reason,
            "no deterministic implementation (--deterministic): roi_align_backward_kernel does not have a deterministic "
            "implementation, but you set 'torch.use_deterministic_algorithms(True)'.");
  // Without --deterministic the same exception is the kernel's own: a finding, not a gap.
  EXPECT_FALSE(harness(refusing(), 1, false)->unsupported_reason("refusing", DType::fp32, Device::cpu));
}

}  // namespace
}  // namespace detfuzz::fuzz
