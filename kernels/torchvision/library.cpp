// Finding and dlopen-ing torchvision's C++ op library (torchvision/_C*.so). It links only
// libtorch_cpu and libc10, so it loads into a C++ process without Python.
#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <regex>
#include <vector>

#include "kernels/target.h"

#ifndef DETFUZZ_DEFAULT_TORCHVISION_LIB
#define DETFUZZ_DEFAULT_TORCHVISION_LIB ""
#endif

namespace detfuzz::kernels {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> default_candidates() {
  std::vector<std::string> candidates;
  if (*DETFUZZ_DEFAULT_TORCHVISION_LIB) candidates.emplace_back(DETFUZZ_DEFAULT_TORCHVISION_LIB);
  for (const char* dir : {"/usr/lib/python3/dist-packages/torchvision",
                          "/usr/local/lib/python3/dist-packages/torchvision"}) {
    std::error_code ignored;
    for (const auto& entry : fs::directory_iterator(dir, ignored)) {
      std::string name = entry.path().filename().string();
      if (name.rfind("_C", 0) == 0 && entry.path().extension() == ".so")
        candidates.push_back(entry.path().string());
    }
  }
  return candidates;
}

// torchvision writes its version into version.py beside the library.
std::string version_beside(const fs::path& library) {
  std::ifstream file(library.parent_path() / "version.py");
  std::string line;
  const std::regex version_line(R"(__version__\s*=\s*['"]([^'"]+)['"])");
  std::smatch match;
  while (std::getline(file, line))
    if (std::regex_search(line, match, version_line)) return match[1];
  return "unknown";
}

LibraryStatus load(const KernelConfig& config) {
  LibraryStatus status;
  std::string source;
  if (!config.torchvision_lib.empty()) {
    status.path = config.torchvision_lib;
    source = "--torchvision-lib";
  } else if (const char* env = std::getenv("DETFUZZ_TORCHVISION_LIB"); env && *env) {
    status.path = env;
    source = "DETFUZZ_TORCHVISION_LIB";
  } else {
    auto candidates = default_candidates();
    if (candidates.empty()) {
      status.error =
          "torchvision's op library (torchvision/_C*.so) was not found; install "
          "python3-torchvision or pass --torchvision-lib PATH";
      return status;
    }
    status.path = candidates.front();
    source = "default";
  }
  if (!fs::exists(status.path)) {
    status.error = "torchvision library " + status.path + " (from " + source +
                   ") does not exist; pass an existing _C*.so via --torchvision-lib PATH";
    return status;
  }
  if (!dlopen(status.path.c_str(), RTLD_NOW | RTLD_LOCAL)) {
    const char* message = dlerror();
    status.error = "dlopen(" + status.path + ") failed: " + (message ? message : "unknown error") +
                   " (an ABI mismatch with this LibTorch shows up here)";
    return status;
  }
  status.loaded = true;
  status.version = version_beside(status.path);
  return status;
}

}  // namespace

const LibraryStatus& load_torchvision(const KernelConfig& config) {
  static std::once_flag once;
  static LibraryStatus status;
  std::call_once(once, [&] { status = load(config); });
  return status;
}

}  // namespace detfuzz::kernels
