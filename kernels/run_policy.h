// How a target's kernel is called: once, or several times with the outputs compared bit for
// bit (run-to-run determinism: CUDA backward kernels accumulate with atomicAdd, so their sums
// may differ from run to run), and with LibTorch's deterministic algorithms on or off
// (--deterministic: a kernel must then be bitwise stable or raise). One wrapper around every
// target's `run`, applied where the registry is built, so that campaigns, shrinking, replays
// and properties that call a kernel twice all see the same policy. LibTorch-free: the one
// LibTorch call is in run_policy.cpp.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kernels/target.h"
#include "model/error.h"

namespace detfuzz::kernels {

// Without --repeat: a backward op (its name ends in "_backward") on CUDA runs twice, every
// other call once (what a nightly campaign should check without being asked).
inline constexpr int kDefaultBackwardCudaRepeats = 2;
inline constexpr int kMaxRepeats = 100;

int repeats_for(const KernelConfig& config, std::string_view op, Device device);

// "1 per call; backward ops on cuda: 2", or "3 per call (--repeat 3)": for the environment.
std::string repeats_description(const KernelConfig& config);

// The first place where `again` differs from `first` bit for bit (shape, dtype, device, or an
// element's value, NaN payloads included), with both values and how many elements differ;
// nullopt when they are identical.
std::optional<std::string> first_difference(const std::vector<HostTensor>& first, const std::vector<HostTensor>& again);

// Sets this process's LibTorch deterministic-algorithms flag (and cuBLAS's workspace
// configuration, which deterministic cuBLAS needs) from --deterministic. Call before any
// kernel runs; idempotent.
void apply_determinism(const KernelConfig& config);

// Whether `message` is LibTorch's refusal of a kernel without a deterministic implementation
// ("... does not have a deterministic implementation, but you set
// 'torch.use_deterministic_algorithms(True)'").
bool is_determinism_refusal(std::string_view message);

// `targets` with each run under `config`'s policy for op `op`: repeated runs that differ
// throw Error{nondeterministic} naming the run and the difference; under --deterministic a
// kernel's refusal becomes Error{unsupported} (its cell is then unsupported, not a finding).
template <class Problem>
std::vector<Target<Problem>> under_run_policy(std::vector<Target<Problem>> targets, const KernelConfig& config,
                                              std::string_view op) {
  for (Target<Problem>& target : targets) {
    target.run = [run = std::move(target.run), config, op = std::string(op)](const Problem& problem, DType dtype,
                                                                            Device device) {
      auto once = [&] {
        if (!config.deterministic) return run(problem, dtype, device);
        try {
          return run(problem, dtype, device);
        } catch (const Error&) {
          throw;
        } catch (const std::exception& error) {
          const std::string message = error.what();
          if (!is_determinism_refusal(message)) throw;
          throw Error(ErrorKind::unsupported, "no deterministic implementation (--deterministic): " +
                                                  message.substr(0, message.find('\n')));
        }
      };
      std::vector<HostTensor> first = once();
      const int repeats = repeats_for(config, op, device);
      for (int r = 2; r <= repeats; ++r)
        if (std::optional<std::string> difference = first_difference(first, once()))
          throw Error(ErrorKind::nondeterministic,
                      "run " + std::to_string(r) + " of " + std::to_string(repeats) + " differs from run 1: " + *difference);
      return first;
    };
  }
  return targets;
}

}  // namespace detfuzz::kernels
