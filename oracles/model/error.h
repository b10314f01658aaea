// The one error type of detfuzz. Its kind decides the exit status of the CLI: every usage
// or input problem exits 2 with a message that names the thing and the fix.
#pragma once

#include <stdexcept>
#include <string>

namespace detfuzz {

enum class ErrorKind {
  usage,        // bad command line
  input,        // malformed case file, unknown op, absurd size
  unsupported,  // a target does not implement a dtype/device (not a finding)
  unavailable,  // a target cannot be loaded at all (library missing)
  internal,     // a bug in detfuzz itself
  // A target's repeated runs of one call differ (kernels/run_policy.h): a finding raised from
  // inside Target::run, which the harness turns into a nondeterministic verdict.
  nondeterministic,
};

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const noexcept { return kind_; }

 private:
  ErrorKind kind_;
};

}  // namespace detfuzz
