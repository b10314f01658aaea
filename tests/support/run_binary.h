// Running the detfuzz binary as users and CI do: a shell command line, its exit status and
// its stdout and stderr together.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace detfuzz::testing {

struct Result {
  int status = -1;
  std::string output;  // stdout and stderr together
};

inline std::string binary() {
  const char* path = std::getenv("DETFUZZ_BINARY");
  return path ? path : "build/detfuzz";
}

inline Result shell(const std::string& command_line) {
  const std::string command = command_line + " 2>&1";
  Result result;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return result;
  std::array<char, 4096> buffer{};
  while (std::size_t n = fread(buffer.data(), 1, buffer.size(), pipe)) result.output.append(buffer.data(), n);
  int status = pclose(pipe);
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

inline Result detfuzz(const std::string& arguments) { return shell(binary() + " " + arguments); }

}  // namespace detfuzz::testing
