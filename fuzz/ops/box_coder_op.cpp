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

// The decode stages whose overflow leaves the decoded corner finite in exact arithmetic:
// torchvision's decode_single takes the anchor's width (x2 - x1) and height in the codes'
// dtype, then scales exp(dw) by the width and exp(dh) by the height before halving them
// (pred_w, pred_h). [-32768, 32752] is 65,520 wide, which fp16 rounds to infinity, and a
// corner x1 = ctr - pred_w / 2 can be in range while pred_w is not.
constexpr const char* kWidth = "widths = boxes[:, 2] - boxes[:, 0]";
constexpr const char* kHeight = "heights = boxes[:, 3] - boxes[:, 1]";
constexpr const char* kPredictedWidth = "pred_w = exp(dw) * widths";
constexpr const char* kPredictedHeight = "pred_h = exp(dh) * heights";

compare::OverflowExplainer decode_explainer(const BoxCoderProblem& p, const kernels::Arithmetic& arithmetic, DType dtype) {
  return [&p, &arithmetic, dtype](std::size_t element) -> std::optional<compare::StageOverflow> {
    if (p.mode != BoxCoderProblem::Mode::decode) return std::nullopt;
    const std::size_t row = element / 4;
    const bool vertical = element % 2 == 1;  // y1, y2 come from the height
    // A value that fp16 rounds past its largest finite, or may once each of `roundings`
    // operations has rounded it by up to an ulp.
    auto overflowing = [&](const char* stage, double value, int roundings) -> std::optional<compare::StageOverflow> {
      if (!arithmetic.in_storage(stage) || !std::isfinite(value)) return std::nullopt;
      const double reach = std::fabs(value) + roundings * ulp(dtype, value);
      for (double v : {std::fabs(value), reach})
        if (std::isinf(round_to(dtype, v)))
          return compare::StageOverflow{stage, std::fabs(value), reach, dtype, arithmetic.source};
      return std::nullopt;
    };
    const Box& box = p.boxes[row];
    // The size is a difference of two values of one format: exact in double, one rounding.
    const double size = vertical ? box.y2 - box.y1 : box.x2 - box.x1;
    if (auto o = overflowing(vertical ? kHeight : kWidth, size, 0)) return o;
    if (std::isinf(round_to(dtype, size))) return std::nullopt;
    // The code is divided by its weight and clamped in the dtype, as the kernel does; then
    // exp and the product: two roundings.
    const double code = round_to(dtype, p.deltas[row][vertical ? 3 : 2] / p.weights[vertical ? 3 : 2]);
    const double scaled = std::exp(std::min(code, round_to(dtype, p.clip))) * size;
    return overflowing(vertical ? kPredictedHeight : kPredictedWidth, scaled, 2);
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
                                                             decode_explainer(problem, target.arithmetic, dtype));
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
