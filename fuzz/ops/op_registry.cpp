#include "fuzz/ops/op_harness.h"

#include <cmath>

#include "kernels/run_policy.h"

namespace detfuzz::fuzz {

double largest_magnitude(const nlohmann::json& value) {
  if (value.is_number()) {
    const double x = std::fabs(value.get<double>());
    return std::isfinite(x) ? x : 0.0;
  }
  double largest = 0;
  if (value.is_array() || value.is_object())
    for (const auto& element : value) largest = std::max(largest, largest_magnitude(element));
  return largest;
}

const OpHarness* Registry::find(const std::string& name) const {
  for (const auto& op : ops)
    if (op->name() == name) return op.get();
  return nullptr;
}

Registry default_registry(const kernels::KernelConfig& config) {
  kernels::check_bindings(config);  // a bad --load/--bind: exit 2 before anything runs
  kernels::apply_determinism(config);
  Registry registry;
#define DETFUZZ_ADD_HARNESS(name, Problem, size_unit, bind_contract) \
  registry.ops.push_back(make_##name##_harness(kernels::under_run_policy(kernels::name##_targets(config), config, #name)));
  DETFUZZ_OP_TABLE(DETFUZZ_ADD_HARNESS)
#undef DETFUZZ_ADD_HARNESS
  return registry;
}

}  // namespace detfuzz::fuzz
