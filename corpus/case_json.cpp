#include "corpus/case_json.h"

#include <cmath>
#include <limits>
#include <tuple>
#include <utility>

#include "model/error.h"

namespace detfuzz::corpus {
namespace {

[[noreturn]] void malformed(const std::string& what, const std::string& expected,
                            const nlohmann::json& got) {
  std::string shown = got.dump();
  if (shown.size() > 80) shown = shown.substr(0, 77) + "...";
  throw Error(ErrorKind::input, what + ": expected " + expected + ", got " + shown);
}

const nlohmann::json& field(const nlohmann::json& json, const std::string& key,
                            const std::string& what) {
  if (!json.is_object()) malformed(what, "an object", json);
  auto it = json.find(key);
  if (it == json.end()) malformed(what + "." + key, "a value (the field is required)", nullptr);
  return *it;
}

nlohmann::json boxes_json(const std::vector<Box>& boxes) {
  nlohmann::json array = nlohmann::json::array();
  for (const Box& b : boxes)
    array.push_back({json_double(b.x1), json_double(b.y1), json_double(b.x2), json_double(b.y2)});
  return array;
}

std::vector<Box> boxes_from_json(const nlohmann::json& json, const std::string& what) {
  if (!json.is_array()) malformed(what, "an array of [x1, y1, x2, y2]", json);
  if (json.size() > kMaxBoxesPerCase)
    throw Error(ErrorKind::input, what + ": " + std::to_string(json.size()) + " boxes exceed the " +
                                      std::to_string(kMaxBoxesPerCase) + " a case may hold; split the case");
  std::vector<Box> boxes;
  boxes.reserve(json.size());
  for (std::size_t i = 0; i < json.size(); ++i) {
    const std::string where = what + "[" + std::to_string(i) + "]";
    if (!json[i].is_array() || json[i].size() != 4) malformed(where, "[x1, y1, x2, y2]", json[i]);
    boxes.push_back({double_from_json(json[i][0], where + "[0]"),
                     double_from_json(json[i][1], where + "[1]"),
                     double_from_json(json[i][2], where + "[2]"),
                     double_from_json(json[i][3], where + "[3]")});
  }
  return boxes;
}

// One number per box under `key` (scores): the count must match.
std::vector<double> per_box_values(const nlohmann::json& json, const std::string& key, const std::string& what,
                                   std::size_t boxes) {
  const auto& values = field(json, key, what);
  if (!values.is_array()) malformed(what + "." + key, "an array of numbers", values);
  std::vector<double> result;
  result.reserve(values.size());
  for (std::size_t i = 0; i < values.size(); ++i)
    result.push_back(double_from_json(values[i], what + "." + key + "[" + std::to_string(i) + "]"));
  if (result.size() != boxes)
    throw Error(ErrorKind::input, what + ": " + std::to_string(boxes) + " boxes but " + std::to_string(result.size()) +
                                      " " + key + "; give one per box");
  return result;
}

// Feature maps are bounded so that a hand-edited case cannot ask for gigabytes.
constexpr std::int64_t kMaxFeatureValues = 1 << 24;

std::int64_t integer_field(const nlohmann::json& json, const std::string& key, const std::string& what,
                           std::int64_t min, std::int64_t max) {
  const auto& value = field(json, key, what);
  if (!value.is_number_integer()) malformed(what + "." + key, "an integer", value);
  const auto v = value.get<std::int64_t>();
  if (v < min || v > max)
    malformed(what + "." + key, "an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]", value);
  return v;
}

nlohmann::json feature_map_json(const FeatureMap& map) {
  nlohmann::json values = nlohmann::json::array();
  for (double v : map.values) values.push_back(json_double(v));
  return {{"shape", {map.batch, map.channels, map.height, map.width}}, {"values", values}};
}

// A map's [batch, channels, height, width] (`what` names the field): positive, and at most
// kMaxFeatureValues values in all. Returns the product.
std::int64_t map_shape_from_json(const nlohmann::json& shape, const std::string& what, FeatureMap& map) {
  if (!shape.is_array() || shape.size() != 4) malformed(what, "[batch, channels, height, width]", shape);
  std::int64_t* dims[4] = {&map.batch, &map.channels, &map.height, &map.width};
  std::int64_t total = 1;
  for (std::size_t d = 0; d < 4; ++d) {
    if (!shape[d].is_number_integer() || shape[d].get<std::int64_t>() < 1 ||
        shape[d].get<std::int64_t>() > kMaxFeatureValues)
      malformed(what + "[" + std::to_string(d) + "]", "a positive integer", shape[d]);
    *dims[d] = shape[d].get<std::int64_t>();
    total *= *dims[d];
    if (total > kMaxFeatureValues)
      throw Error(ErrorKind::input, what + ": " + shape.dump() + " holds more than " +
                                        std::to_string(kMaxFeatureValues) + " values; use a smaller map");
  }
  return total;
}

FeatureMap feature_map_from_json(const nlohmann::json& json, const std::string& what) {
  FeatureMap map;
  const std::int64_t total = map_shape_from_json(field(json, "shape", what), what + ".shape", map);
  const auto& values = field(json, "values", what);
  if (!values.is_array() || static_cast<std::int64_t>(values.size()) != total)
    malformed(what + ".values", "an array of " + std::to_string(total) + " numbers (the shape's product)", values);
  map.values.reserve(static_cast<std::size_t>(total));
  for (std::size_t i = 0; i < values.size(); ++i)
    map.values.push_back(double_from_json(values[i], what + ".values[" + std::to_string(i) + "]"));
  return map;
}

nlohmann::json rois_json(const std::vector<Roi>& rois) {
  nlohmann::json array = nlohmann::json::array();
  for (const Roi& r : rois)
    array.push_back({json_double(r.batch_index), json_double(r.x1), json_double(r.y1), json_double(r.x2), json_double(r.y2)});
  return array;
}

std::vector<Roi> rois_from_json(const nlohmann::json& json, const std::string& what) {
  if (!json.is_array()) malformed(what, "an array of [batch_index, x1, y1, x2, y2]", json);
  if (json.size() > kMaxRoisPerCase)
    throw Error(ErrorKind::input, what + ": " + std::to_string(json.size()) + " RoIs exceed the " +
                                      std::to_string(kMaxRoisPerCase) + " a case may hold; split the case");
  std::vector<Roi> rois;
  for (std::size_t i = 0; i < json.size(); ++i) {
    const std::string where = what + "[" + std::to_string(i) + "]";
    if (!json[i].is_array() || json[i].size() != 5) malformed(where, "[batch_index, x1, y1, x2, y2]", json[i]);
    Roi roi{double_from_json(json[i][0], where + "[0]"), double_from_json(json[i][1], where + "[1]"),
            double_from_json(json[i][2], where + "[2]"), double_from_json(json[i][3], where + "[3]"),
            double_from_json(json[i][4], where + "[4]")};
    // Any number: an index outside the batch is what a hostile case is made of, and the
    // op's judge (not the format) says what a kernel owes it.
    rois.push_back(roi);
  }
  return rois;
}

constexpr std::int64_t kMaxPooled = 1024;

// The fields roi_align and roi_pool share.
struct RoiFields {
  FeatureMap input;
  std::vector<Roi> rois;
  double spatial_scale;
  std::int64_t pooled_height, pooled_width;
};

// `input`: the map with its values, or (a backward's) its shape alone, "input_shape".
enum class MapField { input, input_shape };

RoiFields roi_fields_from_json(const nlohmann::json& json, const std::string& what, MapField map = MapField::input) {
  RoiFields f;
  if (map == MapField::input)
    f.input = feature_map_from_json(field(json, "input", what), what + ".input");
  else
    map_shape_from_json(field(json, "input_shape", what), what + ".input_shape", f.input);
  f.rois = rois_from_json(field(json, "rois", what), what + ".rois");
  f.spatial_scale = double_from_json(field(json, "spatial_scale", what), what + ".spatial_scale");
  f.pooled_height = integer_field(json, "pooled_height", what, 1, kMaxPooled);
  f.pooled_width = integer_field(json, "pooled_width", what, 1, kMaxPooled);
  return f;
}

}  // namespace

nlohmann::json json_double(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  return value;
}

double double_from_json(const nlohmann::json& value, const std::string& what) {
  if (value.is_number()) return value.get<double>();
  if (value.is_string()) {
    const auto& text = value.get_ref<const std::string&>();
    if (text == "nan") return std::numeric_limits<double>::quiet_NaN();
    if (text == "inf") return std::numeric_limits<double>::infinity();
    if (text == "-inf") return -std::numeric_limits<double>::infinity();
  }
  malformed(what, "a number (or \"nan\", \"inf\", \"-inf\")", value);
}

nlohmann::json to_json(const NmsProblem& problem) {
  nlohmann::json scores = nlohmann::json::array();
  for (double s : problem.scores) scores.push_back(json_double(s));
  return {{"boxes", boxes_json(problem.boxes)},
          {"scores", scores},
          {"iou_threshold", json_double(problem.iou_threshold)}};
}

nlohmann::json to_json(const BoxAreaProblem& problem) { return {{"boxes", boxes_json(problem.boxes)}}; }

BoxAreaProblem box_area_problem_from_json(const nlohmann::json& json) {
  return {boxes_from_json(field(json, "boxes", "box_area input"), "box_area input.boxes")};
}

nlohmann::json to_json(const BoxIouProblem& problem) {
  return {{"boxes1", boxes_json(problem.boxes1)}, {"boxes2", boxes_json(problem.boxes2)}};
}

NmsProblem nms_problem_from_json(const nlohmann::json& json) {
  NmsProblem problem;
  problem.boxes = boxes_from_json(field(json, "boxes", "nms input"), "nms input.boxes");
  problem.scores = per_box_values(json, "scores", "nms input", problem.boxes.size());
  problem.iou_threshold =
      double_from_json(field(json, "iou_threshold", "nms input"), "nms input.iou_threshold");
  return problem;
}

nlohmann::json to_json(const BatchedNmsProblem& problem) {
  nlohmann::json scores = nlohmann::json::array();
  for (double s : problem.scores) scores.push_back(json_double(s));
  nlohmann::json json = {{"boxes", boxes_json(problem.boxes)},
                         {"scores", scores},
                         {"classes", problem.classes},
                         {"iou_threshold", json_double(problem.iou_threshold)},
                         {"class_agnostic", problem.class_agnostic},
                         {"max_num", problem.max_num}};
  if (problem.score_dtype) json["score_dtype"] = std::string(dtype_name(*problem.score_dtype));
  return json;
}

BatchedNmsProblem batched_nms_problem_from_json(const nlohmann::json& json) {
  const std::string what = "batched_nms input";
  BatchedNmsProblem problem;
  problem.boxes = boxes_from_json(field(json, "boxes", what), what + ".boxes");
  problem.scores = per_box_values(json, "scores", what, problem.boxes.size());
  const auto& classes = field(json, "classes", what);
  if (!classes.is_array() || classes.size() != problem.boxes.size())
    malformed(what + ".classes", "an array of " + std::to_string(problem.boxes.size()) + " class ids (one per box)",
              classes);
  for (std::size_t i = 0; i < classes.size(); ++i) {
    if (!classes[i].is_number_integer() || classes[i].get<std::int64_t>() < 0 ||
        classes[i].get<std::int64_t>() > kMaxClassId)
      malformed(what + ".classes[" + std::to_string(i) + "]",
                "an integer class id in [0, " + std::to_string(kMaxClassId) + "]", classes[i]);
    problem.classes.push_back(classes[i].get<std::int64_t>());
  }
  problem.iou_threshold = double_from_json(field(json, "iou_threshold", what), what + ".iou_threshold");
  const auto& agnostic = field(json, "class_agnostic", what);
  if (!agnostic.is_boolean()) malformed(what + ".class_agnostic", "true or false", agnostic);
  problem.class_agnostic = agnostic.get<bool>();
  problem.max_num = integer_field(json, "max_num", what, -1, static_cast<std::int64_t>(kMaxBoxesPerCase));
  if (auto it = json.find("score_dtype"); it != json.end()) {
    std::optional<DType> dtype = it->is_string() ? parse_dtype(it->get<std::string>()) : std::nullopt;
    if (!dtype || !is_floating(*dtype)) malformed(what + ".score_dtype", "one of fp16, bf16, fp32, fp64", *it);
    problem.score_dtype = dtype;
  }
  return problem;
}

nlohmann::json to_json(const BoxCoderProblem& p) {
  const bool decode = p.mode == BoxCoderProblem::Mode::decode;
  nlohmann::json json = {{"mode", decode ? "decode" : "encode"},
                         {"boxes", boxes_json(p.boxes)},
                         {"weights", {json_double(p.weights[0]), json_double(p.weights[1]), json_double(p.weights[2]),
                                      json_double(p.weights[3])}}};
  if (decode) {
    nlohmann::json deltas = nlohmann::json::array();
    for (const auto& d : p.deltas) deltas.push_back({json_double(d[0]), json_double(d[1]), json_double(d[2]), json_double(d[3])});
    json["deltas"] = deltas;
    json["clip"] = json_double(p.clip);
  } else {
    json["references"] = boxes_json(p.references);
  }
  return json;
}

BoxCoderProblem box_coder_problem_from_json(const nlohmann::json& json) {
  const std::string what = "box_coder input";
  BoxCoderProblem p;
  const auto& mode = field(json, "mode", what);
  if (mode != "decode" && mode != "encode") malformed(what + ".mode", "\"decode\" or \"encode\"", mode);
  p.mode = mode == "decode" ? BoxCoderProblem::Mode::decode : BoxCoderProblem::Mode::encode;
  p.boxes = boxes_from_json(field(json, "boxes", what), what + ".boxes");
  const auto& weights = field(json, "weights", what);
  if (!weights.is_array() || weights.size() != 4) malformed(what + ".weights", "[wx, wy, ww, wh]", weights);
  for (std::size_t k = 0; k < 4; ++k) {
    p.weights[k] = double_from_json(weights[k], what + ".weights[" + std::to_string(k) + "]");
    if (!(p.weights[k] != 0)) malformed(what + ".weights[" + std::to_string(k) + "]", "a nonzero number", weights[k]);
  }
  if (p.mode == BoxCoderProblem::Mode::decode) {
    // Four numbers per box, the same shape as a box list.
    for (const Box& d : boxes_from_json(field(json, "deltas", what), what + ".deltas")) p.deltas.push_back({d.x1, d.y1, d.x2, d.y2});
    if (p.deltas.size() != p.boxes.size())
      throw Error(ErrorKind::input, what + ": " + std::to_string(p.boxes.size()) + " boxes but " +
                                        std::to_string(p.deltas.size()) + " deltas; give one [dx, dy, dw, dh] per box");
    p.clip = double_from_json(field(json, "clip", what), what + ".clip");
  } else {
    p.references = boxes_from_json(field(json, "references", what), what + ".references");
    if (p.references.size() != p.boxes.size())
      throw Error(ErrorKind::input, what + ": " + std::to_string(p.boxes.size()) + " boxes but " +
                                        std::to_string(p.references.size()) + " references; give one per box");
  }
  return p;
}

namespace {

nlohmann::json doubles_json(const std::vector<double>& values) {
  nlohmann::json array = nlohmann::json::array();
  for (double v : values) array.push_back(json_double(v));
  return array;
}

std::vector<double> doubles_from_json(const nlohmann::json& json, const std::string& key, const std::string& what,
                                      std::size_t count) {
  const auto& values = field(json, key, what);
  if (!values.is_array() || values.size() != count)
    malformed(what + "." + key, "an array of " + std::to_string(count) + " numbers", values);
  std::vector<double> result;
  for (std::size_t i = 0; i < values.size(); ++i)
    result.push_back(double_from_json(values[i], what + "." + key + "[" + std::to_string(i) + "]"));
  return result;
}

constexpr std::size_t kMaxLossValues = 1 << 22;

std::size_t array_size(const nlohmann::json& json, const std::string& key, const std::string& what) {
  const auto& values = field(json, key, what);
  if (!values.is_array()) malformed(what + "." + key, "an array", values);
  if (values.size() > kMaxLossValues)
    throw Error(ErrorKind::input, what + "." + key + ": " + std::to_string(values.size()) + " values exceed the " +
                                      std::to_string(kMaxLossValues) + " a case may hold; split the case");
  return values.size();
}

RegressionLossProblem::Reduction reduction_from_json(const nlohmann::json& json, const std::string& what) {
  const auto& reduction = field(json, "reduction", what);
  if (reduction == "none") return RegressionLossProblem::Reduction::none;
  if (reduction == "sum") return RegressionLossProblem::Reduction::sum;
  if (reduction != "mean") malformed(what + ".reduction", "\"none\", \"sum\" or \"mean\"", reduction);
  return RegressionLossProblem::Reduction::mean;
}

}  // namespace

nlohmann::json to_json(const RegressionLossProblem& p) {
  return {{"loss", p.loss == RegressionLossProblem::Loss::l1 ? "l1" : "smooth_l1"},
          {"input", doubles_json(p.input)},
          {"target", doubles_json(p.target)},
          {"beta", json_double(p.beta)},
          {"reduction", reduction_name(p.reduction)}};
}

RegressionLossProblem regression_loss_problem_from_json(const nlohmann::json& json) {
  const std::string what = "regression_loss input";
  RegressionLossProblem p;
  const auto& loss = field(json, "loss", what);
  if (loss != "smooth_l1" && loss != "l1") malformed(what + ".loss", "\"smooth_l1\" or \"l1\"", loss);
  p.loss = loss == "l1" ? RegressionLossProblem::Loss::l1 : RegressionLossProblem::Loss::smooth_l1;
  const std::size_t n = array_size(json, "input", what);
  p.input = doubles_from_json(json, "input", what, n);
  p.target = doubles_from_json(json, "target", what, n);
  p.beta = double_from_json(field(json, "beta", what), what + ".beta");
  if (!(p.beta >= 0)) malformed(what + ".beta", "a number >= 0", field(json, "beta", what));
  p.reduction = reduction_from_json(json, what);
  return p;
}

nlohmann::json to_json(const FastRcnnLossProblem& p) {
  return {{"classes", p.classes},
          {"class_logits", doubles_json(p.class_logits)},
          {"labels", p.labels},
          {"box_regression", doubles_json(p.box_regression)},
          {"regression_targets", doubles_json(p.regression_targets)}};
}

FastRcnnLossProblem fast_rcnn_loss_problem_from_json(const nlohmann::json& json) {
  const std::string what = "fast_rcnn_loss input";
  FastRcnnLossProblem p;
  p.classes = integer_field(json, "classes", what, 1, 4096);
  const std::size_t n = array_size(json, "labels", what);
  const auto classes = static_cast<std::size_t>(p.classes);
  if (n * classes * 4 > kMaxLossValues)
    throw Error(ErrorKind::input, what + ": " + std::to_string(n) + " proposals x " + std::to_string(classes) +
                                      " classes exceed the " + std::to_string(kMaxLossValues) +
                                      " regression values a case may hold; use fewer proposals");
  const auto& labels = field(json, "labels", what);
  for (std::size_t i = 0; i < n; ++i) {
    if (!labels[i].is_number_integer() || labels[i].get<std::int64_t>() < 0 || labels[i].get<std::int64_t>() >= p.classes)
      malformed(what + ".labels[" + std::to_string(i) + "]", "a class in [0, " + std::to_string(p.classes) + ")",
                labels[i]);
    p.labels.push_back(labels[i].get<std::int64_t>());
  }
  p.class_logits = doubles_from_json(json, "class_logits", what, n * classes);
  p.box_regression = doubles_from_json(json, "box_regression", what, n * classes * 4);
  p.regression_targets = doubles_from_json(json, "regression_targets", what, n * 4);
  return p;
}

nlohmann::json to_json(const MatcherProblem& p) {
  return {{"ground_truths", p.ground_truths}, {"predictions", p.predictions}, {"quality", doubles_json(p.quality)},
          {"high", json_double(p.high)},        {"low", json_double(p.low)},
          {"allow_low_quality_matches", p.allow_low_quality_matches}};
}

MatcherProblem matcher_problem_from_json(const nlohmann::json& json) {
  const std::string what = "matcher input";
  MatcherProblem p;
  p.ground_truths = integer_field(json, "ground_truths", what, 0, 1 << 16);
  p.predictions = integer_field(json, "predictions", what, 0, 1 << 20);
  const auto values = static_cast<std::size_t>(p.ground_truths) * static_cast<std::size_t>(p.predictions);
  if (values > kMaxLossValues)
    throw Error(ErrorKind::input, what + ": " + std::to_string(values) + " quality values exceed the " +
                                      std::to_string(kMaxLossValues) + " a case may hold; use fewer predictions");
  p.quality = doubles_from_json(json, "quality", what, values);
  p.high = double_from_json(field(json, "high", what), what + ".high");
  p.low = double_from_json(field(json, "low", what), what + ".low");
  if (!(p.low <= p.high)) malformed(what + ".low", "a threshold <= high", field(json, "low", what));
  const auto& allow = field(json, "allow_low_quality_matches", what);
  if (!allow.is_boolean()) malformed(what + ".allow_low_quality_matches", "true or false", allow);
  p.allow_low_quality_matches = allow.get<bool>();
  return p;
}

nlohmann::json to_json(const GiouLossProblem& p) {
  return {{"boxes1", boxes_json(p.boxes1)},
          {"boxes2", boxes_json(p.boxes2)},
          {"eps", json_double(p.eps)},
          {"reduction", reduction_name(p.reduction)}};
}

GiouLossProblem giou_loss_problem_from_json(const nlohmann::json& json) {
  const std::string what = "giou_loss input";
  GiouLossProblem p;
  p.boxes1 = boxes_from_json(field(json, "boxes1", what), what + ".boxes1");
  p.boxes2 = boxes_from_json(field(json, "boxes2", what), what + ".boxes2");
  if (p.boxes1.size() != p.boxes2.size())
    throw Error(ErrorKind::input, what + ": " + std::to_string(p.boxes1.size()) + " boxes1 but " +
                                      std::to_string(p.boxes2.size()) + " boxes2; the loss pairs them one to one");
  p.eps = double_from_json(field(json, "eps", what), what + ".eps");
  p.reduction = reduction_from_json(json, what);
  return p;
}

nlohmann::json to_json(const RoiAlignProblem& p) {
  return {{"input", feature_map_json(p.input)},         {"rois", rois_json(p.rois)},
          {"spatial_scale", json_double(p.spatial_scale)}, {"pooled_height", p.pooled_height},
          {"pooled_width", p.pooled_width},             {"sampling_ratio", p.sampling_ratio},
          {"aligned", p.aligned}};
}

nlohmann::json to_json(const RoiPoolProblem& p) {
  return {{"input", feature_map_json(p.input)},
          {"rois", rois_json(p.rois)},
          {"spatial_scale", json_double(p.spatial_scale)},
          {"pooled_height", p.pooled_height},
          {"pooled_width", p.pooled_width}};
}

namespace {

RoiAlignProblem roi_align_fields_from_json(const nlohmann::json& json, const std::string& what, MapField map) {
  RoiFields f = roi_fields_from_json(json, what, map);
  RoiAlignProblem p{std::move(f.input), std::move(f.rois), f.spatial_scale, f.pooled_height, f.pooled_width};
  p.sampling_ratio = integer_field(json, "sampling_ratio", what, -1024, 1024);
  const auto& aligned = field(json, "aligned", what);
  if (!aligned.is_boolean()) malformed(what + ".aligned", "true or false", aligned);
  p.aligned = aligned.get<bool>();
  return p;
}

}  // namespace

RoiAlignProblem roi_align_problem_from_json(const nlohmann::json& json) {
  return roi_align_fields_from_json(json, "roi_align input", MapField::input);
}

namespace {

// A backward's "grad": `expected` numbers ([K, C_out, PH, PW], `shape` says which).
std::vector<double> gradient_from_json(const nlohmann::json& json, const std::string& what, std::size_t expected,
                                       const std::string& shape) {
  if (static_cast<double>(expected) > static_cast<double>(kMaxFeatureValues))
    throw Error(ErrorKind::input, what + ": the gradient " + shape + " holds " + std::to_string(expected) +
                                      " values, more than " + std::to_string(kMaxFeatureValues) +
                                      "; use fewer RoIs or channels");
  const auto& grad = field(json, "grad", what);
  if (!grad.is_array() || grad.size() != expected)
    malformed(what + ".grad", "an array of " + std::to_string(expected) + " numbers (" + shape + ")", grad);
  std::vector<double> values;
  values.reserve(expected);
  for (std::size_t i = 0; i < grad.size(); ++i)
    values.push_back(double_from_json(grad[i], what + ".grad[" + std::to_string(i) + "]"));
  return values;
}

// A backward's case: its forward's fields with the map's shape for the map, and the gradient.
nlohmann::json backward_json(nlohmann::json forward, const FeatureMap& map, const std::vector<double>& gradient) {
  forward.erase("input");
  forward["input_shape"] = {map.batch, map.channels, map.height, map.width};
  nlohmann::json grad = nlohmann::json::array();
  for (double v : gradient) grad.push_back(json_double(v));
  forward["grad"] = std::move(grad);
  return forward;
}

}  // namespace

nlohmann::json to_json(const RoiAlignBackwardProblem& p) {
  return backward_json(to_json(p.forward), p.forward.input, p.grad);
}

RoiAlignBackwardProblem roi_align_backward_problem_from_json(const nlohmann::json& json, bool position_sensitive) {
  const std::string what = position_sensitive ? "ps_roi_align_backward input" : "roi_align_backward input";
  RoiAlignBackwardProblem p{roi_align_fields_from_json(json, what, MapField::input_shape), {}};
  const RoiAlignProblem& f = p.forward;
  const std::int64_t bins = f.pooled_height * f.pooled_width;
  if (position_sensitive && f.input.channels % bins != 0)
    throw Error(ErrorKind::input, what + ".input_shape: " + std::to_string(f.input.channels) +
                                      " channels, not a multiple of pooled_height * pooled_width = " +
                                      std::to_string(bins) + "; a position-sensitive gradient has C / (PH * PW) channels");
  const std::int64_t channels_out = position_sensitive ? f.input.channels / bins : f.input.channels;
  const auto expected = f.rois.size() * static_cast<std::size_t>(channels_out * bins);
  p.grad = gradient_from_json(json, what, expected, "[K, " + std::to_string(channels_out) + ", pooled_height, pooled_width]");
  return p;
}

RoiPoolProblem roi_pool_problem_from_json(const nlohmann::json& json) {
  RoiFields f = roi_fields_from_json(json, "roi_pool input");
  return {std::move(f.input), std::move(f.rois), f.spatial_scale, f.pooled_height, f.pooled_width};
}

nlohmann::json to_json(const RoiPoolBackwardProblem& p) {
  nlohmann::json json = backward_json(to_json(p.forward), p.forward.input, p.grad);
  json["argmax"] = p.argmax;
  return json;
}

RoiPoolBackwardProblem roi_pool_backward_problem_from_json(const nlohmann::json& json) {
  const std::string what = "roi_pool_backward input";
  RoiFields f = roi_fields_from_json(json, what, MapField::input_shape);
  RoiPoolBackwardProblem p{{std::move(f.input), std::move(f.rois), f.spatial_scale, f.pooled_height, f.pooled_width}, {}, {}};
  const FeatureMap& map = p.forward.input;
  const auto expected = p.forward.rois.size() * static_cast<std::size_t>(map.channels * f.pooled_height * f.pooled_width);
  p.grad = gradient_from_json(json, what, expected, "[K, C, pooled_height, pooled_width]");
  const auto& argmax = field(json, "argmax", what);
  if (!argmax.is_array() || argmax.size() != expected)
    malformed(what + ".argmax", "an array of " + std::to_string(expected) + " integers (one per gradient value)", argmax);
  for (std::size_t i = 0; i < argmax.size(); ++i) {
    const std::string where = what + ".argmax[" + std::to_string(i) + "]";
    const auto& a = argmax[i];
    if (!a.is_number_integer() || a.get<std::int64_t>() < -1 || a.get<std::int64_t>() >= map.height * map.width)
      malformed(where, "-1 or an index into the " + std::to_string(map.height) + " x " + std::to_string(map.width) +
                           " plane", a);
    p.argmax.push_back(a.get<std::int64_t>());
  }
  return p;
}

nlohmann::json to_json(const PsRoiPoolBackwardProblem& p) {
  return backward_json(to_json(p.forward), p.forward.input, p.grad);
}

PsRoiPoolBackwardProblem ps_roi_pool_backward_problem_from_json(const nlohmann::json& json) {
  const std::string what = "ps_roi_pool_backward input";
  RoiFields f = roi_fields_from_json(json, what, MapField::input_shape);
  PsRoiPoolBackwardProblem p{{std::move(f.input), std::move(f.rois), f.spatial_scale, f.pooled_height, f.pooled_width}, {}};
  const FeatureMap& map = p.forward.input;
  const std::int64_t bins = f.pooled_height * f.pooled_width;
  if (map.channels % bins != 0)
    throw Error(ErrorKind::input, what + ".input_shape: " + std::to_string(map.channels) +
                                      " channels, not a multiple of pooled_height * pooled_width = " +
                                      std::to_string(bins) + "; a position-sensitive gradient has C / (PH * PW) channels");
  const auto expected = p.forward.rois.size() * static_cast<std::size_t>(map.channels);
  p.grad = gradient_from_json(json, what, expected,
                              "[K, " + std::to_string(map.channels / bins) + ", pooled_height, pooled_width]");
  return p;
}

BoxIouProblem box_iou_problem_from_json(const nlohmann::json& json) {
  BoxIouProblem problem;
  problem.boxes1 = boxes_from_json(field(json, "boxes1", "box_iou input"), "box_iou input.boxes1");
  problem.boxes2 = boxes_from_json(field(json, "boxes2", "box_iou input"), "box_iou input.boxes2");
  if (problem.boxes1.size() * problem.boxes2.size() > kMaxIousPerCase)
    throw Error(ErrorKind::input, "box_iou input: " + std::to_string(problem.boxes1.size()) + " x " +
                                      std::to_string(problem.boxes2.size()) + " IoUs exceed the " +
                                      std::to_string(kMaxIousPerCase) + " a case may hold; split boxes1");
  return problem;
}

}  // namespace detfuzz::corpus

namespace detfuzz::corpus {

nlohmann::json to_json(const DeformConv2dProblem& p) {
  return {{"input_shape", {p.batch, p.in_channels, p.height, p.width}},
          {"out_channels", p.out_channels},
          {"kernel", {p.kernel_h, p.kernel_w}},
          {"stride", {p.stride_h, p.stride_w}},
          {"padding", {p.pad_h, p.pad_w}},
          {"dilation", {p.dilation_h, p.dilation_w}},
          {"groups", p.groups},
          {"offset_groups", p.offset_groups},
          {"use_mask", p.use_mask},
          {"input", doubles_json(p.input)},
          {"weight", doubles_json(p.weight)},
          {"offset", doubles_json(p.offset)},
          {"mask", doubles_json(p.mask)},
          {"bias", doubles_json(p.bias)}};
}

namespace {

// A pair of integers [a, b], each in [min, max].
std::pair<std::int64_t, std::int64_t> integer_pair(const nlohmann::json& json, const std::string& key,
                                                   const std::string& what, std::int64_t min, std::int64_t max) {
  const auto& pair = field(json, key, what);
  const std::string expected = "[height, width], integers in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
  if (!pair.is_array() || pair.size() != 2 || !pair[0].is_number_integer() || !pair[1].is_number_integer())
    malformed(what + "." + key, expected, pair);
  const auto a = pair[0].get<std::int64_t>(), b = pair[1].get<std::int64_t>();
  if (a < min || a > max || b < min || b > max) malformed(what + "." + key, expected, pair);
  return {a, b};
}

}  // namespace

DeformConv2dProblem deform_conv2d_problem_from_json(const nlohmann::json& json) {
  const std::string what = "deform_conv2d input";
  DeformConv2dProblem p;
  const auto& shape = field(json, "input_shape", what);
  if (!shape.is_array() || shape.size() != 4) malformed(what + ".input_shape", "[batch, channels, height, width]", shape);
  std::int64_t* dims[4] = {&p.batch, &p.in_channels, &p.height, &p.width};
  for (std::size_t d = 0; d < 4; ++d) {
    const std::int64_t least = d == 0 ? 0 : 1;  // an empty batch is a case of its own
    if (!shape[d].is_number_integer() || shape[d].get<std::int64_t>() < least ||
        shape[d].get<std::int64_t>() > kMaxFeatureValues)
      malformed(what + ".input_shape[" + std::to_string(d) + "]", d == 0 ? "a non-negative integer" : "a positive integer",
                shape[d]);
    *dims[d] = shape[d].get<std::int64_t>();
  }
  p.out_channels = integer_field(json, "out_channels", what, 1, 1 << 16);
  std::tie(p.kernel_h, p.kernel_w) = integer_pair(json, "kernel", what, 1, 64);
  std::tie(p.stride_h, p.stride_w) = integer_pair(json, "stride", what, 1, 64);
  std::tie(p.pad_h, p.pad_w) = integer_pair(json, "padding", what, 0, 1024);
  std::tie(p.dilation_h, p.dilation_w) = integer_pair(json, "dilation", what, 1, 64);
  p.groups = integer_field(json, "groups", what, 1, 1 << 16);
  p.offset_groups = integer_field(json, "offset_groups", what, 1, 1 << 16);
  const auto& use_mask = field(json, "use_mask", what);
  if (!use_mask.is_boolean()) malformed(what + ".use_mask", "true or false", use_mask);
  p.use_mask = use_mask.get<bool>();
  if (p.out_height() <= 0 || p.out_width() <= 0)
    throw Error(ErrorKind::input, what + ": the output would be " + std::to_string(p.out_height()) + " x " +
                                      std::to_string(p.out_width()) +
                                      "; give a map at least as large as the dilated kernel minus the padding");
  // Every tensor's size from the shapes, each capped as a feature map is.
  const std::int64_t taps = p.kernel_h * p.kernel_w, plane = p.out_height() * p.out_width();
  auto count = [&](const char* name, std::initializer_list<std::int64_t> dims_of) {
    double total = 1;
    for (std::int64_t d : dims_of) total *= static_cast<double>(d);
    if (total > static_cast<double>(kMaxFeatureValues))
      throw Error(ErrorKind::input, what + "." + name + ": the shapes ask for " + nlohmann::json(total).dump() + " values, more than " +
                                        std::to_string(kMaxFeatureValues) + "; use a smaller map, batch or kernel");
    return static_cast<std::size_t>(total);
  };
  p.input = doubles_from_json(json, "input", what, count("input", {p.batch, p.in_channels, p.height, p.width}));
  p.weight = doubles_from_json(json, "weight", what, count("weight", {p.out_channels, p.in_channels / p.groups, taps}));
  p.offset = doubles_from_json(json, "offset", what, count("offset", {p.batch, 2 * p.offset_groups * taps, plane}));
  p.mask = doubles_from_json(json, "mask", what, p.use_mask ? count("mask", {p.batch, p.offset_groups * taps, plane}) : 0);
  p.bias = doubles_from_json(json, "bias", what, static_cast<std::size_t>(p.out_channels));
  return p;
}

}  // namespace detfuzz::corpus
