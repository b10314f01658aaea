// Where a case's time goes, measured where it is spent (in the worker when cases run in
// one): generation, the kernel (every target run, property re-runs included), the oracle
// (the fp64 reference, or the replay that is NMS's reference), and the rest of judging
// (comparison). The campaign adds minimization and I/O and calls what is left harness
// overhead (`other`: scheduling, worker round trips, bookkeeping).
#pragma once

#include <chrono>
#include <cstddef>

namespace detfuzz::fuzz {

struct CaseTimes {
  double generation_s = 0;
  double kernel_s = 0;
  double oracle_s = 0;
  double judge_s = 0;  // the whole judgement: kernel + oracle + comparison
  double comparison_s() const { return judge_s > kernel_s + oracle_s ? judge_s - kernel_s - oracle_s : 0; }
};

enum class Phase { kernel, oracle };

// The times of the case running on this thread; run_case resets and reads them.
CaseTimes& current_case_times();

// Who hears the size of the case running on this thread once it is generated (the worker,
// which tells the campaign, so that the case's timeout is that of its size); nullptr: nobody.
using CaseSizeListener = void (*)(void* context, std::size_t size);
void listen_to_case_sizes(CaseSizeListener listener, void* context);
void announce_case_size(std::size_t size);

// Adds its lifetime to `phase` of the current case, unless a timer of the same phase is
// already running (a reference that calls another reference is counted once).
class PhaseTimer {
 public:
  explicit PhaseTimer(Phase phase);
  ~PhaseTimer();
  PhaseTimer(const PhaseTimer&) = delete;
  PhaseTimer& operator=(const PhaseTimer&) = delete;

 private:
  Phase phase_;
  bool outermost_;
  std::chrono::steady_clock::time_point start_;
};

// `body()`, its time counted as oracle time.
template <class Body>
auto timed_oracle(Body&& body) -> decltype(body()) {
  PhaseTimer timer(Phase::oracle);
  return body();
}

}  // namespace detfuzz::fuzz
