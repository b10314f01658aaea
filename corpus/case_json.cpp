#include "corpus/case_json.h"

#include <cmath>
#include <limits>

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

nlohmann::json to_json(const BoxIouProblem& problem) {
  return {{"boxes1", boxes_json(problem.boxes1)}, {"boxes2", boxes_json(problem.boxes2)}};
}

NmsProblem nms_problem_from_json(const nlohmann::json& json) {
  NmsProblem problem;
  problem.boxes = boxes_from_json(field(json, "boxes", "nms input"), "nms input.boxes");
  const auto& scores = field(json, "scores", "nms input");
  if (!scores.is_array()) malformed("nms input.scores", "an array of numbers", scores);
  for (std::size_t i = 0; i < scores.size(); ++i)
    problem.scores.push_back(double_from_json(scores[i], "nms input.scores[" + std::to_string(i) + "]"));
  if (problem.scores.size() != problem.boxes.size())
    throw Error(ErrorKind::input, "nms input: " + std::to_string(problem.boxes.size()) +
                                      " boxes but " + std::to_string(problem.scores.size()) +
                                      " scores; give one score per box");
  problem.iou_threshold =
      double_from_json(field(json, "iou_threshold", "nms input"), "nms input.iou_threshold");
  return problem;
}

BoxIouProblem box_iou_problem_from_json(const nlohmann::json& json) {
  BoxIouProblem problem;
  problem.boxes1 = boxes_from_json(field(json, "boxes1", "box_iou input"), "box_iou input.boxes1");
  problem.boxes2 = boxes_from_json(field(json, "boxes2", "box_iou input"), "box_iou input.boxes2");
  return problem;
}

}  // namespace detfuzz::corpus
