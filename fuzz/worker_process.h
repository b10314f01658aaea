// One worker process as its campaign sees it (fuzz/worker_runner.cpp drives two of them).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "corpus/atomic_file.h"
#include "fuzz/answer_staging.h"
#include "fuzz/case_timeout.h"
#include "fuzz/runner.h"

namespace detfuzz::fuzz {

class Zygote;

// One worker process: `detfuzz ... worker`, spoken to in JSON lines over pipes. It is
// started on first use and after every death.
//
// The worker stages each answer before the next case starts (a case that kills it is the one
// after the last answer; fuzz/answer_staging.h) and writes staged answers to its stdout in
// chunks. We do not wake for each write either: waking costs a
// context switch that, on 2 cores, preempts a worker (a flush per case measured 17-19 us,
// 5-6% of a worker's time). We sleep on a second pipe, the doorbell, which the worker rings
// once a message's answers are all out (or before its answers could fill the answer pipe),
// and read whatever answers are there then. A dead worker's doorbell wakes us too (end of
// file); the answer pipe's end then says it is gone, after every answer it wrote is taken.
class WorkerProcess {
 public:
  // The answer pipe: a batch's answers wait there until the doorbell rings.
  static constexpr int kAnswerPipeBytes = 1 << 20;
  // The worker's descriptors for the doorbell (`detfuzz worker --doorbell-fd`) and the
  // staged answers (`--answer-staging-fd`).
  static constexpr int kDoorbellFd = 3;
  static constexpr int kAnswerStagingFd = 4;
  enum class Outcome { answered, died, timed_out, interrupted };
  struct Reply {
    Outcome outcome = Outcome::answered;
    nlohmann::json answer;
    std::string death;  // "SIGSEGV", "exit 3"
    double limit_s = 0;  // a timeout's: the limit the case ran past
    std::string stderr_tail;
    std::optional<CaseOutcome> run;  // a run answer's short line, read (then `answer` is empty)
  };
  static Reply ended(Outcome outcome, std::string death, std::string stderr_tail);

  // Starts the process and asks it to say when it is ready, without waiting for the answer:
  // a spare warms up while another worker runs cases.
  void warm_up();

  WorkerProcess(const WorkerOptions& options, int index, Zygote* zygote);
  ~WorkerProcess() { stop(); }

  // Sends every message at once; nullopt, or the reply that says why it could not (the
  // worker died or never became ready). The answers are collected with collect().
  std::optional<Reply> submit(const std::vector<nlohmann::json>& messages);

  // Sends messages behind others whose answers are not all in. False if the worker cannot
  // take them: it died, and the answers it gave before, then its death, are still to be
  // collected (submit's died() would close the pipe they wait in).
  bool send_ahead(const std::vector<nlohmann::json>& messages);

  // The answers to `count` submitted messages in order, each within timeout_s of the
  // previous one (as we see them: we look at least every kLookSeconds while waiting). Stops
  // at the first death or timeout: the replies then end with it, and the messages after it
  // were not run.
  std::vector<Reply> collect(std::size_t count, double timeout_s, const CellTimeout* clock = nullptr);

  // `answers`: how many the messages ask for (a batch of cases is one message, one answer
  // per case).
  std::vector<Reply> requests(const std::vector<nlohmann::json>& messages, std::size_t answers, double timeout_s,
                              const CellTimeout* clock = nullptr);

 private:
  static constexpr double kLookSeconds = 1.0;

  void start();

  // A fork of the zygote (milliseconds); when the zygote is gone, a spawned worker instead,
  // which then says why it cannot start.
  int fork_from_zygote(int requests, int answers, int doorbell);

  int spawn(int requests, int answers, int doorbell);

  // The worker's wait status once it is gone (the zygote reaps its forks and tells us);
  // nullopt when it is not gone within timeout_s.
  std::optional<int> reaped(double timeout_s);

  void close_pipes();

  // `behind`: sent after messages still running, which the file keeps.
  void write_ahead(const std::string& lines, bool behind);

  bool send(const std::string& line);

  // `clock`: the cell's calibration, which gives the case in flight (once the worker has
  // said its size) the limit of its size, from its start; timeout_s bounds every wait anyway.
  Reply receive(double timeout_s, const CellTimeout* clock = nullptr);

  // Sleeps until the doorbell rings (or the worker dies, or timeout_ms pass), then takes in
  // every answer there is.
  void wait_for_answers(int timeout_ms);

  // Every answer byte in the pipe now.
  void take_pipe_answers();

  Reply died();

  void stop();

  // Once the worker is gone: the answers it staged that the pipe did not bring, after those
  // it did (a line cut short by its death is no answer).
  void take_staged_answers();

  // Without shared memory (no memfd here) the worker writes each answer at once: slower,
  // the same answers.
  static AnswerStaging shared_staging();

  Reply take_casualty();

  WorkerOptions options_;
  Zygote* zygote_;      // nullptr: every worker is spawned
  bool forked_ = false;  // this process came from the zygote (which reaps it)
  std::string stderr_path_;
  corpus::ScratchFile inflight_;
  std::string last_sent_;  // the last messages sent, as written ahead
  pid_t pid_ = -1;
  int to_ = -1, from_ = -1, doorbell_ = -1;
  bool pinged_ = false;
  bool answers_closed_ = false;  // the answer pipe reached its end
  std::string buffer_;  // answer bytes received; those before taken_ are taken
  std::size_t taken_ = 0;
  AnswerStaging staging_;
  std::uint64_t answers_taken_ = 0;  // answers received from this process
  // Its death (or hang), to tell once the answers staged before it are taken.
  std::optional<Reply> casualty_;
};

}  // namespace detfuzz::fuzz
