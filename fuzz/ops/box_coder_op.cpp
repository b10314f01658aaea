// box_coder: bound-normalized comparison of every decoded corner / encoded delta with the
// fp64 oracle (oracles/box_coder.h), the tiers of fuzz/compare/continuous.h. A row with a
// hostile box, reference or delta (NaN, infinite, inverted) owes nothing but its shape.
#include <algorithm>
#include <cmath>

#include "corpus/case_json.h"
#include "fuzz/compare/continuous.h"
#include "fuzz/ops/side_by_side.h"
#include "fuzz/ops/typed_harness.h"
#include "oracles/box_coder.h"

namespace detfuzz::fuzz {
namespace {

using BoxCoderTarget = kernels::Target<BoxCoderProblem>;

// Reorderings a port may make (0.5 * w vs w / 2, a * b / c vs a * (b / c)) and second-order
// terms stay within twice the first-order bound, as for IoU.
constexpr double kCoderBoundSafety = 2.0;

bool hostile_row(const BoxCoderProblem& p, std::size_t i) {
  if (gen::hostile_box(p.boxes[i])) return true;
  if (p.mode == BoxCoderProblem::Mode::encode) return gen::hostile_box(p.references[i]);
  return std::any_of(p.deltas[i].begin(), p.deltas[i].end(), gen::hostile_value);
}

std::vector<compare::ExpectedValue> expected_values(const BoxCoderProblem& p, DType dtype) {
  const std::vector<oracles::OracleValue> reference = timed_oracle([&] { return oracles::box_coder(p); });
  std::vector<compare::ExpectedValue> expected;
  for (std::size_t k = 0; k < reference.size(); ++k)
    expected.push_back(compare::expected_from(reference[k], dtype, kCoderBoundSafety, hostile_row(p, k / 4)));
  return expected;
}

// The stages of torchvision's BoxCoder (models/detection/_utils.py, 0.14.1 = 0.26.0) whose
// overflow leaves the coded value finite in exact arithmetic; every one runs in the codes'
// dtype. decode_single: widths = x2 - x1 ([-32768, 32752] is 65,520 wide, which fp16 rounds
// to infinity), pred_ctr_x = dx * widths + ctr_x and pred_w = exp(dw) * widths (a corner
// pred_ctr_x - pred_w / 2 can fit while either does not). encode_boxes: the two boxes'
// widths, wx * (gt_ctr_x - ex_ctr_x) before the division by ex_widths, and
// gt_widths / ex_widths before the log.
struct CoderStages {
  const char* anchor_size;    // decode
  const char* proposal_size;  // encode
  const char* reference_size;
  const char* scaled_offset;
  const char* size_ratio;
  const char* predicted_centre;
  const char* predicted_size;
};
constexpr CoderStages kHorizontal{"widths = boxes[:, 2] - boxes[:, 0]", "ex_widths = proposals_x2 - proposals_x1",
                                  "gt_widths = reference_boxes_x2 - reference_boxes_x1",
                                  "wx * (gt_ctr_x - ex_ctr_x)", "gt_widths / ex_widths",
                                  "pred_ctr_x = dx * widths + ctr_x", "pred_w = exp(dw) * widths"};
constexpr CoderStages kVertical{"heights = boxes[:, 3] - boxes[:, 1]", "ex_heights = proposals_y2 - proposals_y1",
                                "gt_heights = reference_boxes_y2 - reference_boxes_y1",
                                "wy * (gt_ctr_y - ex_ctr_y)", "gt_heights / ex_heights",
                                "pred_ctr_y = dy * heights + ctr_y", "pred_h = exp(dh) * heights"};

compare::OverflowExplainer coder_explainer(const BoxCoderProblem& p, const kernels::Arithmetic& arithmetic,
                                           DType dtype) {
  return [&p, &arithmetic, dtype](std::size_t element) -> std::optional<compare::StageOverflow> {
    const std::size_t row = element / 4, column = element % 4;
    const bool vertical = column % 2 == 1;  // y1, y2 / dy, dh
    const CoderStages& stage = vertical ? kVertical : kHorizontal;
    auto r = [dtype](double v) { return round_to(dtype, v); };
    // The stage's value when fp16 rounds it past its largest finite, or may once each of
    // `roundings` operations has moved it by up to an ulp; else nothing.
    auto overflowing = [&](const char* name, double value, int roundings) -> std::optional<compare::StageOverflow> {
      if (!arithmetic.in_storage(name) || !std::isfinite(value)) return std::nullopt;
      const double reach = std::fabs(value) + roundings * ulp(dtype, value);
      for (double v : {std::fabs(value), reach})
        if (std::isinf(r(v))) return compare::StageOverflow{name, std::fabs(value), reach, dtype, arithmetic.source};
      return std::nullopt;
    };
    auto lower = [vertical](const Box& b) { return vertical ? b.y1 : b.x1; };
    auto size_of = [vertical](const Box& b) { return vertical ? b.y2 - b.y1 : b.x2 - b.x1; };
    // ctr_x = x1 + 0.5 * widths, as the kernel rounds it.
    auto centre_of = [&](const Box& b) { return r(lower(b) + r(0.5 * r(size_of(b)))); };
    // A size is a difference of two values of one format: exact in double, one rounding.
    const bool decode = p.mode == BoxCoderProblem::Mode::decode;
    const double size = size_of(p.boxes[row]);
    if (auto o = overflowing(decode ? stage.anchor_size : stage.proposal_size, size, 0)) return o;
    if (std::isinf(r(size))) return std::nullopt;
    if (decode) {
      const std::size_t offset_column = vertical ? 1 : 0;
      const double offset = r(p.deltas[row][offset_column] / r(p.weights[offset_column]));
      // dy * heights, then + ctr_y: either can pass the range.
      const double moved = offset * r(size);
      if (auto o = overflowing(stage.predicted_centre, moved, 1)) return o;
      const double centre = r(moved) + centre_of(p.boxes[row]);
      if (auto o = overflowing(stage.predicted_centre, centre, 4)) return o;
      const double code = r(p.deltas[row][vertical ? 3 : 2] / r(p.weights[vertical ? 3 : 2]));
      const double scaled = std::exp(std::min(code, r(p.clip))) * r(size);
      return overflowing(stage.predicted_size, scaled, 2);  // exp, then the product
    }
    const Box& reference = p.references[row];
    const double reference_size = size_of(reference);
    if (auto o = overflowing(stage.reference_size, reference_size, 0)) return o;
    if (std::isinf(r(reference_size))) return std::nullopt;
    if (column < 2) {
      const double weight = r(p.weights[column]);
      const double offset = centre_of(reference) - centre_of(p.boxes[row]);
      return overflowing(stage.scaled_offset, weight * offset, 4);  // two centres, the difference, the product
    }
    return r(size) == 0 ? std::nullopt : overflowing(stage.size_ratio, r(reference_size) / r(size), 1);
  };
}

compare::Judgement judge(const BoxCoderProblem& problem, const BoxCoderTarget& target, DType dtype, Device device) {
  bool hostile = false;
  for (std::size_t i = 0; i < problem.boxes.size(); ++i) hostile = hostile || hostile_row(problem, i);
  auto run = run_target(target, problem, dtype, device, hostile);
  if (auto* judgement = std::get_if<compare::Judgement>(&run)) return *judgement;
  const HostTensor& output = std::get<std::vector<HostTensor>>(run).front();
  compare::OutputContract contract{problem.mode == BoxCoderProblem::Mode::decode ? "decoded boxes" : "deltas",
                                   {static_cast<std::int64_t>(problem.boxes.size()), 4},
                                   std::string(dtype_name(dtype)),
                                   device};
  compare::Judgement judgement = compare::compare_continuous(output, expected_values(problem, dtype), contract, dtype,
                                                             coder_explainer(problem, target.arithmetic, dtype));
  judgement.outputs = {output};
  return judgement;
}

std::vector<BoxCoderProblem> smaller(const BoxCoderProblem& p, DType dtype) {
  std::vector<BoxCoderProblem> out;
  const bool decode = p.mode == BoxCoderProblem::Mode::decode;
  for (auto range : removal_ranges(p.boxes.size())) {
    BoxCoderProblem fewer = p;
    fewer.boxes = without(p.boxes, range);
    if (decode) fewer.deltas = without(p.deltas, range);
    else fewer.references = without(p.references, range);
    out.push_back(std::move(fewer));
  }
  if (p.weights != std::array<double, 4>{1, 1, 1, 1}) {
    BoxCoderProblem plainer = p;
    plainer.weights = {1, 1, 1, 1};
    out.push_back(std::move(plainer));
  }
  for (auto& boxes : simpler_boxes(p.boxes, dtype)) {
    BoxCoderProblem plainer = p;
    plainer.boxes = std::move(boxes);
    out.push_back(std::move(plainer));
  }
  if (!decode)
    for (auto& references : simpler_boxes(p.references, dtype)) {
      BoxCoderProblem plainer = p;
      plainer.references = std::move(references);
      out.push_back(std::move(plainer));
    }
  for (std::size_t i = 0; decode && i < p.deltas.size() && p.deltas.size() <= kMaxElementsToSimplify; ++i)
    for (std::size_t k = 0; k < 4; ++k)
      for (double value : simpler_values(p.deltas[i][k], dtype)) {
        BoxCoderProblem plainer = p;
        plainer.deltas[i][k] = value;
        out.push_back(std::move(plainer));
      }
  return out;
}

}  // namespace

std::unique_ptr<OpHarness> make_box_coder_harness(std::vector<BoxCoderTarget> targets) {
  OpDefinition<BoxCoderProblem> definition;
  definition.name = op_name(OpId::box_coder);
  definition.description =
      "Faster R-CNN box encode/decode (torchvision BoxCoder: weights, dw/dh clamped at log(1000/16))";
  definition.targets = std::move(targets);
  definition.generator = gen::box_coder_problem;
  definition.judge = judge;
  definition.to_json = [](const BoxCoderProblem& p) { return corpus::to_json(p); };
  definition.from_json = corpus::box_coder_problem_from_json;
  definition.size = [](const BoxCoderProblem& p) { return p.boxes.size(); };
  definition.smaller = smaller;
  definition.oracle_json = [](const BoxCoderProblem& p, DType dtype) {
    const auto expected = expected_values(p, dtype);
    nlohmann::json values = nlohmann::json::array(), tolerance = nlohmann::json::array();
    for (const auto& e : expected) values.push_back(corpus::json_double(e.value));
    for (double t : compare::strict_tolerances(expected, dtype)) tolerance.push_back(corpus::json_double(t));
    return nlohmann::json{{"shape", {p.boxes.size(), 4}}, {"values", values}, {"tolerance", tolerance}};
  };
  definition.side_by_side = [](const BoxCoderProblem& p, const std::vector<HostTensor>& outputs, DType dtype) {
    const auto expected = expected_values(p, dtype);
    std::vector<double> oracle;
    for (const auto& e : expected) oracle.push_back(e.value);
    return element_table(outputs.front().shape, outputs.front().values, oracle, compare::strict_tolerances(expected, dtype));
  };
  definition.probe.boxes = {{0, 0, 2, 2}};
  definition.probe.deltas = {{0.5, 0.25, 0, 1}};
  return std::make_unique<TypedOpHarness<BoxCoderProblem>>(std::move(definition));
}

}  // namespace detfuzz::fuzz
