// The targets under test, behind one small interface per op family. This header is
// LibTorch-free on purpose: fuzz/ and the tests include it, and only kernels/*.cpp pay
// for ATen's headers.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "model/dtype.h"
#include "model/problems.h"
#include "model/op_table.h"

namespace detfuzz::kernels {

struct Availability {
  bool available = true;
  std::string reason;  // why not, in words a user can act on
};

// The dtypes a kernel computes its intermediates in, as its code does: what tells an
// overflow the kernel's dtype forces (dtype_overflow) from one that the values force on any
// kernel (overflow). Unless declared otherwise, PyTorch's at::acc_type convention: fp16 and
// bf16 stored, fp32 arithmetic.
struct Arithmetic {
  // The op's stages (the names its harness explains overflows with, e.g. "rb - lt") that the
  // kernel computes in the storage dtype; "*" for all of them.
  std::vector<std::string> storage_stages;
  std::string source;  // the code that shows it: file, version

  bool in_storage(const std::string& stage) const {
    for (const auto& s : storage_stages)
      if (s == "*" || s == stage) return true;
    return false;
  }
  DType dtype_of(const std::string& stage, DType storage) const {
    return in_storage(stage) ? storage : accumulate_type(storage);
  }
};

template <class Problem>
struct Target {
  std::string name;         // what --targets selects: "torchvision", "aten", ...
  std::string description;  // what it runs and which library version it mirrors
  std::function<Availability(Device)> availability;
  Arithmetic arithmetic;    // declared per target; a test pins each declaration
  // Runs the kernel on `problem` whose values are already rounded to `dtype`. Throws
  // detfuzz::Error{ErrorKind::unsupported} when the library has no kernel for this
  // dtype/device; any other exception is the kernel's own and becomes a finding.
  std::function<std::vector<HostTensor>(const Problem&, DType, Device)> run;
};

// Where torchvision's op library comes from, in order: `torchvision_lib` (--torchvision-lib),
// the DETFUZZ_TORCHVISION_LIB environment variable, the path CMake found at configure time,
// then the python3-torchvision package's usual places.
struct KernelConfig {
  std::string torchvision_lib;
  std::vector<std::string> plugin_libraries;  // --load: dlopen-ed, their TORCH_LIBRARY ops callable
  std::vector<std::string> bindings;          // --bind FAMILY=NS::OP or FAMILY=script:FILE.pt[:METHOD]
  // How each kernel call runs (kernels/run_policy.h). --repeat: runs per call whose outputs
  // must agree bit for bit; 0 for the default (kDefaultRepeats).
  int repeats = 0;
  bool deterministic = false;  // --deterministic: LibTorch's deterministic algorithms on
};

// A user's op bound to an op family whose contract it claims (kernels/plugins/bindings.cpp).
struct Binding {
  std::string family;  // "nms", "roi_align", ... (an op of `detfuzz list`)
  std::string op;      // "NS::OP" for a dispatcher op; empty for a TorchScript file
  std::string script;  // the TorchScript file; empty for a dispatcher op
  std::string method = "forward";
  // What --targets selects: "NS::OP", or "script:FILE_NAME[:METHOD]" (the file's name without
  // its folder, so reports of one campaign agree wherever the file lies).
  std::string target_name() const;
};

// Parses one --bind value; Error{usage} that shows the two accepted forms.
Binding parse_binding(const std::string& text);

// Loads --load's libraries (after torchvision's, so a plugin or a script may call
// torchvision::*) and resolves every --bind against its family's contract. Error{usage} on a
// library that does not load (with the loader's message), an unknown family, an op nobody
// registers, a TorchScript file or method that is not there, or a schema that does not match
// the contract (both printed side by side). Safe to call again: loads happen once.
void check_bindings(const KernelConfig& config);

// The families that take --bind, with their contract as a schema ("nms(Tensor dets, ...)").
std::vector<std::pair<std::string, std::string>> binding_contracts();

// A torchvision release, to select the behaviour of the Python logic that detfuzz ports
// (kernels/aten): the ports follow the op library they run against.
struct TorchvisionRelease {
  int major = 0, minor = 0, patch = 0;
  bool at_least(int major_at_least, int minor_at_least) const {
    return major != major_at_least ? major > major_at_least : minor >= minor_at_least;
  }
};
// "0.26.0+cu130", "0.14.1a0", "0.26" -> the release; nullopt when the text is no version.
std::optional<TorchvisionRelease> parse_torchvision_release(const std::string& version);

struct LibraryStatus {
  bool loaded = false;
  std::string path;
  std::string version;
  // The release the ports follow: the version's, or the newest detfuzz knows when version.py
  // beside the library says none (a source build).
  TorchvisionRelease release{0, 26, 0};
  std::string error;                   // why it is not loaded
  std::vector<std::string> preloaded;  // libraries loaded for its sake (PyPI wheels: libpython, libtorch_python)
};

// Loads torchvision's op library once per process (its TORCH_LIBRARY registrations cannot
// be loaded twice); later calls return the first outcome. Never throws.
const LibraryStatus& load_torchvision(const KernelConfig& config);

// Each op family's targets (model/op_table.h): the library's first, then detfuzz's own, then
// the planted ones, then the user's --bind.
#define DETFUZZ_DECLARE_TARGETS(name, Problem, size_unit, bind_contract) \
  std::vector<Target<Problem>> name##_targets(const KernelConfig& config);
DETFUZZ_OP_TABLE(DETFUZZ_DECLARE_TARGETS)
#undef DETFUZZ_DECLARE_TARGETS

// Targets that measure the fuzzer (kernels/mutants/catalog.h): "mutant:<name>" (one planted
// deviation each) and "twin:<op>" (their correct twins where no library target is one).
// Listed, but never fuzzed unless --targets names them.
inline bool is_planted(const std::string& target_name) {
  return target_name.rfind("mutant:", 0) == 0 || target_name.rfind("twin:", 0) == 0;
}

// Facts for report.json: torch and torchvision versions, CUDA, devices, compiler.
std::vector<std::pair<std::string, std::string>> environment(const KernelConfig& config);

// Makes LibTorch use one intra-op thread, so that worker processes do not fight over
// cores and a case runs the same way every time.
void set_single_threaded();

}  // namespace detfuzz::kernels
