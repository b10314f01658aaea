// Our own parsers, fuzzed: whatever bytes a case file holds, reading it either works or
// raises detfuzz::Error{input} (exit 2 with a message); never another exception, a crash or
// a hang. Valid case files of every op are mutated (truncation, byte flips, insertions,
// deletions, type swaps), 3,000 times from a fixed seed: bounded, and the same every run.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "corpus/case_file.h"
#include "corpus/case_json.h"
#include "model/error.h"

namespace detfuzz::corpus {
namespace {

std::vector<std::string> seed_texts() {
  std::vector<std::string> texts;
  auto add = [&](const std::string& op, const nlohmann::json& input) {
    CaseFile file;
    file.op = op;
    file.target = "torchvision";
    file.dtype = "fp16";
    file.device = "cpu";
    file.input = input;
    file.expect.fail = true;
    file.expect.kind = FindingKind::nan;
    file.expect.property = "oracle";
    file.origin = {{"seed", 1}, {"reproduce", "1/2/3/4"}};
    texts.push_back(canonical_text(file));
  };
  add("nms", to_json(NmsProblem{{{0, 0, 1, 1}, {0.5, 0, 2, NAN}}, {0.9, 0.1}, 0.5}));
  add("box_iou", to_json(BoxIouProblem{{{0, 0, 1, 1}}, {{-1, -1, 3, 3}}}));
  {
    BoxCoderProblem coder;
    coder.boxes = {{0, 0, 2, 2}};
    coder.deltas = {{0.5, NAN, 10, -1}};
    add("box_coder", to_json(coder));
    coder.mode = BoxCoderProblem::Mode::encode;
    coder.references = {{1, 1, 3, 3}};
    add("box_coder", to_json(coder));
  }
  {
    RegressionLossProblem loss;
    loss.input = {0.5, NAN};
    loss.target = {0, 1};
    add("regression_loss", to_json(loss));
    FastRcnnLossProblem head;
    head.classes = 2;
    head.class_logits = {1, -1};
    head.labels = {1};
    head.box_regression = std::vector<double>(8, 0.5);
    head.regression_targets = {0, 0, 0, 0};
    add("fast_rcnn_loss", to_json(head));
  }
  add("giou_loss", to_json(GiouLossProblem{{{0, 0, 1, 1}}, {{0, 0, 0, NAN}}, 1e-7, RegressionLossProblem::Reduction::mean}));
  add("box_area", to_json(BoxAreaProblem{{{0, 0, 1, 1}, {0, 0, 2, NAN}}}));
  add("matcher", to_json(MatcherProblem{2, 2, {0.7, 0.3, NAN, 0.5}, 0.7, 0.3, true}));
  add("batched_nms", to_json(BatchedNmsProblem{{{0, 0, 1, 1}, {0, 0, 2, 2}}, {0.9, 0.1}, {0, 3}, 0.5, DType::fp16, true, 1}));
  add("roi_align", to_json(RoiAlignProblem{{1, 2, 1, 2, {1, 2, 3, 4}}, {{0, 0, 0, 1, 1}}, 0.5, 2, 2, -1, true}));
  add("roi_pool", to_json(RoiPoolProblem{{1, 1, 2, 2, {1, 2, 3, 4}}, {{0, 0, 0, 1, 1}}, 1.0, 1, 1}));
  add("ps_roi_align", to_json(RoiAlignProblem{{1, 4, 1, 1, {1, 2, 3, 4}}, {{0, 0, 0, 1, 1}}, 0.5, 2, 2, -1, true}));
  add("ps_roi_pool", to_json(RoiPoolProblem{{1, 4, 1, 1, {1, 2, 3, 4}}, {{0, 0, 0, 1, 1}}, 1.0, 2, 2}));
  return texts;
}

// Reads a case file and its op's input the way replay does.
void read_everything(const std::string& path) {
  CaseFile file = read_case_file(path);
  if (file.op == "nms") nms_problem_from_json(file.input);
  if (file.op == "box_iou") box_iou_problem_from_json(file.input);
  if (file.op == "batched_nms") batched_nms_problem_from_json(file.input);
  if (file.op == "box_coder") box_coder_problem_from_json(file.input);
  if (file.op == "regression_loss") regression_loss_problem_from_json(file.input);
  if (file.op == "fast_rcnn_loss") fast_rcnn_loss_problem_from_json(file.input);
  if (file.op == "matcher") matcher_problem_from_json(file.input);
  if (file.op == "box_area") box_area_problem_from_json(file.input);
  if (file.op == "giou_loss") giou_loss_problem_from_json(file.input);
  if (file.op == "roi_align" || file.op == "ps_roi_align") roi_align_problem_from_json(file.input);
  if (file.op == "roi_pool" || file.op == "ps_roi_pool") roi_pool_problem_from_json(file.input);
}

std::string mutate(std::string text, int kind, std::size_t at, unsigned char byte, const std::string& snippet) {
  at = text.empty() ? 0 : at % text.size();
  switch (kind) {
    case 0: return text.substr(0, at);                      // truncated
    case 1: text[at] = static_cast<char>(byte); return text;  // a flipped byte
    case 2: return text.insert(at, snippet);                // something inserted
    case 3: return text.erase(at, snippet.size());          // something deleted
    default: {                                              // a number turned into another type
      const auto digit = text.find_first_of("0123456789", at);
      return digit == std::string::npos ? text : text.replace(digit, 1, snippet);
    }
  }
}

TEST(ParserFuzz, AnyBytesGiveAValidCaseOrACleanInputError) {
  const std::vector<std::string> seeds = seed_texts();
  const std::vector<std::string> snippets = {"\"", "{", "]", "null", "true", "\"nan\"", "-1e999", "1e400", ",",
                                             "[[1,2,3,4,5,6]]", "\"inf\"", "4294967297", "\\u0000", "-0"};
  const std::string path =
      (std::filesystem::temp_directory_path() / ("detfuzz-parser-fuzz-" + std::to_string(::getpid()) + ".json")).string();
  std::uint64_t state = 20261202;
  auto next = [&state] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return state >> 17;
  };
  int accepted = 0, refused = 0;
  for (int iteration = 0; iteration < 3000; ++iteration) {
    std::string text = seeds[next() % seeds.size()];
    for (std::uint64_t round = 0, rounds = 1 + next() % 3; round < rounds; ++round)
      text = mutate(text, static_cast<int>(next() % 5), next(), static_cast<unsigned char>(next()),
                    snippets[next() % snippets.size()]);
    std::ofstream(path, std::ios::binary) << text;
    try {
      read_everything(path);
      ++accepted;
    } catch (const Error& e) {
      ASSERT_EQ(e.kind(), ErrorKind::input) << e.what();
      ++refused;
    } catch (const std::exception& e) {
      FAIL() << "a mutated case file raised something other than an input error: " << e.what() << "\n" << text;
    }
  }
  std::filesystem::remove(path);
  EXPECT_GT(accepted, 100);  // mutations that keep a valid case exist...
  EXPECT_GT(refused, 1000);  // ...and most break it
}

TEST(ParserFuzz, HugeCasesAreRefusedWithTheNumbers) {
  nlohmann::json big = {{"boxes1", nlohmann::json::array()}, {"boxes2", nlohmann::json::array()}};
  for (int i = 0; i < 5000; ++i) {
    big["boxes1"].push_back({0, 0, 1, 1});
    big["boxes2"].push_back({0, 0, 1, 1});
  }
  try {
    box_iou_problem_from_json(big);
    FAIL() << "a 5000 x 5000 box_iou case was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("5000 x 5000"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace detfuzz::corpus
