#include "fuzz/profile.h"

namespace detfuzz::fuzz {
namespace {

thread_local CaseTimes t_case_times;
thread_local int t_depth[2] = {0, 0};
thread_local CaseSizeListener t_size_listener = nullptr;
thread_local void* t_size_listener_context = nullptr;

}  // namespace

CaseTimes& current_case_times() { return t_case_times; }

void listen_to_case_sizes(CaseSizeListener listener, void* context) {
  t_size_listener = listener;
  t_size_listener_context = context;
}

void announce_case_size(std::size_t size) {
  if (t_size_listener) t_size_listener(t_size_listener_context, size);
}

PhaseTimer::PhaseTimer(Phase phase)
    : phase_(phase), outermost_(t_depth[static_cast<int>(phase)]++ == 0), start_(std::chrono::steady_clock::now()) {}

PhaseTimer::~PhaseTimer() {
  --t_depth[static_cast<int>(phase_)];
  if (!outermost_) return;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  (phase_ == Phase::kernel ? t_case_times.kernel_s : t_case_times.oracle_s) += seconds;
}

}  // namespace detfuzz::fuzz
