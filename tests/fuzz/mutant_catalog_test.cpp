// The mutant catalog (kernels/mutants/catalog.h) against the registry, and for every
// mutant the input on which it differs from its correct twin: the mutant gets a failing
// verdict there, the twin none. The crash and hang mutants are shown on their inputs by
// the CLI tests and corpus/cases/nms-fp32-crash-* (they would take this process with them).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "fuzz/runner.h"
#include "fuzz/selftest.h"
#include "kernels/mutants/catalog.h"
#include "model/error.h"

namespace detfuzz::fuzz {
namespace {

const Registry& registry() {
  static const Registry instance = default_registry(kernels::KernelConfig{});
  return instance;
}

bool has_failing_verdict(const compare::Judgement& judgement) {
  return std::any_of(judgement.verdicts.begin(), judgement.verdicts.end(),
                     [](const compare::Verdict& v) { return fails_by_default(v.kind); });
}

struct Witness {
  DType dtype;
  nlohmann::json input;
};

nlohmann::json split_threshold_boxes() {
  // 10,000 disjoint unit boxes in 100 classes, fp32 boxes with fp16 scores (autocast).
  nlohmann::json boxes = nlohmann::json::array(), scores = nlohmann::json::array(), classes = nlohmann::json::array();
  for (int i = 0; i < 10000; ++i) {
    boxes.push_back({2.0 * (i % 100), 2.0 * (i / 100), 2.0 * (i % 100) + 1, 2.0 * (i / 100) + 1});
    scores.push_back(static_cast<double>(i % 997) / 1024);
    classes.push_back(i % 100);
  }
  return {{"boxes", boxes}, {"scores", scores},         {"classes", classes},
          {"iou_threshold", 0.5}, {"class_agnostic", false}, {"max_num", -1}, {"score_dtype", "fp16"}};
}

nlohmann::json feature_map_4x4() {
  nlohmann::json values = nlohmann::json::array();
  for (int i = 0; i < 16; ++i) values.push_back(static_cast<double>(i * i % 7));
  return {{"shape", {1, 1, 4, 4}}, {"values", values}};
}

// Four channels of 4 x 4 for a 2 x 2 position-sensitive grid: each channel its own values.
nlohmann::json feature_map_4x4x4() {
  nlohmann::json values = nlohmann::json::array();
  for (int i = 0; i < 64; ++i) values.push_back(static_cast<double>(i * i % 11));
  return {{"shape", {1, 4, 4, 4}}, {"values", values}};
}

// A 1 x 1 x 1 x 2 map [1, 5] under a 1 x 1 kernel of weight 1: the offsets (dy of both
// output pixels, then dx of both) decide which value each output reads.
nlohmann::json deform_conv2d_1x2(std::vector<double> offset, bool use_mask, std::vector<double> mask) {
  return {{"input_shape", {1, 1, 1, 2}}, {"input", {1.0, 5.0}},   {"out_channels", 1},   {"kernel", {1, 1}},
          {"stride", {1, 1}},           {"padding", {0, 0}},     {"dilation", {1, 1}},  {"groups", 1},
          {"offset_groups", 1},         {"use_mask", use_mask},  {"weight", {1.0}},     {"offset", offset},
          {"mask", mask},               {"bias", {0.0}}};
}

// The input each mutant gets wrong and its twin right, in words and in the case format.
const std::map<std::string, Witness>& witnesses() {
  static const std::map<std::string, Witness> table{
      // IoU exactly 1/2 at threshold 1/2: `>` keeps both, `>=` suppresses the second.
      {"mutant:nms_greater_equal",
       {DType::fp32, {{"boxes", {{0, 0, 1, 1}, {0, 0, 1, 2}}}, {"scores", {0.9, 0.8}}, {"iou_threshold", 0.5}}}},
      // Two identical boxes, the better one second: keep [1], not [0].
      {"mutant:nms_assumes_sorted",
       {DType::fp32, {{"boxes", {{0, 0, 1, 1}, {0, 0, 1, 1}}}, {"scores", {0.1, 0.9}}, {"iou_threshold", 0.5}}}},
      // Two identical 256 x 256 boxes: an area of 65,536 is inf in fp16, the IoU 0.
      {"mutant:nms_fp16_areas",
       {DType::fp32, {{"boxes", {{0, 0, 256, 256}, {0, 0, 256, 256}}}, {"scores", {0.9, 0.8}}, {"iou_threshold", 0.5}}}},
      // Two identical boxes, one block: the second is suppressed by a word of the first's own block.
      {"mutant:native_nms_reduction_skips_own_block",
       {DType::fp16, {{"boxes", {{0, 0, 1, 1}, {0, 0, 1, 1}}}, {"scores", {0.5, 0.25}}, {"iou_threshold", 0.5}}}},
      {"mutant:nms_raises_on_empty",
       {DType::fp32,
        {{"boxes", nlohmann::json::array()}, {"scores", nlohmann::json::array()}, {"iou_threshold", 0.5}}}},
      {"mutant:batched_nms_split_score_buffer", {DType::fp32, split_threshold_boxes()}},
      // Two identical 1000-pixel boxes of class 70: the offset 70 x 1001 is inf in fp16.
      {"mutant:batched_nms_fp16_offsets",
       {DType::fp32,
        {{"boxes", {{0, 0, 1000, 1000}, {0, 0, 1000, 1000}}},
         {"scores", {0.9, 0.8}},
         {"classes", {70, 70}},
         {"iou_threshold", 0.5},
         {"class_agnostic", false},
         {"max_num", -1}}}},
      // A unit box against itself: IoU 1, or 1 / 7 with +1 in the areas only.
      {"mutant:box_iou_legacy_plus_one", {DType::fp32, {{"boxes1", {{0, 0, 1, 1}}}, {"boxes2", {{0, 0, 1, 1}}}}}},
      {"mutant:box_iou_empty_shape", {DType::fp32, {{"boxes1", {{0, 0, 1, 1}}}, {"boxes2", nlohmann::json::array()}}}},
      {"mutant:box_iou_fp64_output", {DType::fp32, {{"boxes1", {{0, 0, 1, 1}}}, {"boxes2", {{0, 0, 2, 2}}}}}},
      // dw = 10 is past log(1000 / 16) = 4.135: exp(10) instead of exp(4.135) times the width.
      {"mutant:box_decode_unclamped",
       {DType::fp32,
        {{"mode", "decode"},
         {"boxes", {{0, 0, 16, 16}}},
         {"deltas", {{0, 0, 10, 0}}},
         {"weights", {1, 1, 1, 1}},
         {"clip", 4.135166556742356}}}},
      // Two points: union 0, enclosing area 0; eps makes the loss 1, without it 0 / 0.
      {"mutant:giou_loss_without_eps",
       {DType::fp32, {{"boxes1", {{0, 0, 0, 0}}}, {"boxes2", {{0, 0, 0, 0}}}, {"eps", 1e-7}, {"reduction", "sum"}}}},
      // The same degenerate pair: its gradient is finite with eps, 0 / 0 without.
      {"mutant:giou_loss_backward_without_eps",
       {DType::fp32, {{"boxes1", {{0, 0, 0, 0}}}, {"boxes2", {{0, 0, 0, 0}}}, {"eps", 1e-7}, {"reduction", "sum"}}}},
      // Disjoint boxes: IoU is 0 whatever they do, only the enclosing penalty has a gradient.
      {"mutant:giou_loss_backward_iou_only",
       {DType::fp32, {{"boxes1", {{0, 0, 1, 1}}}, {"boxes2", {{3, 0, 4, 1}}}, {"eps", 1e-7}, {"reduction", "none"}}}},
      // Two residuals under the mean: gradients of 1/2 each, not 1.
      {"mutant:regression_loss_backward_mean_as_sum",
       {DType::fp32,
        {{"loss", "smooth_l1"}, {"input", {3.0, -3.0}}, {"target", {0.0, 0.0}}, {"beta", 1.0}, {"reduction", "mean"}}}},
      // A zero residual under beta 0: any subgradient in [-1, 1], never NaN.
      {"mutant:smooth_l1_backward_zero_beta_nan",
       {DType::fp32,
        {{"loss", "smooth_l1"}, {"input", {0.5, 2.0}}, {"target", {0.5, 0.0}}, {"beta", 0.0}, {"reduction", "sum"}}}},
      // Two proposals, both background: no positives, box loss 0 / 2 = 0, or 0 / 0.
      {"mutant:fast_rcnn_loss_unguarded",
       {DType::fp32,
        {{"classes", 2},
         {"class_logits", {1, 0, 0, 1}},
         {"labels", {0, 0}},
         {"box_regression", std::vector<double>(16, 0.5)},
         {"regression_targets", std::vector<double>(8, 0.25)}}}},
      // One ground truth, two predictions at 0.5 and 0.1: the low-quality step restores the
      // first (its best); per prediction, it also restores the second (-1 -> 0).
      {"mutant:matcher_swapped_low_quality_axis",
       {DType::fp32,
        {{"ground_truths", 1},
         {"predictions", 2},
         {"quality", {0.5, 0.1}},
         {"high", 0.7},
         {"low", 0.3},
         {"allow_low_quality_matches", true}}}},
      {"mutant:roi_align_ignores_spatial_scale",
       {DType::fp32,
        {{"input", feature_map_4x4()},
         {"rois", {{0, 0, 0, 4, 4}}},
         {"spatial_scale", 0.5},
         {"pooled_height", 1},
         {"pooled_width", 1},
         {"sampling_ratio", 2},
         {"aligned", false}}}},
      {"mutant:roi_align_ignores_aligned",
       {DType::fp32,
        {{"input", feature_map_4x4()},
         {"rois", {{0, 1, 1, 3, 3}}},
         {"spatial_scale", 1.0},
         {"pooled_height", 2},
         {"pooled_width", 2},
         {"sampling_ratio", 2},
         {"aligned", true}}}},
      {"mutant:roi_pool_ignores_spatial_scale",
       {DType::fp32,
        {{"input", feature_map_4x4()},
         {"rois", {{0, 0, 0, 6, 6}}},
         {"spatial_scale", 0.5},
         {"pooled_height", 2},
         {"pooled_width", 2}}}},
      {"mutant:ps_roi_align_ignores_spatial_scale",
       {DType::fp32,
        {{"input", feature_map_4x4()},
         {"rois", {{0, 0, 0, 4, 4}}},
         {"spatial_scale", 0.5},
         {"pooled_height", 1},
         {"pooled_width", 1},
         {"sampling_ratio", 2},
         {"aligned", true}}}},
      {"mutant:ps_roi_align_channel_off_by_one",
       {DType::fp32,
        {{"input", feature_map_4x4x4()},
         {"rois", {{0, 0, 0, 4, 4}}},
         {"spatial_scale", 1.0},
         {"pooled_height", 2},
         {"pooled_width", 2},
         {"sampling_ratio", 2},
         {"aligned", true}}}},
      // Scale 0.5: the RoI covers rows and columns 0..2; read at scale 1 it covers the map.
      {"mutant:ps_roi_pool_ignores_spatial_scale",
       {DType::fp32,
        {{"input", feature_map_4x4()},
         {"rois", {{0, 0, 0, 6, 6}}},
         {"spatial_scale", 0.5},
         {"pooled_height", 1},
         {"pooled_width", 1}}}},
      // Each of the four bins reads its own channel; the next channel holds other values.
      {"mutant:ps_roi_pool_channel_off_by_one",
       {DType::fp32,
        {{"input", feature_map_4x4x4()},
         {"rois", {{0, 0, 0, 4, 4}}},
         {"spatial_scale", 1.0},
         {"pooled_height", 2},
         {"pooled_width", 2}}}},
      // The RoI covers the whole map: its lower right bin spans rows and columns 2..3.
      {"mutant:ps_roi_pool_clips_before_last_pixel",
       {DType::fp32,
        {{"input", feature_map_4x4x4()},
         {"rois", {{0, 0, 0, 4, 4}}},
         {"spatial_scale", 1.0},
         {"pooled_height", 2},
         {"pooled_width", 2}}}},
      // One sample at (1.5, 1.5): a quarter of the gradient to each of four pixels, the last
      // corner's quarter dropped.
      {"mutant:roi_align_backward_drops_corner",
       {DType::fp32,
        {{"input_shape", {1, 1, 4, 4}},
         {"rois", {{0, 0, 0, 3, 3}}},
         {"spatial_scale", 1.0},
         {"pooled_height", 1},
         {"pooled_width", 1},
         {"sampling_ratio", 1},
         {"aligned", false},
         {"grad", {1.0}}}}},
      // Scale 0.5: the sample sits at (1.5, 1.5); read at scale 1 it sits at (3, 3).
      {"mutant:roi_align_backward_ignores_spatial_scale",
       {DType::fp32,
        {{"input_shape", {1, 1, 4, 4}},
         {"rois", {{0, 0, 0, 6, 6}}},
         {"spatial_scale", 0.5},
         {"pooled_height", 1},
         {"pooled_width", 1},
         {"sampling_ratio", 1},
         {"aligned", false},
         {"grad", {1.0}}}}},
      // Four bins, each its own channel; the next channel gets its gradient instead.
      {"mutant:ps_roi_align_backward_channel_off_by_one",
       {DType::fp32,
        {{"input_shape", {1, 4, 4, 4}},
         {"rois", {{0, 0, 0, 4, 4}}},
         {"spatial_scale", 1.0},
         {"pooled_height", 2},
         {"pooled_width", 2},
         {"sampling_ratio", 1},
         {"aligned", true},
         {"grad", {1.0, 2.0, 3.0, 4.0}}}}},
      // Two bins of one RoI routed to the same pixel: their sum, not the last one's value.
      {"mutant:roi_pool_backward_assigns",
       {DType::fp32,
        {{"input_shape", {1, 1, 2, 2}},
         {"rois", {{0, 0, 0, 1, 1}}},
         {"spatial_scale", 1.0},
         {"pooled_height", 1},
         {"pooled_width", 2},
         {"grad", {1.0, 2.0}},
         {"argmax", {3, 3}}}}},
      {"mutant:roi_pool_backward_channel_off_by_one",
       {DType::fp32,
        {{"input_shape", {1, 2, 2, 2}},
         {"rois", {{0, 0, 0, 1, 1}}},
         {"spatial_scale", 1.0},
         {"pooled_height", 1},
         {"pooled_width", 1},
         {"grad", {1.0, 2.0}},
         {"argmax", {0, 0}}}}},
      // Four 1 x 1 bins of a 2 x 2 map, each its own channel; the next channel gets its share instead.
      {"mutant:ps_roi_pool_backward_channel_off_by_one",
       {DType::fp32,
        {{"input_shape", {1, 4, 2, 2}},
         {"rois", {{0, 0, 0, 2, 2}}},
         {"spatial_scale", 1.0},
         {"pooled_height", 2},
         {"pooled_width", 2},
         {"grad", {1.0, 2.0, 3.0, 4.0}}}}},
      // One bin over the whole 2 x 2 map: its last row and column get a quarter each, not nothing.
      {"mutant:ps_roi_pool_backward_clips_before_last_pixel",
       {DType::fp32,
        {{"input_shape", {1, 1, 2, 2}},
         {"rois", {{0, 0, 0, 2, 2}}},
         {"spatial_scale", 1.0},
         {"pooled_height", 1},
         {"pooled_width", 1},
         {"grad", {4.0}}}}},
      // Samples at 0.5 and 2.5 (aligned): every corner weighs a quarter.
      {"mutant:ps_roi_align_backward_drops_corner",
       {DType::fp32,
        {{"input_shape", {1, 4, 4, 4}},
         {"rois", {{0, 0, 0, 4, 4}}},
         {"spatial_scale", 1.0},
         {"pooled_height", 2},
         {"pooled_width", 2},
         {"sampling_ratio", 1},
         {"aligned", true},
         {"grad", {1.0, 2.0, 3.0, 4.0}}}}},
      // A 1 x 2 map and a 1 x 1 kernel, each output pixel moved one column right (dy 0,
      // dx 1: both read the value 5); read as (dx, dy) they move one row down, off the map.
      {"mutant:deform_conv2d_swaps_offset_xy",
       {DType::fp32, deform_conv2d_1x2({0.0, 0.0, 1.0, 0.0}, false, {})}},
      // A mask of one half on both samples: the output halves.
      {"mutant:deform_conv2d_ignores_mask",
       {DType::fp32, deform_conv2d_1x2({0.0, 0.0, 0.0, 0.0}, true, {0.5, 0.5})}},
  };
  return table;
}

const std::set<std::string> kShownByTheCliTests{"mutant:nms_crash_7x3", "mutant:nms_hang_5x9"};

TEST(MutantCatalog, EveryMutantAndTwinIsATargetOfItsOpAndEveryMutantTargetIsCatalogued) {
  std::set<std::string> catalogued;
  for (const auto& spec : kernels::mutant_catalog()) {
    catalogued.insert(spec.target);
    const OpHarness* op = registry().find(spec.op);
    ASSERT_NE(op, nullptr) << spec.op;
    const auto targets = op->target_names();
    EXPECT_NE(std::find(targets.begin(), targets.end(), spec.target), targets.end()) << spec.target;
    EXPECT_NE(std::find(targets.begin(), targets.end(), spec.twin), targets.end()) << spec.twin;
    EXPECT_FALSE(spec.dtypes.empty()) << spec.target;
    EXPECT_FALSE(spec.mirrors.empty()) << spec.target;
  }
  for (const auto& op : registry().ops)
    for (const auto& target : op->target_names())
      if (target.rfind("mutant:", 0) == 0) {
        EXPECT_TRUE(catalogued.count(target)) << target << " is not in the catalog";
      }
}

TEST(MutantCatalog, EveryMutantFailsOnItsWitnessWhereItsTwinPasses) {
  InProcessRunner runner;
  for (const auto& spec : kernels::mutant_catalog()) {
    if (kShownByTheCliTests.count(spec.target)) continue;
    SCOPED_TRACE(spec.target);
    auto witness = witnesses().find(spec.target);
    ASSERT_NE(witness, witnesses().end()) << "no witness input for " << spec.target;
    const DType dtype = witness->second.dtype;
    EXPECT_NE(std::find(spec.dtypes.begin(), spec.dtypes.end(), dtype), spec.dtypes.end());
    const OpHarness& op = *registry().find(spec.op);
    Evaluation mutant = runner.evaluate(op, witness->second.input, spec.target, dtype, Device::cpu);
    Evaluation twin = runner.evaluate(op, witness->second.input, spec.twin, dtype, Device::cpu);
    EXPECT_TRUE(has_failing_verdict(mutant.judgement)) << mutant.side_by_side;
    EXPECT_FALSE(has_failing_verdict(twin.judgement)) << twin.side_by_side;
  }
}

TEST(MutantCatalog, SelectingAnUnknownMutantIsAUsageErrorNamingTheCatalog) {
  try {
    select_mutants({"nms_greater_equal", "nms_lesser"});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::usage);
    EXPECT_NE(std::string(e.what()).find("nms_lesser"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("roi_pool_ignores_spatial_scale"), std::string::npos);
  }
  EXPECT_EQ(select_mutants({"mutant:nms_greater_equal"}).size(), 1u);
  EXPECT_EQ(select_mutants({}).size(), kernels::mutant_catalog().size());
}

// The scorecard's own logic, on a small selection in this process: each selected mutant
// caught with its size, the twin run and counted, selftest.json's fields present.
TEST(Selftest, CatchesSelectedMutantsAndCountsTheirTwinsCases) {
  InProcessRunner runner;
  SelftestOptions options;
  options.mutants = {"nms_greater_equal", "box_iou_legacy_plus_one"};
  options.budget_per_mutant_s = 3;
  std::ostringstream log;
  SelftestResult result = run_selftest(registry(), options, runner, log);
  ASSERT_EQ(result.mutants.size(), 2u);
  for (const auto& m : result.mutants) {
    EXPECT_TRUE(m.caught) << m.spec.target;
    EXPECT_GT(m.found_after_cases, 0u);
    EXPECT_LE(m.minimized_size, 3u) << m.spec.target;
  }
  ASSERT_EQ(result.twins.size(), 2u);
  EXPECT_EQ(result.twins[0].target, "twin:nms");
  EXPECT_EQ(result.twins[1].target, "twin:box_iou");
  EXPECT_GT(result.cases_on_correct_targets, 100u);
  EXPECT_TRUE(result.false_alarms.empty());
  EXPECT_TRUE(result.passed());
  nlohmann::json json = to_json(result);
  EXPECT_EQ(json["mutants"][0]["name"], "mutant:nms_greater_equal");
  EXPECT_TRUE(json["mutants"][0]["caught"].get<bool>());
  EXPECT_TRUE(json["mutants"][0].contains("found_after_s"));
  EXPECT_TRUE(json["mutants"][0].contains("minimized_size"));
  EXPECT_EQ(json["cases_on_correct_targets"].get<std::uint64_t>(), result.cases_on_correct_targets);
  EXPECT_TRUE(json["false_alarms"].empty());
}

TEST(Selftest, AMutantNotCaughtFailsTheScorecard) {
  SelftestResult result;
  MutantScore missed;
  missed.spec = kernels::mutant_catalog().front();
  result.mutants.push_back(missed);
  EXPECT_FALSE(result.passed());
  result.mutants.front().caught = true;
  EXPECT_TRUE(result.passed());
  result.false_alarms.emplace_back();
  EXPECT_FALSE(result.passed());
}

}  // namespace
}  // namespace detfuzz::fuzz
