// box_coder: the oracle's arithmetic on exact cases, and the harness catching a decode
// that forgets the clamp or an encode that forgets the weights.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "corpus/case_json.h"
#include "fuzz/ops/op_harness.h"
#include "oracles/box_coder.h"

namespace detfuzz::fuzz {
namespace {

BoxCoderProblem decode_problem(std::array<double, 4> delta, std::array<double, 4> weights = {1, 1, 1, 1}) {
  BoxCoderProblem p;
  p.boxes = {{0, 0, 4, 2}};
  p.deltas = {delta};
  p.weights = weights;
  return p;
}

std::vector<double> values(const std::vector<oracles::OracleValue>& coded) {
  std::vector<double> out;
  for (const auto& v : coded) out.push_back(v.value);
  return out;
}

TEST(BoxCoderOracle, ZeroDeltasGiveTheBoxBackExactly) {
  const auto coded = oracles::box_coder(decode_problem({0, 0, 0, 0}));
  EXPECT_EQ(values(coded), (std::vector<double>{0, 0, 4, 2}));
  for (const auto& v : coded) EXPECT_EQ(v.bound(DType::fp16), 0.0);
}

TEST(BoxCoderOracle, SizeDeltasPastTheClipAreClamped) {
  const double clip = std::log(1000.0 / 16);
  const auto clamped = values(oracles::box_coder(decode_problem({0, 0, 10, 0})));
  EXPECT_DOUBLE_EQ(clamped[2] - clamped[0], 4 * std::exp(clip));
  // (10, 10, 5, 5) weights: dw = 5 / 5 = 1 is below the clip.
  const auto weighted = values(oracles::box_coder(decode_problem({2, 0, 5, 0}, {10, 10, 5, 5})));
  EXPECT_DOUBLE_EQ(weighted[2] - weighted[0], 4 * std::exp(1.0));
  EXPECT_DOUBLE_EQ((weighted[0] + weighted[2]) / 2, 2 + 0.2 * 4);
}

TEST(BoxCoderOracle, EncodeIsExactOnDyadicBoxesAndUndefinedForEmptyOnes) {
  BoxCoderProblem p;
  p.mode = BoxCoderProblem::Mode::encode;
  p.boxes = {{0, 0, 4, 4}, {0, 0, 0, 4}};
  p.references = {{2, 2, 6, 6}, {0, 0, 1, 1}};
  const auto coded = oracles::box_coder(p);
  EXPECT_EQ(values(coded)[0], 0.5);
  EXPECT_EQ(values(coded)[2], 0.0);
  EXPECT_EQ(coded[2].bound(DType::fp32), 0.0);  // log(1) = 0 exactly
  EXPECT_TRUE(coded[4].undefined);               // zero-width proposal
}

// A decode written in double and rounded to the dtype, with or without the clamp.
kernels::Target<BoxCoderProblem> planted_decode(std::string name, bool clamp) {
  kernels::Target<BoxCoderProblem> target;
  target.name = std::move(name);
  target.availability = [](Device) { return kernels::Availability{}; };
  target.run = [clamp](const BoxCoderProblem& p, DType dtype, Device) {
    HostTensor out{{static_cast<std::int64_t>(p.boxes.size()), 4}, std::string(dtype_name(dtype)), "cpu", {}};
    for (std::size_t i = 0; i < p.boxes.size(); ++i) {
      const Box& b = p.boxes[i];
      const auto& d = p.deltas[i];
      const double w = b.x2 - b.x1, h = b.y2 - b.y1;
      double dw = d[2] / p.weights[2], dh = d[3] / p.weights[3];
      if (clamp) dw = std::min(dw, p.clip), dh = std::min(dh, p.clip);
      const double cx = d[0] / p.weights[0] * w + b.x1 + w / 2, cy = d[1] / p.weights[1] * h + b.y1 + h / 2;
      const double pw = std::exp(dw) * w / 2, ph = std::exp(dh) * h / 2;
      for (double v : {cx - pw, cy - ph, cx + pw, cy + ph}) out.values.push_back(round_to(dtype, v));
    }
    return std::vector<HostTensor>{out};
  };
  return target;
}

TEST(BoxCoderOp, DecodeWithoutTheClampIsCaughtAndTheFaithfulOneIsNot) {
  auto op = make_box_coder_harness({planted_decode("clamped", true), planted_decode("unclamped", false)});
  const nlohmann::json past_clip = corpus::to_json(decode_problem({0, 0, 10, 0}));
  EXPECT_TRUE(op->judge_json(past_clip, "clamped", DType::fp32, Device::cpu).consistent());
  const auto judgement = op->judge_json(past_clip, "unclamped", DType::fp32, Device::cpu);
  ASSERT_FALSE(judgement.consistent());
  EXPECT_EQ(judgement.verdicts[0].kind, FindingKind::mismatch);
  EXPECT_TRUE(op->judge_json(corpus::to_json(decode_problem({0, 0, 1, 0})), "unclamped", DType::fp32, Device::cpu)
                  .consistent());
}

// torchvision's decode_single and encode_boxes as written: every stage rounded to the
// codes' dtype, the clamp included; `arithmetic` says so (or not).
kernels::Target<BoxCoderProblem> decode_in_the_dtype(kernels::Arithmetic arithmetic) {
  kernels::Target<BoxCoderProblem> target;
  target.name = "in_dtype";
  target.arithmetic = std::move(arithmetic);
  target.availability = [](Device) { return kernels::Availability{}; };
  target.run = [](const BoxCoderProblem& p, DType dtype, Device) {
    auto r = [dtype](double v) { return round_to(dtype, v); };
    HostTensor out{{static_cast<std::int64_t>(p.boxes.size()), 4}, std::string(dtype_name(dtype)), "cpu", {}};
    for (std::size_t i = 0; i < p.boxes.size() && p.mode == BoxCoderProblem::Mode::encode; ++i) {
      const Box &ex = p.boxes[i], &gt = p.references[i];
      const double ex_w = r(ex.x2 - ex.x1), ex_h = r(ex.y2 - ex.y1), gt_w = r(gt.x2 - gt.x1), gt_h = r(gt.y2 - gt.y1);
      const double dx = r(r(gt.x1 + r(0.5 * gt_w)) - r(ex.x1 + r(0.5 * ex_w)));
      const double dy = r(r(gt.y1 + r(0.5 * gt_h)) - r(ex.y1 + r(0.5 * ex_h)));
      out.values.push_back(r(r(r(p.weights[0]) * dx) / ex_w));
      out.values.push_back(r(r(r(p.weights[1]) * dy) / ex_h));
      out.values.push_back(r(r(p.weights[2]) * r(std::log(r(gt_w / ex_w)))));
      out.values.push_back(r(r(p.weights[3]) * r(std::log(r(gt_h / ex_h)))));
    }
    for (std::size_t i = 0; i < p.boxes.size() && p.mode == BoxCoderProblem::Mode::decode; ++i) {
      const Box& b = p.boxes[i];
      const auto& d = p.deltas[i];
      const double w = r(b.x2 - b.x1), h = r(b.y2 - b.y1);
      const double cx = r(r(d[0] / p.weights[0]) * w + r(b.x1 + r(0.5 * w)));
      const double cy = r(r(d[1] / p.weights[1]) * h + r(b.y1 + r(0.5 * h)));
      const double dw = std::min(r(d[2] / p.weights[2]), r(p.clip)), dh = std::min(r(d[3] / p.weights[3]), r(p.clip));
      const double half_w = r(0.5 * r(r(std::exp(dw)) * w)), half_h = r(0.5 * r(r(std::exp(dh)) * h));
      for (double v : {cx - half_w, cy - half_h, cx + half_w, cy + half_h}) out.values.push_back(r(v));
    }
    return std::vector<HostTensor>{out};
  };
  return target;
}

// The message of the judgement's verdict of `kind`, or "" (and a test failure) without one.
std::string verdict_of_kind(const compare::Judgement& judgement, FindingKind kind) {
  for (const auto& v : judgement.verdicts)
    if (v.kind == kind) return v.message;
  ADD_FAILURE() << "no verdict of kind " << static_cast<int>(kind) << " among " << judgement.verdicts.size();
  return "";
}

TEST(BoxCoderOp, AnFp16CodingWhoseWidthScaledHeightOrScaledOffsetOverflowsIsADtypeOverflowOfThatStage) {
  // exp(7 / 5) * 16376 = 66405 passes fp16's 65504; the corners (8188 +- 33203) fit.
  BoxCoderProblem tall = decode_problem({0, 0, 0, 7}, {10, 10, 5, 5});
  tall.boxes = {{0, 0, 0, 16376}};
  const nlohmann::json json = corpus::to_json(tall);
  auto declared = make_box_coder_harness({decode_in_the_dtype({{"*"}, "decode_single in the codes' dtype"})});
  auto judgement = declared->judge_json(json, "in_dtype", DType::fp16, Device::cpu);
  ASSERT_FALSE(judgement.consistent());
  EXPECT_EQ(judgement.verdicts[0].kind, FindingKind::dtype_overflow);
  EXPECT_NE(judgement.verdicts[0].message.find("pred_h = exp(dh) * heights in fp16"), std::string::npos)
      << judgement.verdicts[0].message;
  // The same kernel that claims fp32 arithmetic has no excuse: its infinity is a bug.
  auto undeclared = make_box_coder_harness({decode_in_the_dtype({})});
  judgement = undeclared->judge_json(json, "in_dtype", DType::fp16, Device::cpu);
  ASSERT_FALSE(judgement.consistent());
  EXPECT_NE(judgement.verdicts[0].kind, FindingKind::dtype_overflow);
  // An anchor 65,520 wide: its width is already infinite in fp16, and the corners NaN.
  BoxCoderProblem wide = decode_problem({0, 0, 0, 0});
  wide.boxes = {{-32768, 0, 32752, 0}};
  judgement = declared->judge_json(corpus::to_json(wide), "in_dtype", DType::fp16, Device::cpu);
  ASSERT_FALSE(judgement.consistent());
  EXPECT_EQ(judgement.verdicts[0].kind, FindingKind::dtype_overflow);
  EXPECT_NE(judgement.verdicts[0].message.find("widths = boxes[:, 2] - boxes[:, 0] in fp16"), std::string::npos)
      << judgement.verdicts[0].message;
  // A centre moved past the range: 1.4 * 19168 + 42352 = 69187, while y1 = 59603 fits.
  BoxCoderProblem shifted = decode_problem({0, 14, 0, 0}, {10, 10, 5, 5});
  shifted.boxes = {{0, 32768, 0, 51936}};
  judgement = declared->judge_json(corpus::to_json(shifted), "in_dtype", DType::fp16, Device::cpu);
  EXPECT_NE(verdict_of_kind(judgement, FindingKind::dtype_overflow).find("pred_ctr_y = dy * heights + ctr_y in fp16"),
            std::string::npos);
  // And moved down past it: -3 * 29744 = -89232 before the centre 14872 is added (y2 = -59488).
  shifted = decode_problem({0, -3, 0, 0});
  shifted.boxes = {{0, 0, 0, 29744}};
  judgement = declared->judge_json(corpus::to_json(shifted), "in_dtype", DType::fp16, Device::cpu);
  EXPECT_NE(verdict_of_kind(judgement, FindingKind::dtype_overflow).find("boxes[0, 3]"), std::string::npos);
  EXPECT_EQ(std::count_if(judgement.verdicts.begin(), judgement.verdicts.end(),
                          [](const auto& v) { return v.kind == FindingKind::nan; }),
            0);
  // Encoding a reference 14,000 high against a proposal 2 high: wy * (gt_ctr_y - ex_ctr_y)
  // = 10 * 6999 passes 65,504 before the division by 2 brings dy back to 34,995.
  BoxCoderProblem encode;
  encode.mode = BoxCoderProblem::Mode::encode;
  encode.boxes = {{0, 0, 1, 2}};
  encode.references = {{0, 0, 1, 14000}};
  encode.weights = {10, 10, 5, 5};
  judgement = declared->judge_json(corpus::to_json(encode), "in_dtype", DType::fp16, Device::cpu);
  const auto overflow = std::find_if(judgement.verdicts.begin(), judgement.verdicts.end(),
                                     [](const auto& v) { return v.kind == FindingKind::dtype_overflow; });
  ASSERT_NE(overflow, judgement.verdicts.end());
  EXPECT_NE(overflow->message.find("deltas[0, 1]"), std::string::npos) << overflow->message;
  EXPECT_NE(overflow->message.find("wy * (gt_ctr_y - ex_ctr_y) in fp16"), std::string::npos) << overflow->message;
  for (const auto& verdict : judgement.verdicts)
    EXPECT_TRUE(verdict.kind == FindingKind::dtype_overflow || verdict.kind == FindingKind::precision)
        << verdict.message;
  // At half the height nothing overflows: what is left is fp16's rounding at every stage.
  tall.boxes = {{0, 0, 0, 8192}};
  judgement = declared->judge_json(corpus::to_json(tall), "in_dtype", DType::fp16, Device::cpu);
  for (const auto& verdict : judgement.verdicts) EXPECT_EQ(verdict.kind, FindingKind::precision) << verdict.message;
}

TEST(BoxCoderOp, TorchvisionPortMatchesTheOracleInFp32AndFp64) {
  auto op = make_box_coder_harness(kernels::box_coder_targets({}));
  BoxCoderProblem encode;
  encode.mode = BoxCoderProblem::Mode::encode;
  encode.boxes = {{0, 0, 4, 4}, {1, 2, 3.5, 7}};
  encode.references = {{2, 2, 6, 6}, {0, 0, 10, 3}};
  encode.weights = {10, 10, 5, 5};
  for (DType dtype : {DType::fp32, DType::fp64}) {
    for (const BoxCoderProblem& p : {decode_problem({0.5, -0.25, 10, 1.5}, {10, 10, 5, 5}), encode}) {
      const auto judgement = op->judge_json(corpus::to_json(p), "torchvision", dtype, Device::cpu);
      EXPECT_TRUE(judgement.consistent()) << judgement.verdicts[0].message;
    }
  }
}

}  // namespace
}  // namespace detfuzz::fuzz
