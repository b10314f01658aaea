// Progress of a long campaign: a live line on a terminal, plain periodic lines in CI logs
// (which keep every line and have no carriage returns), or nothing.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace detfuzz::fuzz {

struct ProgressSnapshot {
  std::uint64_t cases = 0;
  std::size_t findings = 0;
  double elapsed_s = 0;
  std::optional<double> budget_s;
  std::optional<std::uint64_t> planned_cases;  // --cases x runnable cells
  std::size_t cells_done = 0, cells_total = 0;
  std::string current_cell;
};

class ProgressSink {
 public:
  virtual ~ProgressSink() = default;
  virtual void tick(const ProgressSnapshot& snapshot) = 0;  // called often; throttles itself
  virtual void event(const std::string& line) = 0;          // a finding, a skipped cell
  virtual void finish() = 0;
};

enum class ProgressMode { automatic, live, lines, none };

// `automatic`: live when stderr is a terminal and CI is unset, lines otherwise.
std::unique_ptr<ProgressSink> make_progress(ProgressMode mode);

}  // namespace detfuzz::fuzz
