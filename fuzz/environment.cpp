#include "fuzz/environment.h"

#include <sys/utsname.h>

#include <fstream>
#include <string>

#ifndef DETFUZZ_VERSION
#define DETFUZZ_VERSION "unknown"
#endif

namespace detfuzz::fuzz {
namespace {

std::string cpu_model() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

}  // namespace

nlohmann::json environment_json(const kernels::KernelConfig& config) {
#ifdef __clang__
  const std::string compiler = std::string("clang ") + __clang_version__;
#else
  const std::string compiler = std::string("gcc ") + __VERSION__;
#endif
  nlohmann::json environment = {{"detfuzz", DETFUZZ_VERSION}, {"compiler", compiler}};
  for (const auto& [key, value] : kernels::environment(config)) environment[key] = value;
  environment["cpu"] = cpu_model();
  utsname system{};
  if (uname(&system) == 0)
    environment["os"] = std::string(system.sysname) + " " + system.release + " " + system.machine;
  return environment;
}

}  // namespace detfuzz::fuzz
