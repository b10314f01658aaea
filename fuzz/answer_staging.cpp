#include "fuzz/answer_staging.h"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <new>
#include <utility>

#include "model/error.h"

namespace detfuzz::fuzz {

// At the start of the region. The worker stores `bytes` after the answer's bytes (release):
// whatever `bytes` says is staged was written whole, wherever the worker died.
struct AnswerStaging::Header {
  std::atomic<std::uint64_t> first_answer;  // the number of the first staged answer (0: the worker's first)
  std::atomic<std::uint64_t> bytes;         // staged answer bytes after the header
  // The case in flight: its answer's number + 1 (0: none), its start (steady clock ticks;
  // CLOCK_MONOTONIC, one clock for every process), its size + 1 (0: not known yet). The
  // number is stored last and read first and last, so a reader never mixes two cases.
  std::atomic<std::uint64_t> case_number;
  std::atomic<std::int64_t> case_started;
  std::atomic<std::uint64_t> case_size;
};

namespace {

constexpr std::size_t kHeaderBytes = 4096;  // a page, the answers after it
constexpr std::size_t kRegionBytes = kHeaderBytes + AnswerStaging::kCapacityBytes;
static_assert(std::atomic<std::uint64_t>::is_always_lock_free && std::atomic<std::int64_t>::is_always_lock_free,
              "two processes share these counters");

void* map_region(int fd) {
  void* mapping = ::mmap(nullptr, kRegionBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  return mapping == MAP_FAILED ? nullptr : mapping;
}

}  // namespace

AnswerStaging::AnswerStaging(int fd, void* mapping) : fd_(fd), mapping_(mapping) {}

AnswerStaging AnswerStaging::create(int (*place_descriptor)(int fd)) {
  int fd = ::memfd_create("detfuzz-answers", MFD_CLOEXEC);
  if (fd >= 0 && place_descriptor) fd = place_descriptor(fd);
  if (fd < 0 || ::ftruncate(fd, kRegionBytes) != 0) {
    const std::string why = std::strerror(errno);
    if (fd >= 0) ::close(fd);
    throw Error(ErrorKind::internal, "cannot create the shared memory for a worker's answers: " + why);
  }
  void* mapping = map_region(fd);
  if (!mapping) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    throw Error(ErrorKind::internal, "cannot map the shared memory for a worker's answers: " + why);
  }
  new (mapping) Header{{0}, {0}, {0}, {0}, {0}};
  return AnswerStaging(fd, mapping);
}

AnswerStaging AnswerStaging::attach(int fd) {
  if (fd < 0) return {};
  void* mapping = map_region(fd);
  if (!mapping)
    throw Error(ErrorKind::usage, "--answer-staging-fd " + std::to_string(fd) +
                                      ": expected the descriptor of a campaign's shared answer memory (" +
                                      std::to_string(kRegionBytes) + " bytes), cannot map it: " + std::strerror(errno));
  return AnswerStaging(fd, mapping);
}

AnswerStaging::AnswerStaging(AnswerStaging&& other) noexcept { *this = std::move(other); }

AnswerStaging& AnswerStaging::operator=(AnswerStaging&& other) noexcept {
  std::swap(fd_, other.fd_);
  std::swap(mapping_, other.mapping_);
  std::swap(staged_lines_, other.staged_lines_);
  std::swap(last_sent_, other.last_sent_);
  return *this;
}

AnswerStaging::~AnswerStaging() {
  if (mapping_) ::munmap(mapping_, kRegionBytes);
  if (fd_ >= 0) ::close(fd_);
}

AnswerStaging::Header* AnswerStaging::header() const { return static_cast<Header*>(mapping_); }
char* AnswerStaging::data() const { return static_cast<char*>(mapping_) + kHeaderBytes; }

bool AnswerStaging::stage(std::string_view line) {
  if (!mapping_) return false;
  const std::uint64_t bytes = header()->bytes.load(std::memory_order_relaxed);
  if (bytes + line.size() > kCapacityBytes) return false;
  std::memcpy(data() + bytes, line.data(), line.size());
  header()->bytes.store(bytes + line.size(), std::memory_order_release);
  ++staged_lines_;
  return true;
}

std::string_view AnswerStaging::staged() const {
  if (!mapping_) return {};
  return {data(), static_cast<std::size_t>(header()->bytes.load(std::memory_order_relaxed))};
}

bool AnswerStaging::send_due(Clock::time_point now) const {
  return staged_lines_ > 0 && (staged().size() >= kSendBytes || now - last_sent_ >= kMostDelay);
}

void AnswerStaging::sent_staged(Clock::time_point now) {
  last_sent_ = now;
  if (!mapping_ || staged_lines_ == 0) return;
  // Empty first: a death between the two stores then leaves nothing to take twice.
  header()->bytes.store(0, std::memory_order_release);
  header()->first_answer.fetch_add(staged_lines_, std::memory_order_release);
  staged_lines_ = 0;
}

void AnswerStaging::sent_one_unstaged(Clock::time_point now) {
  last_sent_ = now;
  if (mapping_) header()->first_answer.fetch_add(1, std::memory_order_release);
}

std::uint64_t AnswerStaging::answers_so_far() const {
  return mapping_ ? header()->first_answer.load(std::memory_order_relaxed) + staged_lines_ : 0;
}

void AnswerStaging::case_started(Clock::time_point now) {
  if (!mapping_) return;
  header()->case_number.store(0, std::memory_order_release);
  header()->case_size.store(0, std::memory_order_relaxed);
  header()->case_started.store(now.time_since_epoch().count(), std::memory_order_relaxed);
}

void AnswerStaging::case_sized(std::size_t size) {
  if (!mapping_) return;
  header()->case_size.store(size + 1, std::memory_order_relaxed);
  header()->case_number.store(answers_so_far() + 1, std::memory_order_release);
}

void AnswerStaging::case_ended() {
  if (mapping_) header()->case_number.store(0, std::memory_order_release);
}

std::optional<AnswerStaging::CaseInFlight> AnswerStaging::case_in_flight() const {
  if (!mapping_) return std::nullopt;
  const std::uint64_t number = header()->case_number.load(std::memory_order_acquire);
  if (number == 0) return std::nullopt;
  CaseInFlight in_flight{number - 1,
                         Clock::time_point(Clock::duration(header()->case_started.load(std::memory_order_relaxed))),
                         static_cast<std::size_t>(header()->case_size.load(std::memory_order_relaxed) - 1)};
  std::atomic_thread_fence(std::memory_order_acquire);
  if (header()->case_number.load(std::memory_order_relaxed) != number) return std::nullopt;  // it changed meanwhile
  return in_flight;
}

void AnswerStaging::reset() {
  if (!mapping_) return;
  header()->case_number.store(0, std::memory_order_relaxed);
  header()->bytes.store(0, std::memory_order_relaxed);
  header()->first_answer.store(0, std::memory_order_relaxed);
  staged_lines_ = 0;
}

std::string AnswerStaging::unsent(std::uint64_t answers_received) const {
  const std::string_view lines = staged();
  std::uint64_t number = header() ? header()->first_answer.load(std::memory_order_acquire) : 0;
  std::size_t start = 0;
  while (start < lines.size() && number < answers_received) {
    const std::size_t newline = lines.find('\n', start);
    if (newline == std::string_view::npos) return {};
    start = newline + 1;
    ++number;
  }
  return std::string(lines.substr(start));
}

}  // namespace detfuzz::fuzz
