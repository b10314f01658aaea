#include "fuzz/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace detfuzz::fuzz {
namespace {

std::string describe(const ProgressSnapshot& s) {
  std::string of_what;
  if (s.budget_s) of_what = fmt::format("{:.0f}s / {:.0f}s", s.elapsed_s, *s.budget_s);
  else of_what = fmt::format("{:.1f}s", s.elapsed_s);
  std::string cases = s.planned_cases ? fmt::format("{}/{}", s.cases, *s.planned_cases)
                                      : fmt::format("{}", s.cases);
  return fmt::format("cases {} | findings {} | cells {}/{} | {} | {}", cases, s.findings,
                     s.cells_done, s.cells_total, of_what, s.current_cell);
}

class LiveProgress final : public ProgressSink {
 public:
  void tick(const ProgressSnapshot& snapshot) override {
    auto now = std::chrono::steady_clock::now();
    if (now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    std::string line = describe(snapshot);
    if (line.size() > 118) line.resize(118);
    std::fprintf(stderr, "\r\033[K%s", line.c_str());
    std::fflush(stderr);
    shown_ = true;
  }
  void event(const std::string& line) override {
    std::fprintf(stderr, "%s%s\n", shown_ ? "\r\033[K" : "", line.c_str());
    shown_ = false;
  }
  void finish() override {
    if (shown_) std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
  }

 private:
  std::chrono::steady_clock::time_point last_{};
  bool shown_ = false;
};

class LineProgress final : public ProgressSink {
 public:
  void tick(const ProgressSnapshot& snapshot) override {
    auto now = std::chrono::steady_clock::now();
    if (now - last_ < std::chrono::seconds(10)) return;
    last_ = now;
    std::fprintf(stderr, "detfuzz: %s\n", describe(snapshot).c_str());
  }
  void event(const std::string& line) override { std::fprintf(stderr, "detfuzz: %s\n", line.c_str()); }
  void finish() override { std::fflush(stderr); }

 private:
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

class NoProgress final : public ProgressSink {
 public:
  void tick(const ProgressSnapshot&) override {}
  void event(const std::string&) override {}
  void finish() override {}
};

}  // namespace

std::unique_ptr<ProgressSink> make_progress(ProgressMode mode) {
  if (mode == ProgressMode::automatic) {
    const char* ci = std::getenv("CI");
    bool terminal = ::isatty(STDERR_FILENO) && !(ci && *ci);
    mode = terminal ? ProgressMode::live : ProgressMode::lines;
  }
  switch (mode) {
    case ProgressMode::live: return std::make_unique<LiveProgress>();
    case ProgressMode::lines: return std::make_unique<LineProgress>();
    default: return std::make_unique<NoProgress>();
  }
}

}  // namespace detfuzz::fuzz
