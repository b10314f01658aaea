#include "fuzz/environment.h"

#include <dlfcn.h>
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

// The library whose malloc this process runs on: the one the binary links (CMake's
// DETFUZZ_ALLOCATOR: libtcmalloc_minimal or glibc's libc) or one put in front of it with
// LD_PRELOAD. Throughput comparisons between runs mean little across allocators.
std::string allocator() {
  Dl_info info{};
  void* const malloc_in_use = dlsym(RTLD_DEFAULT, "malloc");
  if (malloc_in_use == nullptr || dladdr(malloc_in_use, &info) == 0 || info.dli_fname == nullptr) return "unknown";
  const std::string path = info.dli_fname;
  return path.substr(path.find_last_of('/') + 1);
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
  environment["allocator"] = allocator();
  utsname system{};
  if (uname(&system) == 0)
    environment["os"] = std::string(system.sysname) + " " + system.release + " " + system.machine;
  return environment;
}

}  // namespace detfuzz::fuzz
