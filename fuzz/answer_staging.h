// A worker's answers on their way to the campaign. Writing each answer to the answer pipe
// as its case ends costs a system call per case: 3-6 us here, a fifth of a fast op's case.
// Sending answers in chunks would lose the crash signal (a case that kills its worker is the
// one after the last answer) if the chunk died with the worker. So answers are staged in
// memory the worker shares with the campaign: staging one is a copy and a store, it
// survives any death (SIGKILL and the OOM killer included), and after the worker is gone the
// campaign takes from it the answers the pipe did not bring.
//
// The worker sends what is staged through the pipe in one write when it grows large, when
// the last write is kMostDelay old, and at the end of every message. The campaign times each
// case from the last answer it saw, so a slow case must not look hung for want of a write:
// with every staged case started and ended within kMostDelay of the last write, a case's
// timeout is cut short by kMostDelay at most.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace detfuzz::fuzz {

class AnswerStaging {
 public:
  using Clock = std::chrono::steady_clock;
  // Room for answers (more than kSendBytes: one answer past it still fits).
  static constexpr std::size_t kCapacityBytes = 1 << 18;
  // Staged answers are sent once they hold this many bytes...
  static constexpr std::size_t kSendBytes = 1 << 15;
  // ... or once the last write is this old: far below any case timeout (seconds).
  static constexpr Clock::duration kMostDelay = std::chrono::milliseconds(5);

  // The campaign's side: a new shared region. Its descriptor, as `place_descriptor` moves
  // it, goes to the worker (`fd()`).
  static AnswerStaging create(int (*place_descriptor)(int fd) = nullptr);
  // The worker's side: the region behind `fd` (Error if it cannot be mapped); -1 gives no
  // region, and every answer is sent at once (a worker run by hand).
  static AnswerStaging attach(int fd);

  AnswerStaging() = default;
  AnswerStaging(AnswerStaging&& other) noexcept;
  AnswerStaging& operator=(AnswerStaging&& other) noexcept;
  AnswerStaging(const AnswerStaging&) = delete;
  AnswerStaging& operator=(const AnswerStaging&) = delete;
  ~AnswerStaging();

  int fd() const { return fd_; }

  // ---- the worker
  // Stages one answer line (ending in '\n'); false if it does not fit (send the staged
  // answers, then send this one at once and call sent_one_unstaged()).
  bool stage(std::string_view line);
  std::string_view staged() const;
  bool send_due(Clock::time_point now) const;
  // The staged answers went out through the pipe (whole: a death after the write and before
  // this call is told apart by the campaign's count of answers received).
  void sent_staged(Clock::time_point now);
  void sent_one_unstaged(Clock::time_point now);

  // The case in flight, for its timeout: it starts (its answer will be the worker's
  // `answer_number`-th, from 0), then its size is known (after generation), then it ends.
  void case_started(Clock::time_point now);
  void case_sized(std::size_t size);
  void case_ended();
  std::uint64_t answers_so_far() const;

  // ---- the campaign
  struct CaseInFlight {
    std::uint64_t answer_number;
    Clock::time_point started;
    std::size_t size;
  };
  // The case running now, once its size is known; nullopt between cases, while one is
  // generated, and without a region.
  std::optional<CaseInFlight> case_in_flight() const;

  // Empties the region for a new worker process.
  void reset();
  // After the worker is gone: the answer lines it staged and the pipe did not bring, given
  // that the pipe brought `answers_received` answers since reset().
  std::string unsent(std::uint64_t answers_received) const;

 private:
  struct Header;
  AnswerStaging(int fd, void* mapping);
  Header* header() const;
  char* data() const;

  int fd_ = -1;
  void* mapping_ = nullptr;
  std::uint64_t staged_lines_ = 0;  // the worker's own count (the header has the bytes)
  Clock::time_point last_sent_;     // the last write to the pipe
};

}  // namespace detfuzz::fuzz
