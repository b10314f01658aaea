#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "corpus/atomic_file.h"
#include "corpus/case_file.h"
#include "corpus/case_json.h"
#include "model/dtype.h"
#include "model/error.h"
#include "support/scratch_dir.h"

namespace detfuzz::corpus {
namespace {

namespace fs = std::filesystem;

std::uint64_t bits(double value) {
  std::uint64_t b;
  std::memcpy(&b, &value, sizeof b);
  return b;
}

CaseFile sample(std::vector<Box> boxes = {{0, 0, 3, 1}, {1, 0, 4, 1}}) {
  CaseFile file;
  file.op = "nms";
  file.target = "torchvision";
  file.dtype = "fp32";
  file.device = "cpu";
  std::vector<double> scores(boxes.size(), 0.5);
  file.input = to_json(NmsProblem{boxes, scores, 0.5});
  file.expect.fail = true;
  file.expect.kind = FindingKind::mismatch;
  file.expect.property = "oracle";
  file.minimization = {{"size", boxes.size()}};
  return file;
}

class CorpusDir : public testing::ScratchDirTest {
 protected:
  void SetUp() override {
    ScratchDirTest::SetUp();
    fs::create_directories(dir_);
  }
  std::string write(const std::string& name, const std::string& text) {
    std::string path = (dir_ / name).string();
    std::ofstream(path) << text;
    return path;
  }
};

TEST(CaseFile, ValuesRoundTripBitForBitIncludingLowPrecisionAndSpecials) {
  const double fp16_value = round_to(DType::fp16, 0.1);
  const double bf16_value = round_to(DType::bf16, 1.0 / 3);
  const double tiny = std::ldexp(1.0, -24);  // fp16's smallest subnormal
  CaseFile file = sample({{fp16_value, bf16_value, 65504, 1e30}, {-0.0, tiny, INFINITY, NAN}});
  CaseFile back = case_from_json(nlohmann::json::parse(canonical_text(file)), "test");
  NmsProblem original = nms_problem_from_json(file.input);
  NmsProblem reread = nms_problem_from_json(back.input);
  for (std::size_t i = 0; i < original.boxes.size(); ++i)
    for (double Box::*f : {&Box::x1, &Box::y1, &Box::x2, &Box::y2})
      EXPECT_EQ(bits(original.boxes[i].*f), bits(reread.boxes[i].*f)) << i;
  EXPECT_EQ(back.signature(), file.signature());
  EXPECT_EQ(canonical_text(back), canonical_text(file));
}

TEST(CaseFile, CanonicalTextKeepsBoxesOnOneLine) {
  const std::string text = canonical_text(sample());
  EXPECT_NE(text.find("[0.0, 0.0, 3.0, 1.0]"), std::string::npos) << text;
  EXPECT_NE(text.find("\"format\": \"detfuzz-case\""), std::string::npos);
}

TEST(CaseFile, NameIsAHashOfTheCaseNotOfItsProvenance) {
  CaseFile a = sample(), b = sample();
  b.origin = {{"seed", 99}};
  b.environment = {{"torch", "2.1"}};
  b.description = "other words";
  b.expect.reference = "a link";
  EXPECT_EQ(file_name(a), file_name(b));
  EXPECT_EQ(file_name(a).rfind("nms-fp32-mismatch-", 0), 0u) << file_name(a);
  CaseFile c = sample({{0, 0, 3, 1}});
  EXPECT_NE(file_name(a), file_name(c));
  CaseFile d = sample();
  d.expect.kind = FindingKind::order;
  EXPECT_NE(file_name(a), file_name(d));
}

// Both modes replace the whole file (a shorter text leaves no tail of the longer one)
// and leave no temporary beside it.
TEST_F(CorpusDir, EveryWriteModeReplacesTheWholeFileAndLeavesNoTemporary) {
  for (WriteMode mode : {WriteMode::durable, WriteMode::scratch}) {
    const std::string path = (dir_ / "target.jsonl").string();
    write_file_atomically(path, "{\"a\": 1}\n{\"b\": 2}\n", mode);
    write_file_atomically(path, "{\"c\": 3}\n", mode);
    std::ifstream in(path);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(text, "{\"c\": 3}\n");
    std::size_t files = 0;
    for (const auto& entry : fs::directory_iterator(dir_)) files += entry.is_regular_file();
    EXPECT_EQ(files, 1u);
    fs::remove(path);
  }
}

std::string file_text(const fs::path& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Shorter after longer and back, by exchange and by rename: the file holds the last
// contents whole, and once the writer is gone nothing but the file is left.
TEST_F(CorpusDir, ScratchFileHoldsExactlyTheLastContentsAndLeavesNothingElse) {
  for (auto replacement : {ScratchFile::Replacement::exchange, ScratchFile::Replacement::rename}) {
    const fs::path path = dir_ / "inflight.jsonl";
    {
      ScratchFile file(path.string(), replacement);
      for (const char* contents : {"{\"a\": 1}\n{\"b\": 2}\n", "{\"c\": 3}\n", "{\"d\": 44444}\n", "{}\n"}) {
        file.replace(contents);
        EXPECT_EQ(file_text(path), contents);
      }
    }
    std::size_t files = 0;
    for (const auto& entry : fs::directory_iterator(dir_)) files += entry.is_regular_file();
    const bool by_exchange = replacement == ScratchFile::Replacement::exchange;
    EXPECT_EQ(files, 1u) << "after writing by " << (by_exchange ? "exchange" : "rename");
    fs::remove(path);
  }
}

// A reader that opens the file while it is rewritten, again and again, finds one whole
// version each time: never a mix of two, never a cut one, never none.
TEST_F(CorpusDir, ScratchFileIsNeverTornNorAbsentForAReader) {
  const fs::path path = dir_ / "inflight.jsonl";
  const std::string longer = std::string(6000, 'a') + "\n", shorter = std::string(100, 'b') + "\n";
  ScratchFile file(path.string());
  file.replace(longer);
  std::atomic<bool> done{false};
  std::atomic<int> reads{0}, bad{0};
  std::string example;
  std::thread reader([&] {
    while (!done) {
      const std::string text = file_text(path);
      ++reads;
      if (text != longer && text != shorter && bad++ == 0)
        example = std::to_string(text.size()) + " chars from '" + text.substr(0, 12) + "'";
    }
  });
  for (int i = 0; i < 4000 || reads < 200; ++i) file.replace(i % 2 ? longer : shorter);
  done = true;
  reader.join();
  EXPECT_EQ(bad.load(), 0) << "of " << reads << " reads; the first held " << example;
}

TEST_F(CorpusDir, MalformedFilesNameTheFileAndTheProblem) {
  const std::string good = canonical_text(sample());
  struct Broken {
    std::string text, expected;
  };
  auto patched_text = [&](const nlohmann::json& patch) {
    nlohmann::json json = nlohmann::json::parse(good);
    json.merge_patch(patch);
    return json.dump();
  };
  std::vector<Broken> broken = {
      {good.substr(0, good.size() / 2), "not valid JSON"},
      {"", "is empty"},
      {"[1, 2]", "expected a JSON object"},
      {patched_text({{"format", "other"}}), "format"},
      {patched_text({{"format_version", 2}}), "version 2"},
      {patched_text({{"dtype", "fp8"}}), "dtype"},
      {patched_text({{"device", "tpu"}}), "device"},
      {patched_text({{"input", nullptr}}), "input"},
      {patched_text({{"expect", {{"result", "maybe"}}}}), "expect.result"},
      {patched_text({{"expect", {{"result", "fail"}, {"kind", "oops"}, {"property", "oracle"}}}}), "unknown finding kind"},
      {patched_text({{"expect", nullptr}}), "expect"},
  };
  for (std::size_t i = 0; i < broken.size(); ++i) {
    const std::string path = write("broken" + std::to_string(i) + ".json", broken[i].text);
    try {
      read_case_file(path);
      ADD_FAILURE() << "accepted: " << broken[i].text;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::input);
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(broken[i].expected), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(read_case_file((dir_ / "missing.json").string()), Error);
}

TEST_F(CorpusDir, StoreKeepsOneCasePerFailureAndTheSmallerWins) {
  const CaseFile big = sample({{0, 0, 3, 1}, {1, 0, 4, 1}, {9, 9, 10, 10}});
  const CaseFile small = sample();
  std::string first = store_case(big, dir_.string());
  std::string second = store_case(small, dir_.string());
  EXPECT_NE(first, second);
  EXPECT_EQ(list_case_files(dir_.string()), std::vector<std::string>{second});
  EXPECT_EQ(store_case(big, dir_.string()), second);  // the smaller one stays
  EXPECT_EQ(store_case(small, dir_.string()), second);  // the same case: stored once
  CaseFile other = sample();
  other.expect.kind = FindingKind::order;
  store_case(other, dir_.string());
  EXPECT_EQ(list_case_files(dir_.string()).size(), 2u);
  // Pass cases guard different bugs: they are never merged.
  CaseFile pass_a = sample(), pass_b = sample({{0, 0, 1, 1}});
  pass_a.expect = {};
  pass_b.expect = {};
  store_case(pass_a, dir_.string());
  store_case(pass_b, dir_.string());
  EXPECT_EQ(list_case_files(dir_.string()).size(), 4u);
  for (const auto& path : list_case_files(dir_.string())) EXPECT_NO_THROW(read_case_file(path));
}

}  // namespace
}  // namespace detfuzz::corpus

namespace detfuzz::corpus {
namespace {

RoiAlignProblem roi_problem() {
  return {{2, 1, 1, 2, {1, 2, 3, 4}}, {{1, 0, 0, 1, 1}}, 0.25, 2, 3, -1, true};
}

TEST(CaseJson, RoiProblemsRoundTrip) {
  RoiAlignProblem p = roi_problem();
  RoiAlignProblem back = roi_align_problem_from_json(nlohmann::json::parse(to_json(p).dump()));
  EXPECT_EQ(back.input.values, p.input.values);
  EXPECT_EQ(back.input.batch, 2);
  EXPECT_EQ(back.rois, p.rois);
  EXPECT_EQ(back.spatial_scale, 0.25);
  EXPECT_EQ(back.pooled_width, 3);
  EXPECT_EQ(back.sampling_ratio, -1);
  EXPECT_TRUE(back.aligned);
  RoiPoolProblem pool{p.input, p.rois, 0.5, 1, 4};
  RoiPoolProblem pool_back = roi_pool_problem_from_json(to_json(pool));
  EXPECT_EQ(pool_back.rois, pool.rois);
  EXPECT_EQ(pool_back.pooled_width, 4);
}

TEST(CaseJson, BadRoiInputsNameTheFieldAndTheFix) {
  auto error_of = [](nlohmann::json patch) {
    nlohmann::json json = to_json(roi_problem());
    json.merge_patch(patch);
    try {
      roi_align_problem_from_json(json);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(error_of({{"input", {{"values", {1, 2, 3}}}}}).find("an array of 4 numbers"), std::string::npos);
  EXPECT_NE(error_of({{"rois", {{"first", 0, 0, 1, 1}}}}).find("rois[0][0]"), std::string::npos);
  EXPECT_EQ(error_of({{"rois", {{2, 0, 0, 1, 1}}}}), "accepted");  // out of the batch: a hostile case
  EXPECT_NE(error_of({{"input", {{"shape", {4096, 4096, 4096, 4096}}}}}).find("use a smaller map"), std::string::npos);
  EXPECT_NE(error_of({{"pooled_height", 0}}).find("pooled_height"), std::string::npos);
  EXPECT_NE(error_of({{"aligned", "yes"}}).find("true or false"), std::string::npos);
  EXPECT_NE(error_of({{"rois", {{0, 0, 0, 1}}}}).find("[batch_index, x1, y1, x2, y2]"), std::string::npos);
}

TEST(CaseJson, BatchedNmsRoundTripsWithItsOptions) {
  BatchedNmsProblem p{{{0, 0, 1, 1}, {-2, -2, -1, -1}}, {0.5, 0.25}, {7, 0}, 0.7, DType::fp16, true, 1};
  BatchedNmsProblem back = batched_nms_problem_from_json(nlohmann::json::parse(to_json(p).dump()));
  EXPECT_EQ(back.boxes, p.boxes);
  EXPECT_EQ(back.scores, p.scores);
  EXPECT_EQ(back.classes, p.classes);
  EXPECT_EQ(back.iou_threshold, 0.7);
  EXPECT_EQ(back.score_dtype, DType::fp16);
  EXPECT_TRUE(back.class_agnostic);
  EXPECT_EQ(back.max_num, 1);
  p.score_dtype.reset();
  EXPECT_FALSE(batched_nms_problem_from_json(to_json(p)).score_dtype.has_value());
}

TEST(CaseJson, BoxCoderRoundTripsInBothModesAndNamesBadFields) {
  BoxCoderProblem decode;
  decode.boxes = {{0, 0, 2, 2}};
  decode.deltas = {{0.5, -0.25, 10, NAN}};
  decode.weights = {10, 10, 5, 5};
  BoxCoderProblem back = box_coder_problem_from_json(nlohmann::json::parse(to_json(decode).dump()));
  EXPECT_EQ(back.boxes, decode.boxes);
  EXPECT_EQ(back.deltas[0][2], 10);
  EXPECT_TRUE(std::isnan(back.deltas[0][3]));
  EXPECT_EQ(back.weights, decode.weights);
  EXPECT_EQ(back.clip, decode.clip);
  BoxCoderProblem encode = decode;
  encode.mode = BoxCoderProblem::Mode::encode;
  encode.references = {{1, 1, 3, 3}};
  EXPECT_EQ(box_coder_problem_from_json(to_json(encode)).references, encode.references);
  auto error_of = [&](nlohmann::json patch) {
    nlohmann::json json = to_json(decode);
    json.merge_patch(patch);
    try {
      box_coder_problem_from_json(json);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(error_of({{"mode", "both"}}).find("\"decode\" or \"encode\""), std::string::npos);
  EXPECT_NE(error_of({{"weights", {1, 1, 0, 1}}}).find("weights[2]"), std::string::npos);
  EXPECT_NE(error_of({{"deltas", nlohmann::json::array()}}).find("1 boxes but 0 deltas"), std::string::npos);
}

TEST(CaseJson, BadBatchedNmsInputsNameTheFieldAndTheFix) {
  auto error_of = [](nlohmann::json patch) {
    nlohmann::json json = to_json(BatchedNmsProblem{{{0, 0, 1, 1}}, {0.5}, {0}, 0.5, std::nullopt, false, -1});
    json.merge_patch(patch);
    try {
      batched_nms_problem_from_json(json);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(error_of({{"classes", {0, 1}}}).find("an array of 1 class ids"), std::string::npos);
  EXPECT_NE(error_of({{"classes", {-1}}}).find("classes[0]"), std::string::npos);
  EXPECT_NE(error_of({{"scores", {0.5, 0.5}}}).find("1 boxes but 2 scores"), std::string::npos);
  EXPECT_NE(error_of({{"score_dtype", "fp8"}}).find("score_dtype"), std::string::npos);
  EXPECT_NE(error_of({{"max_num", -2}}).find("max_num"), std::string::npos);
  EXPECT_NE(error_of({{"class_agnostic", 1}}).find("true or false"), std::string::npos);
}

}  // namespace
}  // namespace detfuzz::corpus
