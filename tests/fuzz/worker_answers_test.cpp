// A worker's answers on their way to the campaign. AnswerStaging (fuzz/answer_staging.h):
// the answers a worker staged must survive its death, come back exactly once (neither those
// the pipe already brought nor any twice), and go out soon enough that the campaign never
// takes a slow case for a hung one. Run answers (fuzz/runner.h): what the campaign reads is
// what the worker measured, bit for bit, in the short line or in JSON.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "fuzz/answer_staging.h"
#include "fuzz/runner.h"
#include "fuzz/wire_format.h"
#include "model/error.h"

namespace detfuzz::fuzz {
namespace {

using namespace std::chrono_literals;
using Clock = AnswerStaging::Clock;

// The campaign's region and the worker's view of it, in one process (the worker's mapping
// is a second one of the same memory, as in the worker process).
struct Region {
  AnswerStaging campaign = AnswerStaging::create();
  AnswerStaging worker = AnswerStaging::attach(::dup(campaign.fd()));
};

TEST(AnswerStaging, AWorkerThatDiesLeavesEveryAnswerThePipeDidNotBring) {
  Region region;
  for (const char* line : {"{\"a\":0}\n", "{\"a\":1}\n", "{\"a\":2}\n"}) ASSERT_TRUE(region.worker.stage(line));
  EXPECT_EQ(region.campaign.unsent(0), "{\"a\":0}\n{\"a\":1}\n{\"a\":2}\n");
  EXPECT_EQ(region.campaign.unsent(2), "{\"a\":2}\n");
  EXPECT_EQ(region.campaign.unsent(3), "");
}

TEST(AnswerStaging, AnswersTheWorkerSentAreNotTakenAgain) {
  Region region;
  const Clock::time_point now = Clock::now();
  ASSERT_TRUE(region.worker.stage("0\n"));
  ASSERT_TRUE(region.worker.stage("1\n"));
  // Written to the pipe, then died before saying so: the campaign's count tells them apart.
  EXPECT_EQ(region.campaign.unsent(2), "");
  region.worker.sent_staged(now);
  EXPECT_EQ(region.worker.staged(), "");
  EXPECT_EQ(region.campaign.unsent(2), "");
  ASSERT_TRUE(region.worker.stage("2\n"));
  EXPECT_EQ(region.campaign.unsent(2), "2\n") << "numbered after those sent";
  region.worker.sent_staged(now);
  // An answer too large to stage goes out at once, and counts.
  EXPECT_FALSE(region.worker.stage(std::string(AnswerStaging::kCapacityBytes + 1, 'x')));
  region.worker.sent_one_unstaged(now);
  ASSERT_TRUE(region.worker.stage("4\n"));
  EXPECT_EQ(region.campaign.unsent(4), "4\n");
  EXPECT_EQ(region.campaign.unsent(5), "");
}

TEST(AnswerStaging, StagingFillsUpToItsRoomAndNoFurther) {
  Region region;
  const std::string line(1000, 'x');
  std::size_t staged = 0;
  while (region.worker.stage(line + "\n")) ++staged;
  EXPECT_EQ(staged, AnswerStaging::kCapacityBytes / 1001);
  EXPECT_EQ(region.worker.staged().size(), staged * 1001);
  EXPECT_EQ(region.campaign.unsent(staged - 1), line + "\n");
}

TEST(AnswerStaging, SendingIsDueOnceTheLastWriteIsOldOrTheAnswersAreMany) {
  Region region;
  const Clock::time_point t0 = Clock::now();
  region.worker.sent_staged(t0);
  EXPECT_FALSE(region.worker.send_due(t0 + 1h)) << "nothing staged, nothing to send";
  ASSERT_TRUE(region.worker.stage("0\n"));
  EXPECT_FALSE(region.worker.send_due(t0 + AnswerStaging::kMostDelay - 1us));
  // The clock runs from the last write, not from the oldest staged answer: a case that took
  // long and the one after it may not wait together.
  EXPECT_TRUE(region.worker.send_due(t0 + AnswerStaging::kMostDelay));
  region.worker.sent_staged(t0 + 1s);
  ASSERT_TRUE(region.worker.stage("1\n"));
  EXPECT_FALSE(region.worker.send_due(t0 + 1s + 1ms));
  const std::string line(999, 'x');
  while (region.worker.staged().size() < AnswerStaging::kSendBytes) ASSERT_TRUE(region.worker.stage(line + "\n"));
  EXPECT_TRUE(region.worker.send_due(t0 + 1s + 1ms));
}

TEST(AnswerStaging, ANewWorkerStartsEmptyAWorkerWithoutARegionSendsAtOnceAndAWrongRegionIsAnError) {
  Region region;
  ASSERT_TRUE(region.worker.stage("0\n"));
  region.worker.sent_staged(Clock::now());
  ASSERT_TRUE(region.worker.stage("1\n"));
  region.campaign.reset();
  AnswerStaging next = AnswerStaging::attach(::dup(region.campaign.fd()));
  EXPECT_EQ(region.campaign.unsent(0), "");
  ASSERT_TRUE(next.stage("0\n"));
  EXPECT_EQ(region.campaign.unsent(0), "0\n") << "numbered from 0 again";

  // A descriptor that is not the shared memory (descriptors mixed up when the worker was
  // started) must not quietly become a worker that sends every answer at once.
  int pipe_ends[2];
  ASSERT_EQ(::pipe(pipe_ends), 0);
  try {
    AnswerStaging::attach(pipe_ends[0]);
    ADD_FAILURE() << "a pipe was taken for the shared memory";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--answer-staging-fd"), std::string::npos) << e.what();
  }
  ::close(pipe_ends[0]);
  ::close(pipe_ends[1]);

  AnswerStaging none = AnswerStaging::attach(-1);
  EXPECT_FALSE(none.stage("0\n"));
  EXPECT_EQ(none.staged(), "");
  EXPECT_FALSE(none.send_due(Clock::now()));
}

std::uint64_t bits(double value) {
  std::uint64_t b;
  std::memcpy(&b, &value, sizeof b);
  return b;
}

void expect_same_numbers(const CaseOutcome& read, const CaseOutcome& written) {
  EXPECT_EQ(read.size, written.size);
  EXPECT_EQ(bits(read.judgement.max_normalized_error), bits(written.judgement.max_normalized_error));
  EXPECT_EQ(bits(read.input_magnitude), bits(written.input_magnitude));
  EXPECT_EQ(bits(read.times.generation_s), bits(written.times.generation_s));
  EXPECT_EQ(bits(read.times.kernel_s), bits(written.times.kernel_s));
  EXPECT_EQ(bits(read.times.oracle_s), bits(written.times.oracle_s));
  EXPECT_EQ(bits(read.times.judge_s), bits(written.times.judge_s));
}

// The case in flight, as the campaign times it: it appears once its size is known, names the
// answer it will be (after every answer staged or sent), and is gone when the case ends.
TEST(AnswerStaging, TheCaseInFlightIsSeenWithItsStartSizeAndAnswerNumber) {
  Region region;
  EXPECT_FALSE(region.campaign.case_in_flight());
  ASSERT_TRUE(region.worker.stage("0\n"));
  region.worker.sent_staged(Clock::now());
  ASSERT_TRUE(region.worker.stage("1\n"));
  const Clock::time_point start = Clock::now();
  region.worker.case_started(start);
  EXPECT_FALSE(region.campaign.case_in_flight()) << "its size is not known while it is generated";
  region.worker.case_sized(30000);
  const auto in_flight = region.campaign.case_in_flight();
  ASSERT_TRUE(in_flight);
  EXPECT_EQ(in_flight->answer_number, 2u) << "one answer sent, one staged: this case's is the third";
  EXPECT_EQ(in_flight->size, 30000u);
  EXPECT_EQ(in_flight->started, start);
  region.worker.case_ended();
  EXPECT_FALSE(region.campaign.case_in_flight());
  region.worker.case_started(Clock::now());
  region.worker.case_sized(0);
  ASSERT_TRUE(region.campaign.case_in_flight());
  EXPECT_EQ(region.campaign.case_in_flight()->size, 0u) << "an empty case is a size, not an unknown one";
  region.campaign.reset();
  EXPECT_FALSE(region.campaign.case_in_flight()) << "a new worker has no case in flight";
}

TEST(RunAnswers, APassingCaseIsAShortLineThatReadsBackBitForBit) {
  // Reports and --seed replays compare errors exactly: no digit may be lost on the way.
  for (const double error : {0.1, 1.0 / 3.0, 0.0, -1.0, 5e-324, 2.2250738585072014e-308, 1.7976931348623157e308,
                             0.23582646591630504, std::numeric_limits<double>::infinity()}) {
    CaseOutcome written;
    written.size = 30000;
    written.judgement.max_normalized_error = error;
    written.input_magnitude = error == -1.0 ? -1.0 : std::nextafter(1000.0, 2000.0);
    written.times = {2.5e-06, 1.0 / 7.0, 3e-7, 0.000123426};
    const std::string line = run_answer_line(written);
    ASSERT_EQ(line.front(), 'p') << line;
    ASSERT_EQ(line.back(), '\n') << line;
    EXPECT_EQ(line.find('\n'), line.size() - 1) << "one line per answer";
    const std::optional<CaseOutcome> read = outcome_from_short_line(line.substr(0, line.size() - 1));
    ASSERT_TRUE(read) << line;
    EXPECT_TRUE(read->judgement.verdicts.empty());
    expect_same_numbers(*read, written);
  }
}

TEST(RunAnswers, ACaseWithVerdictsIsAJsonAnswerAndABrokenShortLineIsAnError) {
  CaseOutcome failing;
  failing.size = 3;
  failing.judgement.verdicts.push_back({});
  failing.judgement.verdicts.back().property = "keep";
  failing.judgement.verdicts.back().message = "p 1 2 3";
  const std::string line = run_answer_line(failing);
  EXPECT_FALSE(outcome_from_short_line(line));
  const nlohmann::json answer = nlohmann::json::parse(line);
  ASSERT_EQ(answer.at("verdicts").size(), 1u);
  EXPECT_EQ(verdict_from_json(answer.at("verdicts").at(0)).property, "keep");
  EXPECT_EQ(answer.at("size"), 3);

  EXPECT_FALSE(outcome_from_short_line(R"({"ready":true})"));
  for (const char* broken : {"p", "p 3 0.5 -1 1 2 3", "p 3 0.5 -1 1 2 3 x", "p 3 0.5x -1 1 2 3 4", "p -3 0.5 -1 1 2 3 4",
                             "p 3 0.5 -1 1 2 3 4 5"})
    EXPECT_THROW(outcome_from_short_line(broken), Error) << broken;
}

}  // namespace
}  // namespace detfuzz::fuzz
