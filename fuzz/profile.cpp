#include "fuzz/profile.h"

namespace detfuzz::fuzz {
namespace {

thread_local CaseTimes t_case_times;
thread_local int t_depth[2] = {0, 0};

}  // namespace

CaseTimes& current_case_times() { return t_case_times; }

PhaseTimer::PhaseTimer(Phase phase)
    : phase_(phase), outermost_(t_depth[static_cast<int>(phase)]++ == 0), start_(std::chrono::steady_clock::now()) {}

PhaseTimer::~PhaseTimer() {
  --t_depth[static_cast<int>(phase_)];
  if (!outermost_) return;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  (phase_ == Phase::kernel ? t_case_times.kernel_s : t_case_times.oracle_s) += seconds;
}

}  // namespace detfuzz::fuzz
