#include "fuzz/runner.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <sstream>

#include "corpus/atomic_file.h"
#include "fuzz/answer_staging.h"
#include "fuzz/case_timeout.h"
#include "fuzz/zygote.h"
#include "fuzz/campaign.h"
#include "model/error.h"

extern char** environ;

namespace detfuzz::fuzz {

nlohmann::json verdict_json(const compare::Verdict& verdict) {
  nlohmann::json json = {{"kind", std::string(finding_kind_name(verdict.kind))},
                         {"property", verdict.property},
                         {"message", verdict.message},
                         {"details", verdict.details}};
  if (!verdict.outside_contract.empty()) json["outside_contract"] = verdict.outside_contract;
  return json;
}

compare::Verdict verdict_from_json(const nlohmann::json& json) {
  compare::Verdict verdict;
  verdict.kind = parse_finding_kind(json.at("kind").get<std::string>()).value_or(FindingKind::exception);
  verdict.property = json.at("property").get<std::string>();
  verdict.message = json.at("message").get<std::string>();
  verdict.details = json.value("details", nlohmann::json());
  verdict.outside_contract = json.value("outside_contract", std::string());
  return verdict;
}

namespace {

constexpr char kShortRunAnswer = 'p';

// A judgement as the worker answers it; a run's also with its size, times and magnitude.
nlohmann::json judgement_answer(const compare::Judgement& judgement) {
  nlohmann::json verdicts = nlohmann::json::array();
  for (const auto& v : judgement.verdicts) verdicts.push_back(verdict_json(v));
  return {{"verdicts", std::move(verdicts)}, {"max_normalized_error", judgement.max_normalized_error}};
}

}  // namespace

std::string run_answer_line(const CaseOutcome& outcome) {
  const CaseTimes& t = outcome.times;
  if (outcome.judgement.verdicts.empty())  // fmt's shortest form reads back as the same double
    return fmt::format("{} {} {} {} {} {} {} {}\n", kShortRunAnswer, outcome.size,
                       outcome.judgement.max_normalized_error, outcome.input_magnitude, t.generation_s, t.kernel_s,
                       t.oracle_s, t.judge_s);
  nlohmann::json answer = judgement_answer(outcome.judgement);
  answer["size"] = outcome.size;
  answer["times"] = {t.generation_s, t.kernel_s, t.oracle_s, t.judge_s};
  if (outcome.input_magnitude >= 0) answer["magnitude"] = outcome.input_magnitude;
  return answer.dump() + "\n";
}

std::optional<CaseOutcome> outcome_from_short_line(std::string_view line) {
  if (line.empty() || line.front() != kShortRunAnswer) return std::nullopt;
  const char* at = line.data() + 1;
  const char* const end = line.data() + line.size();
  auto next = [&](auto& value) {
    while (at < end && *at == ' ') ++at;
    const auto [stop, error] = std::from_chars(at, end, value);
    if (error != std::errc() || (stop < end && *stop != ' ' && *stop != '\n'))
      throw Error(ErrorKind::internal, "a worker's answer is not a run answer: " + std::string(line.substr(0, 200)));
    at = stop;
  };
  CaseOutcome outcome;
  CaseTimes& t = outcome.times;
  next(outcome.size);
  next(outcome.judgement.max_normalized_error);
  next(outcome.input_magnitude);
  for (double* time : {&t.generation_s, &t.kernel_s, &t.oracle_s, &t.judge_s}) next(*time);
  if (at != end && std::string_view(at, static_cast<std::size_t>(end - at)) != "\n")
    throw Error(ErrorKind::internal, "a worker's run answer has more than its numbers: " + std::string(line.substr(0, 200)));
  return outcome;
}

// ---------------------------------------------------------------- in process

std::vector<CaseOutcome> InProcessRunner::run_cases(const OpHarness& op, const std::vector<CaseRequest>& requests) {
  std::vector<CaseOutcome> outcomes;
  for (const auto& request : requests) outcomes.push_back(op.run_case(request));
  return outcomes;
}

compare::Judgement InProcessRunner::judge_input(const OpHarness& op, const CaseRequest& request,
                                                const nlohmann::json& input) {
  return op.judge_json(input, request.target, request.dtype, request.device);
}

std::optional<std::string> InProcessRunner::unsupported_reason(const OpHarness& op, const std::string& target,
                                                               DType dtype, Device device) {
  return op.unsupported_reason(target, dtype, device);
}

InputJudge InProcessRunner::input_judge(const OpHarness&, const CaseRequest&) { return nullptr; }

Evaluation InProcessRunner::evaluate(const OpHarness& op, const nlohmann::json& input, const std::string& target,
                                     DType dtype, Device device) {
  return op.evaluate(input, target, dtype, device);
}

// ---------------------------------------------------------------- worker processes

namespace {

using Clock = std::chrono::steady_clock;

std::string signal_name(int signal) {
  const char* abbreviation = sigabbrev_np(signal);
  return abbreviation ? std::string("SIG") + abbreviation : "signal " + std::to_string(signal);
}

// `fd` moved above the descriptors a worker is given (0 to 4), still closed on exec.
int above_worker_descriptors(int fd) {
  if (fd > 4) return fd;
  const int moved = ::fcntl(fd, F_DUPFD_CLOEXEC, 5);
  if (moved < 0) throw Error(ErrorKind::internal, std::string("cannot move a descriptor: ") + std::strerror(errno));
  ::close(fd);
  return moved;
}

std::string tail_of_file(const std::string& path, std::size_t max_lines = 12) {
  std::ifstream file(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(file, line);) {
    lines.push_back(line);
    if (lines.size() > max_lines) lines.erase(lines.begin());
  }
  std::string tail;
  for (const auto& line : lines) tail += line + "\n";
  return tail;
}

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
class Worker {
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
  static Reply ended(Outcome outcome, std::string death, std::string stderr_tail) {
    Reply reply;
    reply.outcome = outcome;
    reply.death = std::move(death);
    reply.stderr_tail = std::move(stderr_tail);
    return reply;
  }

  // Starts the process and asks it to say when it is ready, without waiting for the answer:
  // a spare warms up while another worker runs cases.
  void warm_up() {
    if (pid_ > 0) return;
    start();
    pinged_ = send(nlohmann::json{{"cmd", "ping"}}.dump() + "\n");
  }

  Worker(const WorkerOptions& options, int index, Zygote* zygote)
      : options_(options),
        zygote_(zygote),
        stderr_path_(options.scratch_dir + "/worker-" + std::to_string(index) + ".stderr"),
        inflight_(options.scratch_dir + "/inflight-" + std::to_string(index) + ".jsonl"),
        staging_(shared_staging()) {
    corpus::ensure_directory(options.scratch_dir);
  }
  ~Worker() { stop(); }

  // Sends every message at once; nullopt, or the reply that says why it could not (the
  // worker died or never became ready). The answers are collected with collect().
  std::optional<Reply> submit(const std::vector<nlohmann::json>& messages) {
    if (casualty_) return take_casualty();  // it died after its last answer, before these
    if (pid_ <= 0) warm_up();
    if (pinged_) {
      // Loading LibTorch and torchvision takes a moment: not the case's time.
      pinged_ = false;
      Reply ready = receive(120.0);
      if (ready.outcome != Outcome::answered) return ready;
    }
    // The whole batch in one write: a system call per case is a measurable share of a
    // fast op's case.
    std::string lines;
    for (const auto& message : messages) lines += message.dump() + "\n";
    write_ahead(lines, false);
    if (!send(lines)) return died();
    return std::nullopt;
  }

  // Sends messages behind others whose answers are not all in. False if the worker cannot
  // take them: it died, and the answers it gave before, then its death, are still to be
  // collected (submit's died() would close the pipe they wait in).
  bool send_ahead(const std::vector<nlohmann::json>& messages) {
    if (pid_ <= 0 || pinged_ || casualty_) return false;
    std::string lines;
    for (const auto& message : messages) lines += message.dump() + "\n";
    write_ahead(lines, true);
    return send(lines);
  }

  // The answers to `count` submitted messages in order, each within timeout_s of the
  // previous one (as we see them: we look at least every kLookSeconds while waiting). Stops
  // at the first death or timeout: the replies then end with it, and the messages after it
  // were not run.
  std::vector<Reply> collect(std::size_t count, double timeout_s, const CellTimeout* clock = nullptr) {
    std::vector<Reply> replies;
    for (std::size_t i = 0; i < count; ++i) {
      replies.push_back(receive(timeout_s, clock));
      if (replies.back().outcome != Outcome::answered) break;
    }
    return replies;
  }

  // `answers`: how many the messages ask for (a batch of cases is one message, one answer
  // per case).
  std::vector<Reply> requests(const std::vector<nlohmann::json>& messages, std::size_t answers, double timeout_s,
                              const CellTimeout* clock = nullptr) {
    if (auto failed = submit(messages)) return {*failed};
    return collect(answers, timeout_s, clock);
  }

 private:
  static constexpr double kLookSeconds = 1.0;

  void start() {
    int to_worker[2], from_worker[2], doorbell[2];
    if (pipe2(to_worker, O_CLOEXEC) != 0 || pipe2(from_worker, O_CLOEXEC) != 0 || pipe2(doorbell, O_CLOEXEC) != 0)
      throw Error(ErrorKind::internal, std::string("cannot create pipes for a worker: ") + std::strerror(errno));
    // The child's ends become its descriptors 0, 1, 3 and 4 in turn: none may be one of those
    // before its turn (a dup2 onto it would replace it).
    for (int* fd : {&to_worker[0], &from_worker[1], &doorbell[1]}) *fd = above_worker_descriptors(*fd);
    // Before the worker starts: it reads the answer pipe's size to know when to ring early.
    ::fcntl(from_worker[1], F_SETPIPE_SZ, kAnswerPipeBytes);  // best effort: the default 64 KiB works, with more rings
    // A full doorbell is rung already: the worker must never block on it. And we must never
    // block reading answers that are not all there yet.
    ::fcntl(doorbell[1], F_SETFL, O_NONBLOCK);
    ::fcntl(doorbell[0], F_SETFL, O_NONBLOCK);
    ::fcntl(from_worker[0], F_SETFL, O_NONBLOCK);
    const int error = zygote_ && zygote_->alive() ? fork_from_zygote(to_worker[0], from_worker[1], doorbell[1])
                                                  : spawn(to_worker[0], from_worker[1], doorbell[1]);
    ::close(to_worker[0]);
    ::close(from_worker[1]);
    ::close(doorbell[1]);
    to_ = to_worker[1];
    from_ = from_worker[0];
    doorbell_ = doorbell[0];
    if (error != 0) {
      close_pipes();
      pid_ = -1;
      throw Error(ErrorKind::internal, "cannot start a worker (" + options_.executable + "): " + std::strerror(error));
    }
    buffer_.clear();
    taken_ = 0;
    answers_closed_ = false;
    staging_.reset();
    answers_taken_ = 0;
    casualty_.reset();
  }

  // A fork of the zygote (milliseconds); when the zygote is gone, a spawned worker instead,
  // which then says why it cannot start.
  int fork_from_zygote(int requests, int answers, int doorbell) {
    const int stderr_fd = ::open(stderr_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (stderr_fd < 0) return errno;
    std::vector<int> descriptors{requests, answers, stderr_fd, doorbell};
    if (staging_.fd() >= 0) descriptors.push_back(staging_.fd());
    pid_ = zygote_->fork_worker(descriptors);
    ::close(stderr_fd);
    forked_ = pid_ > 0;
    return forked_ ? 0 : spawn(requests, answers, doorbell);
  }

  int spawn(int requests, int answers, int doorbell) {
    forked_ = false;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, requests, STDIN_FILENO);
    posix_spawn_file_actions_adddup2(&actions, answers, STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&actions, doorbell, kDoorbellFd);
    if (staging_.fd() >= 0) posix_spawn_file_actions_adddup2(&actions, staging_.fd(), kAnswerStagingFd);
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, stderr_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    std::vector<std::string> args{options_.executable};
    args.insert(args.end(), options_.arguments.begin(), options_.arguments.end());
    args.insert(args.end(), {"worker", "--doorbell-fd", std::to_string(kDoorbellFd)});
    if (staging_.fd() >= 0) args.insert(args.end(), {"--answer-staging-fd", std::to_string(kAnswerStagingFd)});
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    // posix_spawn execs at once: no copy of this process's LibTorch thread pools runs.
    const int error = posix_spawn(&pid_, options_.executable.c_str(), &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    return error;
  }

  // The worker's wait status once it is gone (the zygote reaps its forks and tells us);
  // nullopt when it is not gone within timeout_s.
  std::optional<int> reaped(double timeout_s) {
    if (forked_) return zygote_->exit_status(pid_, timeout_s);
    int status = 0;
    const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
    for (;;) {
      const pid_t reaped = ::waitpid(pid_, &status, WNOHANG);
      if (reaped == pid_) return status;
      if (reaped < 0 || Clock::now() >= deadline) return std::nullopt;
      ::usleep(1000);
    }
  }

  void close_pipes() {
    for (int* fd : {&to_, &from_, &doorbell_}) {
      if (*fd >= 0) ::close(*fd);
      *fd = -1;
    }
  }

  // `behind`: sent after messages still running, which the file keeps.
  void write_ahead(const std::string& lines, bool behind) {
    // The messages about to be sent (a batch of cases is one), one per line, on disk before
    // they run: what a person finds after the whole campaign died. A ScratchFile: this runs
    // for every batch and every minimization step. A message is sent behind one other at
    // most (WorkerRunner::prefetch).
    inflight_.replace(behind ? last_sent_ + lines : lines);
    last_sent_ = lines;
  }

  bool send(const std::string& line) {
    for (std::size_t written = 0; written < line.size();) {
      const ssize_t n = ::write(to_, line.data() + written, line.size() - written);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      written += static_cast<std::size_t>(n);
    }
    return true;
  }

  // `clock`: the cell's calibration, which gives the case in flight (once the worker has
  // said its size) the limit of its size, from its start; timeout_s bounds every wait anyway.
  Reply receive(double timeout_s, const CellTimeout* clock = nullptr) {
    auto after = [](Clock::time_point start, double seconds) {
      return start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
    };
    const auto deadline = after(Clock::now(), timeout_s);
    for (;;) {
      const auto newline = buffer_.find('\n', taken_);
      if (newline != std::string::npos) {
        Reply reply;
        try {
          const std::string_view line(buffer_.data() + taken_, newline - taken_);
          reply.run = outcome_from_short_line(line);
          if (!reply.run) reply.answer = nlohmann::json::parse(line);
        } catch (const std::exception&) {
          taken_ = newline + 1;
          stop();
          return ended(Outcome::died, "garbled answer", tail_of_file(stderr_path_));
        }
        taken_ = newline + 1;  // not erased: a batch's answers would move once per answer
        ++answers_taken_;
        return reply;
      }
      if (casualty_) return take_casualty();
      if (answers_closed_) {  // every answer it wrote is taken: it died after them and those it staged
        casualty_ = died();
        take_staged_answers();
        continue;
      }
      if (stop_requested()) {  // SIGINT/SIGTERM: abandon the case in flight
        stop();
        return ended(Outcome::interrupted, "interrupted", "");
      }
      auto due = deadline;
      double limit_s = timeout_s;
      if (const auto in_flight = clock ? staging_.case_in_flight() : std::nullopt) {
        const double own_limit_s = clock->limit_s(in_flight->size);
        if (after(in_flight->started, own_limit_s) < due) {
          due = after(in_flight->started, own_limit_s);
          limit_s = own_limit_s;
        }
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(due - Clock::now()).count();
      if (left <= 0) {
        stop();
        take_staged_answers();  // the answers before the case that hung
        casualty_ = ended(Outcome::timed_out, "timeout", tail_of_file(stderr_path_));
        casualty_->limit_s = limit_s;
        continue;
      }
      // With a clock, a case that starts while we sleep must be looked at before its own
      // limit passes (the floor at the least): a look every 25 ms costs nothing.
      const long long look_ms = clock ? 25 : static_cast<long long>(kLookSeconds * 1000);
      wait_for_answers(static_cast<int>(std::min<long long>(left, look_ms)));
    }
  }

  // Sleeps until the doorbell rings (or the worker dies, or timeout_ms pass), then takes in
  // every answer there is.
  void wait_for_answers(int timeout_ms) {
    // Part of an answer in: the worker may be blocked writing the rest, so its data wakes
    // us too (only answers larger than half the pipe, which the worker rings before).
    const bool partial = buffer_.size() > taken_;
    pollfd fds[2] = {{doorbell_, POLLIN, 0}, {from_, POLLIN, 0}};
    if (::poll(fds, partial ? 2 : 1, timeout_ms) < 0 && errno != EINTR)
      throw Error(ErrorKind::internal, std::string("cannot wait for a worker: ") + std::strerror(errno));
    char chunk[256];
    while (::read(doorbell_, chunk, sizeof chunk) > 0) {
    }
    take_pipe_answers();
  }

  // Every answer byte in the pipe now.
  void take_pipe_answers() {
    buffer_.erase(0, taken_);
    taken_ = 0;
    char chunk[65536];
    for (;;) {
      const ssize_t n = ::read(from_, chunk, sizeof chunk);
      if (n > 0) {
        buffer_.append(chunk, static_cast<std::size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      answers_closed_ = n == 0;  // end of file: the worker is gone, every answer it wrote is in
      return;
    }
  }

  Reply died() {
    Reply reply;
    reply.outcome = Outcome::died;
    close_pipes();
    // The worker is gone or going (its stdout closed); a second to exit, then it is killed.
    std::optional<int> status = reaped(1.0);
    if (!status) {
      ::kill(pid_, SIGKILL);
      status = reaped(10.0);
    }
    if (status) {
      if (WIFSIGNALED(*status)) reply.death = signal_name(WTERMSIG(*status));
      else if (WIFEXITED(*status)) reply.death = "exit " + std::to_string(WEXITSTATUS(*status));
    }
    if (reply.death.empty()) reply.death = "lost";
    pid_ = -1;
    reply.stderr_tail = tail_of_file(stderr_path_);
    return reply;
  }

  void stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    reaped(10.0);
    pid_ = -1;
    if (from_ >= 0) take_pipe_answers();  // what it wrote before it was killed (the pipe ends now)
    close_pipes();
  }

  // Once the worker is gone: the answers it staged that the pipe did not bring, after those
  // it did (a line cut short by its death is no answer).
  void take_staged_answers() {
    const std::size_t last_newline = buffer_.rfind('\n');
    buffer_.erase(last_newline == std::string::npos || last_newline < taken_ ? taken_ : last_newline + 1);
    const auto in_buffer = static_cast<std::uint64_t>(std::count(buffer_.begin() + static_cast<std::ptrdiff_t>(taken_), buffer_.end(), '\n'));
    buffer_ += staging_.unsent(answers_taken_ + in_buffer);
  }

  // Without shared memory (no memfd here) the worker writes each answer at once: slower,
  // the same answers.
  static AnswerStaging shared_staging() {
    try {
      return AnswerStaging::create(above_worker_descriptors);
    } catch (const Error& e) {
      static std::once_flag said;
      std::call_once(said, [&] { std::cerr << "detfuzz: " << e.what() << "; workers write each answer at once\n"; });
      return {};
    }
  }

  Reply take_casualty() {
    Reply reply = std::move(*casualty_);
    casualty_.reset();
    return reply;
  }

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

nlohmann::json cell_json(const std::string& op, const std::string& target, DType dtype, Device device) {
  return {{"op", op}, {"target", target}, {"dtype", std::string(dtype_name(dtype))}, {"device", device_name(device)}};
}

class WorkerRunner final : public CaseRunner {
 public:
  explicit WorkerRunner(WorkerOptions options)
      : options_(std::move(options)),
        zygote_(start_zygote(options_)),
        workers_{std::make_unique<Worker>(options_, 0, zygote_.get()),
                 std::make_unique<Worker>(options_, 1, zygote_.get())} {
    ::signal(SIGPIPE, SIG_IGN);  // a dead worker's pipe must be an error, not our death
  }

  void warm_up() override { workers_[0]->warm_up(); }

  std::vector<CaseOutcome> run_cases(const OpHarness& op, const std::vector<CaseRequest>& requests) override {
    // The oldest batch prefetched, if these are its cases (its answers, or none where it
    // must be sent again); anything else prefetched is received and dropped.
    std::vector<Worker::Reply> replies;
    if (!prefetched_.empty() && prefetched_.front().op == &op && prefetched_.front().requests == requests) {
      receive_prefetched(1);
      replies = std::move(prefetched_.front().replies);
      prefetched_.pop_front();
    } else {
      receive_prefetched(prefetched_.size());
      prefetched_.clear();
    }
    std::vector<CaseOutcome> outcomes;
    CellTimeout& clock = cell_timeout(op, requests.front());
    while (outcomes.size() < requests.size()) {
      if (replies.empty()) {
        const std::vector<CaseRequest> rest(requests.begin() + static_cast<std::ptrdiff_t>(outcomes.size()), requests.end());
        replies = send_to_worker({runs_message(op, rest)}, rest.size(), clock.limit_s(), &clock);
      }
      for (const Worker::Reply& reply : replies) {
        if (reply.outcome == Worker::Outcome::interrupted) return outcomes;
        const CaseRequest& request = requests[outcomes.size()];
        if (reply.outcome == Worker::Outcome::timed_out && reply.limit_s < clock.ceiling_s() && !clock.hang_confirmed) {
          // A suspect: alone, in a fresh worker, with the ceiling. A slow case answers (and
          // calibrates the cell); a hang confirms the cell's hangs.
          const Worker::Reply again = send_to_worker({runs_message(op, {request})}, 1, clock.ceiling_s()).front();
          if (again.outcome == Worker::Outcome::interrupted) return outcomes;
          if (again.outcome == Worker::Outcome::timed_out) clock.hang_confirmed = true;
          outcomes.push_back(outcome_of(again, op, request, clock, reply.limit_s));
          continue;
        }
        if (reply.outcome == Worker::Outcome::timed_out) clock.hang_confirmed = true;  // past the ceiling, or confirmed
        outcomes.push_back(outcome_of(reply, op, request, clock, reply.limit_s));
      }
      replies.clear();
    }
    return outcomes;
  }

  // The worker starts on these cases as soon as it is done with those sent before: the
  // campaign sends the next batch before it takes in the one before, so the worker never
  // waits while the campaign reads, parses and bookkeeps a batch (about 6% of a lane's time
  // with one batch in flight). run_cases with the same requests collects them; any other
  // request first receives them. Two in flight at most: a batch (kMaxBatch cases, about
  // 15 KB) always fits in the request pipe beside the one the worker is reading, so
  // sending never blocks on a worker that is blocked on us.
  void prefetch(const OpHarness& op, const std::vector<CaseRequest>& requests) override {
    if (requests.empty()) return;
    if (prefetched_.size() >= kMostInFlight) receive_prefetched(prefetched_.size() - kMostInFlight + 1);
    CellTimeout& clock = cell_timeout(op, requests.front());
    Prefetched batch{&op, requests, clock.limit_s(), &clock, requests.size(), {}};
    const std::vector<nlohmann::json> message{runs_message(op, requests)};
    const bool behind = std::any_of(prefetched_.begin(), prefetched_.end(), [](const Prefetched& b) { return b.pending > 0; });
    if (behind) {
      // A worker that cannot take it died in the batch before, whose answers say so when
      // received: not this batch's doing. It is sent again when run.
      if (!workers_[0]->send_ahead(message)) batch.pending = 0;
    } else if (auto failed = workers_[0]->submit(message)) {
      batch.pending = 0;
      batch.replies = {*failed};
      after_casualty(failed->outcome);
    }
    prefetched_.push_back(std::move(batch));
  }

  compare::Judgement judge_input(const OpHarness& op, const CaseRequest& request,
                                 const nlohmann::json& input) override {
    nlohmann::json message = cell_json(op.name(), request.target, request.dtype, request.device);
    message["cmd"] = "judge";
    message["input"] = input;
    // Shrinking a confirmed hang: each candidate that still hangs costs the calibrated limit
    // for its size, not the ceiling.
    CellTimeout& clock = cell_timeout(op, request);
    const double limit = clock.hang_confirmed ? clock.limit_s(op.size_of(input)) : clock.ceiling_s();
    Worker::Reply reply = send_to_worker({message}, 1, limit, clock.hang_confirmed ? &clock : nullptr).front();
    if (reply.outcome == Worker::Outcome::answered) {
      checked(reply.answer);
      return judgement_from(reply.answer);
    }
    compare::Judgement judgement;
    judgement.verdicts.push_back(casualty(reply, &clock, limit));
    return judgement;
  }

  std::optional<std::string> unsupported_reason(const OpHarness& op, const std::string& target, DType dtype,
                                                Device device) override {
    nlohmann::json message = cell_json(op.name(), target, dtype, device);
    message["cmd"] = "probe";
    Worker::Reply reply = send_to_worker({message}, 1, options_.timeout_rule.ceiling_s).front();
    // A probe that kills the worker is a finding the campaign will meet again, not a reason.
    if (reply.outcome != Worker::Outcome::answered) return std::nullopt;
    checked(reply.answer);
    if (reply.answer.at("unsupported").is_null()) return std::nullopt;
    return reply.answer.at("unsupported").get<std::string>();
  }

  InputJudge input_judge(const OpHarness& op, const CaseRequest& request) override {
    return [this, &op, request](const nlohmann::json& input) { return judge_input(op, request, input); };
  }

  Evaluation evaluate(const OpHarness& op, const nlohmann::json& input, const std::string& target, DType dtype,
                      Device device) override {
    nlohmann::json message = cell_json(op.name(), target, dtype, device);
    message["cmd"] = "evaluate";
    message["input"] = input;
    const double case_timeout = options_.timeout_rule.ceiling_s * (1.0 + static_cast<double>(op.size_of(input)) / 1000.0);
    Worker::Reply reply = send_to_worker({message}, 1, case_timeout).front();
    Evaluation evaluation;
    evaluation.size = op.size_of(input);
    if (reply.outcome != Worker::Outcome::answered) {
      evaluation.judgement.verdicts.push_back(casualty(reply, nullptr, case_timeout));
      return evaluation;
    }
    checked(reply.answer);
    evaluation.judgement = judgement_from(reply.answer);
    evaluation.output = reply.answer.value("output", nlohmann::json());
    evaluation.side_by_side = reply.answer.value("side_by_side", "");
    return evaluation;
  }

 private:
  // A reply as the case's outcome; an answered case's time calibrates its cell.
  // `suspected_at_s`: the limit that first called the case hung (the ceiling, or a
  // calibrated limit that the ceiling then confirmed).
  CaseOutcome outcome_of(const Worker::Reply& reply, const OpHarness& op, const CaseRequest& request,
                         CellTimeout& clock, double suspected_at_s) {
    CaseOutcome outcome;
    if (reply.outcome == Worker::Outcome::answered && reply.run) {
      outcome = *reply.run;
    } else if (reply.outcome == Worker::Outcome::answered) {
      checked(reply.answer);
      outcome.judgement = judgement_from(reply.answer);
      outcome.size = reply.answer.value("size", static_cast<std::size_t>(0));
      if (reply.answer.contains("times")) {
        const auto& t = reply.answer.at("times");
        outcome.times = {t.at(0).get<double>(), t.at(1).get<double>(), t.at(2).get<double>(), t.at(3).get<double>()};
      }
      outcome.input_magnitude = reply.answer.value("magnitude", -1.0);
    } else {
      // The case in flight killed its worker; the ones after it run on a fresh one.
      outcome.judgement.verdicts.push_back(casualty(reply, &clock, suspected_at_s));
      outcome.size = op.size_of(op.generated_input(request));  // generation is pure: redo it here
      return outcome;
    }
    clock.observe(outcome.size, outcome.times.generation_s + outcome.times.judge_s);
    return outcome;
  }

  // Each cell's case-time calibration (fuzz/case_timeout.h).
  CellTimeout& cell_timeout(const OpHarness& op, const CaseRequest& request) {
    const std::string key = fmt::format("{}/{}/{}/{}/{}/{}", op.name(), request.target, dtype_name(request.dtype),
                                        device_name(request.device), request.max_boxes, request.hostile);
    auto found = cells_.find(key);
    if (found == cells_.end()) {
      CaseTimeoutRule rule = options_.timeout_rule;
      rule.ceiling_s = timeout(op, request);
      found = cells_.emplace(key, CellTimeout(rule, op.cost_exponent())).first;
    }
    return found->second;
  }

  double timeout(const OpHarness& op, const CaseRequest& request) const {
    return options_.timeout_rule.ceiling_s * (1.0 + static_cast<double>(op.largest_case(request.max_boxes)) / 1000.0);
  }

  static void checked(const nlohmann::json& answer) {
    if (answer.contains("error"))
      throw Error(ErrorKind::internal, "worker: " + answer.at("error").get<std::string>());
  }

  static compare::Judgement judgement_from(const nlohmann::json& answer) {
    compare::Judgement judgement;
    for (const auto& v : answer.at("verdicts")) judgement.verdicts.push_back(verdict_from_json(v));
    judgement.max_normalized_error = answer.value("max_normalized_error", -1.0);
    return judgement;
  }

  // `clock`: the cell's calibration (nullptr: the case ran under the ceiling alone).
  static compare::Verdict casualty(const Worker::Reply& reply, const CellTimeout* clock, double suspected_at_s) {
    compare::Verdict verdict;
    if (reply.outcome == Worker::Outcome::timed_out) {
      verdict.kind = FindingKind::hang;
      verdict.property = "timeout";
      if (!clock || suspected_at_s >= clock->ceiling_s())
        verdict.message = fmt::format("no answer within {:.3g} s: the worker was killed", reply.limit_s);
      else
        verdict.message = fmt::format(
            "no answer within {:.3g} s ({:g} x the slowest of the cell's {} measured cases, floor {:g} s); the "
            "cell's first such case ran past the full {:.3g} s limit too: the worker was killed",
            reply.limit_s, CaseTimeoutRule{}.headroom, clock->measured(), CaseTimeoutRule{}.floor_s, clock->ceiling_s());
    } else {
      verdict.kind = FindingKind::crash;
      verdict.property = reply.death;
      verdict.message = "the worker died (" + reply.death + ") running the case";
    }
    std::string tail = reply.stderr_tail;
    if (!tail.empty()) {
      std::string last = tail.substr(0, tail.size() - 1);
      last = last.substr(last.rfind('\n') == std::string::npos ? 0 : last.rfind('\n') + 1);
      verdict.message += "; last stderr line: " + last.substr(0, 200);
    }
    verdict.details = {{"death", reply.death}, {"stderr_tail", tail}};
    return verdict;
  }

  // After a worker dies, the spare (warmed up meanwhile) takes over and a new spare starts:
  // kernels that crash often cost a swap, not a LibTorch start, per death.
  std::vector<Worker::Reply> send_to_worker(const std::vector<nlohmann::json>& messages, std::size_t answers,
                                           double timeout_s, const CellTimeout* clock = nullptr) {
    receive_prefetched(prefetched_.size());  // their answers come first on the pipe
    std::vector<Worker::Reply> replies = workers_[0]->requests(messages, answers, timeout_s, clock);
    after_casualty(replies.back().outcome);
    return replies;
  }

  void after_casualty(Worker::Outcome outcome) {
    if (outcome == Worker::Outcome::died || outcome == Worker::Outcome::timed_out) {
      std::swap(workers_[0], workers_[1]);
      workers_[1]->warm_up();
    }
  }

  // Receives the answers of the `count` oldest prefetched batches (kept for run_cases). A
  // death or timeout ends its batch's answers; the batches after it went to the dead worker
  // and are sent again when run.
  void receive_prefetched(std::size_t count) {
    for (std::size_t i = 0; i < count && i < prefetched_.size(); ++i) {
      Prefetched& batch = prefetched_[i];
      if (batch.pending == 0) continue;
      batch.replies = workers_[0]->collect(batch.pending, batch.timeout_s, batch.clock);
      batch.pending = 0;
      const Worker::Outcome outcome = batch.replies.back().outcome;
      if (outcome == Worker::Outcome::died || outcome == Worker::Outcome::timed_out) {
        for (std::size_t later = i + 1; later < prefetched_.size(); ++later) prefetched_[later].pending = 0;
        after_casualty(outcome);
        return;
      }
    }
  }

  // A batch of one cell's cases as one message (one line to write ahead, parse and send,
  // instead of one per case); the worker answers each case on its own line as it ends.
  static nlohmann::json runs_message(const OpHarness& op, const std::vector<CaseRequest>& requests) {
    const CaseRequest& first = requests.front();
    nlohmann::json message = cell_json(op.name(), first.target, first.dtype, first.device);
    message["cmd"] = "runs";
    message["max_boxes"] = first.max_boxes;
    message["hostile"] = first.hostile;
    nlohmann::json cases = nlohmann::json::array();
    for (const CaseRequest& r : requests) {
      if (r.target != first.target || r.dtype != first.dtype || r.device != first.device ||
          r.max_boxes != first.max_boxes || r.hostile != first.hostile)
        throw Error(ErrorKind::internal, "a batch of cases mixes cells");
      cases.push_back({std::to_string(r.case_seed), r.generator_size});
    }
    message["cases"] = std::move(cases);
    return message;
  }

  // Batches sent ahead, oldest first: answers still on the pipe (pending), or received
  // (replies; none for a batch the worker could not take, which run_cases sends again).
  struct Prefetched {
    const OpHarness* op;
    std::vector<CaseRequest> requests;
    double timeout_s;
    const CellTimeout* clock;
    std::size_t pending;
    std::vector<Worker::Reply> replies;
  };
  static constexpr std::size_t kMostInFlight = 2;
  std::deque<Prefetched> prefetched_;

  // Started at once: it loads LibTorch while the campaign sets up (nullptr: workers are
  // spawned, as when DETFUZZ_NO_ZYGOTE is set).
  static std::unique_ptr<Zygote> start_zygote(const WorkerOptions& options) {
    if (std::getenv("DETFUZZ_NO_ZYGOTE")) return nullptr;
    corpus::ensure_directory(options.scratch_dir);
    try {
      return std::make_unique<Zygote>(options.executable, options.arguments, options.scratch_dir + "/zygote.stderr");
    } catch (const Error& e) {
      std::cerr << "detfuzz: " << e.what() << "; workers are spawned one by one\n";
      return nullptr;
    }
  }

  WorkerOptions options_;
  std::unique_ptr<Zygote> zygote_;
  std::unique_ptr<Worker> workers_[2];
  std::map<std::string, CellTimeout> cells_;
};

// ---------------------------------------------------------------- worker side

// The cell a message names: its op (nullptr when unknown) and a request for its cases.
struct MessageCell {
  const OpHarness* op = nullptr;
  CaseRequest request;
};

MessageCell message_cell(const Registry& registry, const nlohmann::json& message) {
  MessageCell cell{registry.find(message.at("op").get<std::string>()), {}};
  CaseRequest& r = cell.request;
  r.target = message.at("target").get<std::string>();
  r.dtype = parse_dtype(message.at("dtype").get<std::string>()).value_or(DType::fp32);
  r.device = message.at("device") == "cuda" ? Device::cuda : Device::cpu;
  r.max_boxes = message.value("max_boxes", r.max_boxes);
  r.hostile = message.value("hostile", false);
  return cell;
}

std::string unknown_op(const nlohmann::json& message) {
  return "unknown op " + message.at("op").get<std::string>();
}

nlohmann::json answer(const Registry& registry, const nlohmann::json& request) {
  const std::string cmd = request.at("cmd");
  if (cmd == "ping") return {{"ready", true}};
  const MessageCell cell = message_cell(registry, request);
  if (!cell.op) return {{"error", unknown_op(request)}};
  const CaseRequest& r = cell.request;
  if (cmd == "probe") {
    auto reason = cell.op->unsupported_reason(r.target, r.dtype, r.device);
    return {{"unsupported", reason ? nlohmann::json(*reason) : nlohmann::json(nullptr)}};
  }
  if (cmd == "judge") return judgement_answer(cell.op->judge_json(request.at("input"), r.target, r.dtype, r.device));
  if (cmd == "evaluate") {
    Evaluation evaluation = cell.op->evaluate(request.at("input"), r.target, r.dtype, r.device);
    nlohmann::json reply = judgement_answer(evaluation.judgement);
    reply["output"] = evaluation.output;
    reply["side_by_side"] = evaluation.side_by_side;
    return reply;
  }
  return {{"error", "unknown command " + cmd}};
}

}  // namespace

std::unique_ptr<CaseRunner> make_worker_runner(const WorkerOptions& options) {
  return std::make_unique<WorkerRunner>(options);
}

int serve_worker(const Registry& registry, int doorbell_fd, int staging_fd) {
  // A campaign killed with SIGKILL cannot stop its workers; the kernel does it for us (a
  // hanging kernel would otherwise outlive everyone).
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() == 1) return 0;
  std::ios::sync_with_stdio(false);
  const int answer_pipe_bytes = ::fcntl(STDOUT_FILENO, F_GETPIPE_SZ);
  const std::size_t ring_early_bytes = answer_pipe_bytes > 0 ? static_cast<std::size_t>(answer_pipe_bytes) / 2 : 32768;
  std::size_t unannounced = 0;  // answer bytes written since the last ring
  // The campaign sleeps until the doorbell rings (Worker in this file says why).
  auto ring = [&] {
    if (doorbell_fd >= 0) {
      const char bell = 1;
      (void)!::write(doorbell_fd, &bell, 1);  // full (EAGAIN): it is rung already
    }
    unannounced = 0;
  };
  auto write_answers = [&](std::string_view lines) {
    // Answers that could fill the pipe while the campaign sleeps would block us for good.
    if (unannounced + lines.size() > ring_early_bytes) ring();
    for (std::size_t written = 0; written < lines.size();) {
      const ssize_t n = ::write(STDOUT_FILENO, lines.data() + written, lines.size() - written);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) std::_Exit(0);  // the campaign is gone
      written += static_cast<std::size_t>(n);
    }
    unannounced += lines.size();
  };
  // Each answer is staged (or sent) before the next case starts: the campaign tells a case
  // that killed its worker by the answers that came before it (fuzz/answer_staging.h).
  AnswerStaging staging = AnswerStaging::attach(staging_fd);
  // The case in flight and its size, for the campaign to time it by (AnswerStaging).
  listen_to_case_sizes([](void* context, std::size_t size) { static_cast<AnswerStaging*>(context)->case_sized(size); },
                       &staging);
  struct CaseInFlight {
    AnswerStaging& staging;
    explicit CaseInFlight(AnswerStaging& s) : staging(s) { staging.case_started(AnswerStaging::Clock::now()); }
    ~CaseInFlight() { staging.case_ended(); }
  };
  auto send_staged = [&] {
    write_answers(staging.staged());
    staging.sent_staged(AnswerStaging::Clock::now());
  };
  auto send_line = [&](const std::string& line) {
    if (staging.stage(line)) {
      if (staging.send_due(AnswerStaging::Clock::now())) send_staged();
      return;
    }
    send_staged();
    write_answers(line);
    staging.sent_one_unstaged(AnswerStaging::Clock::now());
  };
  auto send = [&](const nlohmann::json& reply) { send_line(reply.dump() + "\n"); };
  auto reply_with = [&](auto&& body) {
    try {
      send(body());
    } catch (const std::exception& e) {
      send({{"error", e.what()}});
    }
  };
  // Every answer to one message.
  auto handle = [&](const std::string& line) {
    nlohmann::json request;
    try {
      request = nlohmann::json::parse(line);
    } catch (const std::exception& e) {
      send({{"error", e.what()}});
      return;
    }
    if (!request.is_object() || request.value("cmd", "") != "runs") {
      reply_with([&] {
        CaseInFlight in_flight(staging);
        return answer(registry, request);
      });
      return;
    }
    // A batch of one cell's cases: the cell read once, each case answered as it ends (a
    // cell that cannot be read, with its error: the campaign counts one answer per case).
    MessageCell cell;
    std::string cell_error;
    try {
      cell = message_cell(registry, request);
      if (!cell.op) cell_error = unknown_op(request);
    } catch (const std::exception& e) {
      cell_error = e.what();
    }
    // Read in place: a batch holds thousands of cases, and value() would copy them all.
    const auto cases = request.find("cases");
    if (cases == request.end() || !cases->is_array()) return;
    for (const nlohmann::json& one : *cases) {
      if (!cell_error.empty()) {
        send({{"error", cell_error}});
        continue;
      }
      std::string answer_line;
      try {
        CaseRequest r = cell.request;
        r.case_seed = std::stoull(one.at(0).get_ref<const std::string&>());
        r.generator_size = one.at(1).get<int>();
        CaseInFlight in_flight(staging);
        answer_line = run_answer_line(cell.op->run_case(r));
      } catch (const std::exception& e) {
        send({{"error", e.what()}});
        continue;
      }
      send_line(answer_line);
    }
  };
  for (std::string line; std::getline(std::cin, line);) {
    handle(line);
    send_staged();
    ring();
  }
  return 0;
}

}  // namespace detfuzz::fuzz
