// The campaign against targets with planted bugs (tests/kernels/mutants/emulated_targets.h): each
// bug class must be caught, with the right kind and a small minimized case, and the
// correct implementations must raise no false alarm.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <atomic>
#include <sstream>
#include <thread>

#include "fuzz/campaign.h"
#include "fuzz/runner.h"
#include "model/error.h"
#include "kernels/mutants/emulated_targets.h"

namespace detfuzz::fuzz {
namespace {

using kernels::BoxIouVariant;
using kernels::NmsVariant;

// A variant with one planted deviation switched on.
template <class Variant>
Variant flag(bool Variant::*deviation) {
  Variant variant;
  variant.*deviation = true;
  return variant;
}

class SilentProgress final : public ProgressSink {
 public:
  void tick(const ProgressSnapshot&) override {}
  void event(const std::string& line) override { events.push_back(line); }
  void finish() override {}
  std::vector<std::string> events;
};

Registry nms_registry(std::vector<kernels::Target<NmsProblem>> targets) {
  Registry registry;
  registry.ops.push_back(make_nms_harness(std::move(targets)));
  return registry;
}

Registry box_iou_registry(std::vector<kernels::Target<BoxIouProblem>> targets) {
  Registry registry;
  registry.ops.push_back(make_box_iou_harness(std::move(targets)));
  return registry;
}

CampaignOptions options(std::vector<DType> dtypes, std::uint64_t cases) {
  CampaignOptions o;
  o.dtypes = std::move(dtypes);
  o.cases_per_cell = cases;
  o.minimize_budget_s = 20;
  return o;
}

reports::Report run(const Registry& registry, const CampaignOptions& o) {
  SilentProgress progress;
  InProcessRunner runner;
  return run_campaign(registry, o, progress, runner);
}

const reports::FindingRecord* find(const reports::Report& report, const std::string& kind,
                                   const std::string& dtype = "") {
  for (const auto& f : report.findings)
    if (f.kind == kind && (dtype.empty() || f.dtype == dtype)) return &f;
  return nullptr;
}

std::string kinds(const reports::Report& report) {
  std::string all;
  for (const auto& f : report.findings) all += f.dtype + ":" + f.kind + "/" + f.property + " " + f.message + "\n";
  return all;
}

TEST(Campaign, CorrectNmsRaisesNoFalseAlarmInAnyDtype) {
  Registry registry = nms_registry({kernels::emulated_nms("reference")});
  reports::Report report = run(registry, options({kFloatDTypes.begin(), kFloatDTypes.end()}, 600));
  EXPECT_EQ(report.total_cases(), 4u * 600);
  // Areas beyond fp32's range are range hazards (not failing), not false alarms.
  for (const auto& f : report.findings) EXPECT_EQ(f.kind, "overflow") << kinds(report);
  EXPECT_FALSE(report.has_failing_finding()) << kinds(report);
}

// --profile's numbers: each phase measured where it is spent; `other` is the rest of the
// cell's wall time, so the phases add up to it. A kernel, an oracle or a generator that
// stopped being timed would show 0 here.
TEST(Campaign, ProfileSplitsEachCellsWallTimeIntoPhasesThatAddUp) {
  Registry registry = nms_registry({kernels::emulated_nms("ge", flag(&NmsVariant::greater_equal))});
  reports::Report report = run(registry, options({DType::fp32}, 800));
  ASSERT_EQ(report.cells.size(), 1u);
  const auto& cell = report.cells.front();
  double sum = 0;
  for (const char* phase : reports::kProfilePhases) {
    ASSERT_TRUE(cell.profile_s.count(phase)) << phase;
    EXPECT_GE(cell.profile_s.at(phase), 0.0) << phase;
    sum += cell.profile_s.at(phase);
  }
  EXPECT_NEAR(sum, cell.elapsed_s, 1e-6 + 1e-3 * cell.elapsed_s);
  EXPECT_GT(cell.profile_s.at("generation"), 0.0);
  EXPECT_GT(cell.profile_s.at("kernel"), 0.0);
  EXPECT_GT(cell.profile_s.at("oracle"), 0.0);
  EXPECT_GT(cell.profile_s.at("minimization"), 0.0);  // the >= mutant is found and shrunk
  std::ostringstream table;
  reports::print_profile(report, table);
  EXPECT_NE(table.str().find("nms/ge/fp32"), std::string::npos) << table.str();
  EXPECT_NE(table.str().find("all cells"), std::string::npos) << table.str();
}

TEST(Campaign, CatchesGreaterEqualAtTheThresholdWithATwoBoxCase) {
  Registry registry = nms_registry({kernels::emulated_nms("ge", flag(&NmsVariant::greater_equal))});
  reports::Report report = run(registry, options({DType::fp32}, 1000));
  const auto* finding = find(report, "mismatch");
  ASSERT_NE(finding, nullptr) << kinds(report);
  EXPECT_EQ(finding->property, "oracle");
  EXPECT_EQ(finding->size, 2u) << finding->input.dump();
  EXPECT_TRUE(report.has_failing_finding());
  EXPECT_EQ(report.cells.at(0).status, reports::CellStatus::failed);
}

TEST(Campaign, CatchesNmsThatAssumesSortedInput) {
  Registry registry = nms_registry({kernels::emulated_nms("unsorted", flag(&NmsVariant::assumes_sorted))});
  reports::Report report = run(registry, options({DType::fp64}, 500));
  const auto* finding = find(report, "mismatch");
  if (!finding) finding = find(report, "order");
  ASSERT_NE(finding, nullptr) << kinds(report);
  EXPECT_LE(finding->size, 3u) << finding->input.dump();
}

TEST(Campaign, CatchesFp16AreaOverflowInNms) {
  Registry registry = nms_registry({kernels::emulated_nms("fp16_areas", flag(&NmsVariant::storage_arithmetic))});
  reports::Report report = run(registry, options({DType::fp16}, 1500));
  const auto* finding = find(report, "mismatch", "fp16");
  ASSERT_NE(finding, nullptr) << kinds(report);
  EXPECT_LE(finding->size, 3u) << finding->input.dump();
  EXPECT_NE(find(report, "precision", "fp16"), nullptr) << kinds(report);
}

TEST(Campaign, CountDependentBugsMinimizeToJustAboveTheThresholdWithPlainBoxes) {
  kernels::NmsVariant variant;
  variant.wrong_above_count = 40;
  Registry registry = nms_registry({kernels::emulated_nms("split_path", variant)});
  CampaignOptions o = options({DType::fp32}, 300);
  o.max_boxes = 64;
  reports::Report report = run(registry, o);
  const auto* finding = find(report, "mismatch");
  ASSERT_NE(finding, nullptr) << kinds(report);
  EXPECT_GT(finding->original_size, 41u);
  EXPECT_EQ(finding->size, 41u) << finding->input.dump();
  for (const auto& box : finding->input["boxes"])
    for (const auto& coordinate : box) EXPECT_EQ(std::floor(coordinate.get<double>()), coordinate.get<double>());
}

TEST(Campaign, ReportsADtypeContractBreachOnTheFirstCase) {
  Registry registry = nms_registry({kernels::emulated_nms("int32", flag(&NmsVariant::int32_output))});
  reports::Report report = run(registry, options({DType::fp32}, 5));
  const auto* finding = find(report, "dtype");
  ASSERT_NE(finding, nullptr);
  EXPECT_EQ(finding->found_after_cases, 1u);
  EXPECT_EQ(finding->occurrences, 5u);
  EXPECT_EQ(report.findings.size(), 1u);  // one signature, counted five times
}

TEST(Campaign, KernelExceptionsAreFindingsWithTheirMessage) {
  Registry registry = nms_registry({kernels::emulated_nms("raises", flag(&NmsVariant::throws_on_empty))});
  reports::Report report = run(registry, options({DType::fp32}, 300));
  const auto* finding = find(report, "exception");
  ASSERT_NE(finding, nullptr) << kinds(report);
  EXPECT_NE(finding->message.find("cannot handle 0 boxes"), std::string::npos);
  EXPECT_EQ(finding->size, 0u);
}

TEST(Campaign, UnsupportedDtypesAndDevicesAreCellsNotFindings) {
  Registry registry = nms_registry({kernels::emulated_nms("fp32_only", flag(&NmsVariant::unsupported_low_precision))});
  CampaignOptions o = options({DType::fp16, DType::fp32}, 20);
  o.devices = {Device::cpu, Device::cuda};
  reports::Report report = run(registry, o);
  ASSERT_EQ(report.cells.size(), 4u);
  std::map<std::string, std::string> status;
  for (const auto& cell : report.cells) status[cell.dtype + "/" + cell.device] = to_string(cell.status);
  EXPECT_EQ(status["fp16/cpu"], "unsupported");
  EXPECT_EQ(status["fp32/cpu"], "ok");
  EXPECT_EQ(status["fp32/cuda"], "unsupported");
  EXPECT_TRUE(report.findings.empty()) << kinds(report);
  for (const auto& cell : report.cells) {
    if (cell.status == reports::CellStatus::unsupported) {
      EXPECT_FALSE(cell.reason.empty());
    }
  }
}

TEST(Campaign, SameSeedSameFindingsOtherSeedOtherCases) {
  Registry registry = nms_registry({kernels::emulated_nms("ge", flag(&NmsVariant::greater_equal))});
  CampaignOptions o = options({DType::fp32}, 400);
  reports::Report a = run(registry, o), b = run(registry, o);
  ASSERT_EQ(a.findings.size(), b.findings.size());
  for (std::size_t i = 0; i < a.findings.size(); ++i) {
    EXPECT_EQ(a.findings[i].case_seed, b.findings[i].case_seed);
    EXPECT_EQ(a.findings[i].input, b.findings[i].input);
    EXPECT_EQ(a.findings[i].occurrences, b.findings[i].occurrences);
  }
  EXPECT_NE(case_seed(1, "nms", DType::fp32, 0), case_seed(2, "nms", DType::fp32, 0));
  EXPECT_NE(case_seed(1, "nms", DType::fp32, 0), case_seed(1, "nms", DType::fp16, 0));
  EXPECT_NE(case_seed(1, "nms", DType::fp32, 0), case_seed(1, "nms", DType::fp32, 1));
}

// An in-process lane that counts the batches it ran and remembers which thread ran them.
class CountingLane final : public CaseRunner {
 public:
  std::vector<CaseOutcome> run_cases(const OpHarness& op, const std::vector<CaseRequest>& requests) override {
    ++batches;
    thread = std::this_thread::get_id();
    return inner.run_cases(op, requests);
  }
  compare::Judgement judge_input(const OpHarness& op, const CaseRequest& request, const nlohmann::json& input) override {
    return inner.judge_input(op, request, input);
  }
  std::optional<std::string> unsupported_reason(const OpHarness& op, const std::string& target, DType dtype,
                                                Device device) override {
    return inner.unsupported_reason(op, target, dtype, device);
  }
  InputJudge input_judge(const OpHarness& op, const CaseRequest& request) override {
    return inner.input_judge(op, request);
  }
  Evaluation evaluate(const OpHarness& op, const nlohmann::json& input, const std::string& target, DType dtype,
                      Device device) override {
    return inner.evaluate(op, input, target, dtype, device);
  }
  InProcessRunner inner;
  std::atomic<int> batches{0};
  std::thread::id thread;
};

TEST(Campaign, LanesRunCellsSideBySideAndFindWhatOneLaneFinds) {
  Registry registry = nms_registry({kernels::emulated_nms("reference"),
                                    kernels::emulated_nms("ge", flag(&NmsVariant::greater_equal)),
                                    kernels::emulated_nms("unsorted", flag(&NmsVariant::assumes_sorted))});
  CampaignOptions o = options({kFloatDTypes.begin(), kFloatDTypes.end()}, 300);
  o.targets = {"reference", "ge", "unsorted"};
  const reports::Report one = run(registry, o);
  SilentProgress progress;
  CountingLane first, second;
  const reports::Report two = run_campaign(registry, o, progress, std::vector<CaseRunner*>{&first, &second});
  // Both lanes ran cells, on two threads.
  EXPECT_GT(first.batches.load(), 0);
  EXPECT_GT(second.batches.load(), 0);
  EXPECT_NE(first.thread, second.thread);
  EXPECT_EQ(two.config["jobs"], 2);
  // Each cell's cases, errors and findings are those of the one-lane campaign, listed in
  // the same (cell) order.
  ASSERT_EQ(one.cells.size(), two.cells.size());
  for (std::size_t i = 0; i < one.cells.size(); ++i) {
    EXPECT_EQ(one.cells[i].target + one.cells[i].dtype, two.cells[i].target + two.cells[i].dtype);
    EXPECT_EQ(one.cells[i].cases, two.cells[i].cases);
    EXPECT_EQ(one.cells[i].findings, two.cells[i].findings);
    EXPECT_EQ(one.cells[i].max_normalized_error, two.cells[i].max_normalized_error);
    EXPECT_EQ(one.cells[i].status, two.cells[i].status);
  }
  ASSERT_GE(one.findings.size(), 2u) << kinds(one);
  ASSERT_EQ(one.findings.size(), two.findings.size()) << kinds(one) << "---\n" << kinds(two);
  for (std::size_t i = 0; i < one.findings.size(); ++i) {
    EXPECT_EQ(one.findings[i].signature, two.findings[i].signature);
    EXPECT_EQ(one.findings[i].case_index, two.findings[i].case_index);
    EXPECT_EQ(one.findings[i].occurrences, two.findings[i].occurrences);
    EXPECT_EQ(one.findings[i].input, two.findings[i].input);
  }
}

TEST(Campaign, CellsCarryTheirErrorHistogramAndSampledMagnitudes) {
  Registry registry = box_iou_registry({kernels::emulated_box_iou("reference")});
  const reports::Report report = run(registry, options({DType::fp32}, 400));
  ASSERT_EQ(report.cells.size(), 1u);
  const auto& cell = report.cells[0];
  std::uint64_t histogram_cases = 0;
  for (auto n : cell.error_histogram) histogram_cases += n;
  EXPECT_EQ(histogram_cases, 400u);  // every box_iou case compares a continuous output
  // About one case in kMagnitudeSampling, chosen by its seed.
  EXPECT_GT(cell.error_vs_magnitude.size(), 400 / kMagnitudeSampling / 2);
  EXPECT_LT(cell.error_vs_magnitude.size(), 400 / kMagnitudeSampling * 2);
  for (const auto& [magnitude, error] : cell.error_vs_magnitude) {
    EXPECT_GE(magnitude, 0.0);
    EXPECT_LE(error, cell.max_normalized_error);
  }
}

TEST(Campaign, BudgetIsSharedByEveryCell) {
  Registry registry = nms_registry({kernels::emulated_nms("reference")});
  CampaignOptions o;
  o.budget_s = 1.0;
  reports::Report report = run(registry, o);
  EXPECT_LT(report.elapsed_s, 3.0);
  for (const auto& cell : report.cells) EXPECT_GT(cell.elapsed_s, 0.1) << cell.dtype;
}

bool has_property(const reports::Report& report, const std::string& property) {
  return std::any_of(report.findings.begin(), report.findings.end(),
                     [&](const reports::FindingRecord& f) { return f.property == property; });
}

TEST(Campaign, OracleFreePropertiesCatchOutputsThatChangeUnderExactTransformations) {
  Registry nms = nms_registry({kernels::emulated_nms("flaky", flag(&NmsVariant::corrupt_every_third_call))});
  reports::Report nms_report = run(nms, options({DType::fp32}, 300));
  EXPECT_TRUE(has_property(nms_report, "scale_invariance")) << kinds(nms_report);
  EXPECT_TRUE(has_property(nms_report, "permutation_invariance")) << kinds(nms_report);
  Registry iou = box_iou_registry({kernels::emulated_box_iou("flaky", flag(&BoxIouVariant::corrupt_every_third_call))});
  reports::Report iou_report = run(iou, options({DType::fp32}, 300));
  EXPECT_TRUE(has_property(iou_report, "scale_invariance")) << kinds(iou_report);
  EXPECT_TRUE(has_property(iou_report, "symmetry")) << kinds(iou_report);
}

TEST(Campaign, NondeterministicKernelFindingsAreKeptAndFlagged) {
  Registry nms = nms_registry({kernels::emulated_nms("flaky", flag(&NmsVariant::corrupt_every_third_call))});
  reports::Report report = run(nms, options({DType::fp32}, 300));
  bool flagged = std::any_of(report.findings.begin(), report.findings.end(), [](const reports::FindingRecord& f) {
    return !f.reproducible && f.message.find("nondeterministic") != std::string::npos && !f.input.is_null();
  });
  EXPECT_TRUE(flagged) << kinds(report);
}

TEST(Campaign, CorrectBoxIouRaisesNoFailingFinding) {
  Registry registry = box_iou_registry({kernels::emulated_box_iou("reference")});
  reports::Report report = run(registry, options({kFloatDTypes.begin(), kFloatDTypes.end()}, 300));
  for (const auto& f : report.findings) EXPECT_EQ(f.kind, "overflow") << kinds(report);
  for (const auto& cell : report.cells) EXPECT_LT(cell.max_normalized_error, 1.0) << cell.dtype;
}

TEST(Campaign, BoxIouInStorageArithmeticIsPrecisionAndNanInFp16) {
  Registry registry = box_iou_registry({kernels::emulated_box_iou("fp16", flag(&BoxIouVariant::storage_arithmetic))});
  reports::Report report = run(registry, options({DType::fp16}, 600));
  EXPECT_NE(find(report, "precision"), nullptr) << kinds(report);
  const auto* nan = find(report, "nan");
  ASSERT_NE(nan, nullptr) << kinds(report);
  EXPECT_LE(nan->size, 2u) << nan->input.dump();
}

TEST(Campaign, BoxIouContractBreaches) {
  Registry leak = box_iou_registry({kernels::emulated_box_iou("leak", flag(&BoxIouVariant::fp64_output))});
  EXPECT_NE(find(run(leak, options({DType::fp32}, 50)), "dtype"), nullptr);
  Registry transposed = box_iou_registry({kernels::emulated_box_iou("t", flag(&BoxIouVariant::transposed))});
  EXPECT_NE(find(run(transposed, options({DType::fp32}, 200)), "shape"), nullptr);
}

Registry roi_align_registry(kernels::Target<RoiAlignProblem> target) {
  Registry registry;
  registry.ops.push_back(make_roi_align_harness({std::move(target)}));
  return registry;
}

TEST(Campaign, CorrectRoiAlignWithAccumulateTypeArithmeticRaisesNoFailingFinding) {
  Registry registry = roi_align_registry(kernels::emulated_roi_align("reference"));
  reports::Report report = run(registry, options({kFloatDTypes.begin(), kFloatDTypes.end()}, 400));
  for (const auto& f : report.findings) EXPECT_EQ(f.kind, "overflow") << kinds(report);
  // fp16/bf16 outputs round to their dtype: up to exactly half an ulp, normalized error 1.
  for (const auto& cell : report.cells) EXPECT_LE(cell.max_normalized_error, 1.0) << cell.dtype;
}

// The Faster R-CNN debugging stories: spatial_scale ignored, the aligned shift dropped,
// RoIs read from the wrong image of the batch.
TEST(Campaign, CatchesRoiAlignIgnoringSpatialScaleAlignedOrBatchIndexWithOneRoi) {
  for (auto deviation : {&kernels::RoiAlignVariant::ignores_spatial_scale, &kernels::RoiAlignVariant::ignores_aligned,
                         &kernels::RoiAlignVariant::ignores_batch_index}) {
    Registry registry = roi_align_registry(kernels::emulated_roi_align("broken", flag(deviation)));
    reports::Report report = run(registry, options({DType::fp32}, 500));
    const auto* finding = find(report, "mismatch");
    ASSERT_NE(finding, nullptr) << kinds(report);
    EXPECT_EQ(finding->size, 1u) << finding->input.dump();
    EXPECT_LT(finding->found_after_s + finding->minimize_s, 5.0);
  }
}

TEST(Campaign, UnknownNamesAreUsageErrorsListingTheKnownOnes) {
  Registry registry = nms_registry({kernels::emulated_nms("reference")});
  CampaignOptions o;
  o.ops = {"roi_align"};
  try {
    plan_cells(registry, o);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::usage);
    EXPECT_NE(std::string(e.what()).find("nms"), std::string::npos);
  }
  o.ops = {};
  o.targets = {"cudnn"};
  EXPECT_THROW(plan_cells(registry, o), Error);
}

}  // namespace
}  // namespace detfuzz::fuzz
