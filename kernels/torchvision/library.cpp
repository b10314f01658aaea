// Finding and dlopen-ing torchvision's C++ op library (torchvision/_C*.so) into a C++
// process without Python. Debian's 0.14 links only libtorch_cpu and libc10. PyPI's wheels
// (0.26.0+cu130) also list libtorch_python.so, whose undefined Py* symbols make the dlopen
// fail ("undefined symbol: PyInstanceMethod_Type") although no torchvision op calls Python:
// libpython and libtorch_python are then loaded RTLD_GLOBAL first, for their symbols only
// (no interpreter is started; nothing runs Python code).
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

// The libpython whose symbols libtorch_python.so expects: the one of the virtual
// environment or Python installation that holds `library` (.../lib/python3.X/site-packages/
// torchvision/_C.so), else the system's libpython3.X by soname.
std::vector<fs::path> libpython_candidates(const fs::path& library) {
  const fs::path site_packages = library.parent_path().parent_path();
  const std::string python_dir = site_packages.parent_path().filename().string();  // python3.X
  if (python_dir.rfind("python3.", 0) != 0) return {"libpython3.so"};
  const std::string name = "lib" + python_dir + ".so";
  std::vector<fs::path> candidates;
  const fs::path prefix = site_packages.parent_path().parent_path().parent_path();  // venv or install prefix
  std::ifstream venv_config(prefix / "pyvenv.cfg");
  std::string line;
  const std::regex home_line(R"(^\s*home\s*=\s*(.*\S)\s*$)");
  std::smatch match;
  while (std::getline(venv_config, line))
    if (std::regex_match(line, match, home_line)) candidates.push_back(fs::path(match[1].str()).parent_path() / "lib" / name);
  candidates.push_back(prefix / "lib" / name);
  candidates.push_back(name + ".1.0");
  candidates.push_back(name);
  return candidates;
}

// Makes libtorch_python.so (beside the torch package next to torchvision) loadable; returns
// what it loaded, or why it could not.
bool preload_torch_python(const fs::path& library, std::vector<std::string>& loaded, std::string& error) {
  const fs::path torch_python = library.parent_path().parent_path() / "torch" / "lib" / "libtorch_python.so";
  if (!fs::exists(torch_python)) {
    error = "it needs libtorch_python.so, which is not at " + torch_python.string();
    return false;
  }
  for (const fs::path& candidate : libpython_candidates(library)) {
    if (candidate.has_parent_path() && !fs::exists(candidate)) continue;
    if (!dlopen(candidate.c_str(), RTLD_NOW | RTLD_GLOBAL)) continue;
    loaded.push_back(candidate.string());
    if (!dlopen(torch_python.c_str(), RTLD_NOW | RTLD_GLOBAL)) {
      const char* message = dlerror();
      error = "dlopen(" + torch_python.string() + ") failed: " + (message ? message : "unknown error");
      return false;
    }
    loaded.push_back(torch_python.string());
    return true;
  }
  error = "it needs libtorch_python.so, which needs a libpython (" + libpython_candidates(library).back().string() +
          ") that was not found";
  return false;
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
    const char* first_message = dlerror();
    const std::string first_error = first_message ? first_message : "unknown error";
    std::string preload_error;
    const bool wants_python = first_error.find("libtorch_python") != std::string::npos ||
                              first_error.find("undefined symbol: Py") != std::string::npos;
    const bool retried = wants_python && preload_torch_python(status.path, status.preloaded, preload_error) &&
                         dlopen(status.path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!retried) {
      const char* message = dlerror();
      status.error = "dlopen(" + status.path + ") failed: " + (wants_python && !preload_error.empty() ? preload_error
                                                               : message ? message : first_error) +
                     " (an ABI mismatch with this LibTorch shows up here: the library must come from the torch "
                     "package this detfuzz was built against)";
      return status;
    }
  }
  status.loaded = true;
  status.version = version_beside(status.path);
  if (auto release = parse_torchvision_release(status.version)) status.release = *release;
  return status;
}

}  // namespace

std::optional<TorchvisionRelease> parse_torchvision_release(const std::string& version) {
  static const std::regex release_pattern(R"(^(\d+)\.(\d+)(?:\.(\d+))?)");
  std::smatch match;
  if (!std::regex_search(version, match, release_pattern)) return std::nullopt;
  TorchvisionRelease release;
  release.major = std::stoi(match[1]);
  release.minor = std::stoi(match[2]);
  release.patch = match[3].matched ? std::stoi(match[3]) : 0;
  return release;
}

const LibraryStatus& load_torchvision(const KernelConfig& config) {
  static std::once_flag once;
  static LibraryStatus status;
  std::call_once(once, [&] { status = load(config); });
  return status;
}

}  // namespace detfuzz::kernels
