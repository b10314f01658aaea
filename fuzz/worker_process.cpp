#include "fuzz/worker_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iostream>
#include <mutex>
#include <string>
#include <vector>

#include "fuzz/campaign.h"
#include "fuzz/wire_format.h"
#include "fuzz/zygote.h"
#include "model/error.h"

extern char** environ;

namespace detfuzz::fuzz {

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

}  // namespace

WorkerProcess::Reply WorkerProcess::ended(Outcome outcome, std::string death, std::string stderr_tail) {
  Reply reply;
  reply.outcome = outcome;
  reply.death = std::move(death);
  reply.stderr_tail = std::move(stderr_tail);
  return reply;
}

void WorkerProcess::warm_up() {
  if (pid_ > 0) return;
  start();
  pinged_ = send(nlohmann::json{{"cmd", "ping"}}.dump() + "\n");
}

WorkerProcess::WorkerProcess(const WorkerOptions& options, int index, Zygote* zygote)
    : options_(options),
      zygote_(zygote),
      stderr_path_(options.scratch_dir + "/worker-" + std::to_string(index) + ".stderr"),
      inflight_(options.scratch_dir + "/inflight-" + std::to_string(index) + ".jsonl"),
      staging_(shared_staging()) {
  corpus::ensure_directory(options.scratch_dir);
}

std::optional<WorkerProcess::Reply> WorkerProcess::submit(const std::vector<nlohmann::json>& messages) {
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

bool WorkerProcess::send_ahead(const std::vector<nlohmann::json>& messages) {
  if (pid_ <= 0 || pinged_ || casualty_) return false;
  std::string lines;
  for (const auto& message : messages) lines += message.dump() + "\n";
  write_ahead(lines, true);
  return send(lines);
}

std::vector<WorkerProcess::Reply> WorkerProcess::collect(std::size_t count, double timeout_s, const CellTimeout* clock) {
  std::vector<Reply> replies;
  for (std::size_t i = 0; i < count; ++i) {
    replies.push_back(receive(timeout_s, clock));
    if (replies.back().outcome != Outcome::answered) break;
  }
  return replies;
}

std::vector<WorkerProcess::Reply> WorkerProcess::requests(const std::vector<nlohmann::json>& messages, std::size_t answers, double timeout_s,
                            const CellTimeout* clock) {
  if (auto failed = submit(messages)) return {*failed};
  return collect(answers, timeout_s, clock);
}

void WorkerProcess::start() {
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

int WorkerProcess::fork_from_zygote(int requests, int answers, int doorbell) {
  const int stderr_fd = ::open(stderr_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (stderr_fd < 0) return errno;
  std::vector<int> descriptors{requests, answers, stderr_fd, doorbell};
  if (staging_.fd() >= 0) descriptors.push_back(staging_.fd());
  pid_ = zygote_->fork_worker(descriptors);
  ::close(stderr_fd);
  forked_ = pid_ > 0;
  return forked_ ? 0 : spawn(requests, answers, doorbell);
}

int WorkerProcess::spawn(int requests, int answers, int doorbell) {
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

std::optional<int> WorkerProcess::reaped(double timeout_s) {
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

void WorkerProcess::close_pipes() {
  for (int* fd : {&to_, &from_, &doorbell_}) {
    if (*fd >= 0) ::close(*fd);
    *fd = -1;
  }
}

void WorkerProcess::write_ahead(const std::string& lines, bool behind) {
  // The messages about to be sent (a batch of cases is one), one per line, on disk before
  // they run: what a person finds after the whole campaign died. A ScratchFile: this runs
  // for every batch and every minimization step. A message is sent behind one other at
  // most (WorkerRunner::prefetch).
  inflight_.replace(behind ? last_sent_ + lines : lines);
  last_sent_ = lines;
}

bool WorkerProcess::send(const std::string& line) {
  for (std::size_t written = 0; written < line.size();) {
    const ssize_t n = ::write(to_, line.data() + written, line.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    written += static_cast<std::size_t>(n);
  }
  return true;
}

WorkerProcess::Reply WorkerProcess::receive(double timeout_s, const CellTimeout* clock) {
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

void WorkerProcess::wait_for_answers(int timeout_ms) {
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

void WorkerProcess::take_pipe_answers() {
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

WorkerProcess::Reply WorkerProcess::died() {
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

void WorkerProcess::stop() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  reaped(10.0);
  pid_ = -1;
  if (from_ >= 0) take_pipe_answers();  // what it wrote before it was killed (the pipe ends now)
  close_pipes();
}

void WorkerProcess::take_staged_answers() {
  const std::size_t last_newline = buffer_.rfind('\n');
  buffer_.erase(last_newline == std::string::npos || last_newline < taken_ ? taken_ : last_newline + 1);
  const auto in_buffer = static_cast<std::uint64_t>(std::count(buffer_.begin() + static_cast<std::ptrdiff_t>(taken_), buffer_.end(), '\n'));
  buffer_ += staging_.unsent(answers_taken_ + in_buffer);
}

AnswerStaging WorkerProcess::shared_staging() {
  try {
    return AnswerStaging::create(above_worker_descriptors);
  } catch (const Error& e) {
    static std::once_flag said;
    std::call_once(said, [&] { std::cerr << "detfuzz: " << e.what() << "; workers write each answer at once\n"; });
    return {};
  }
}

WorkerProcess::Reply WorkerProcess::take_casualty() {
  Reply reply = std::move(*casualty_);
  casualty_.reset();
  return reply;
}

}  // namespace detfuzz::fuzz
