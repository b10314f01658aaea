// The user's own kernels as targets: libraries loaded with --load (their TORCH_LIBRARY ops
// become callable through the dispatcher) and TorchScript files, each bound with --bind to
// the op family whose contract it claims. Every call is boxed (IValues on a stack), so one
// path serves torchvision, plugins and TorchScript, torch 1.13 and 2.x (SymInt) alike.
#include <dlfcn.h>

#include <torch/csrc/jit/frontend/function_schema_parser.h>
#include <torch/csrc/api/include/torch/version.h>
#include <torch/script.h>

#include <algorithm>
#include <filesystem>
#include <iomanip>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>

#include "kernels/factories.h"
#include "kernels/tensor_convert.h"
#include "kernels/torchvision/dispatch.h"
#include "model/error.h"

namespace detfuzz::kernels {
namespace {

namespace fs = std::filesystem;

// The contract a bound op of `family` must have (model/op_table.h); nullptr for a family
// that takes no bindings.
const char* find_contract(const std::string& family) {
  const OpRow* row = find_op_row(family);
  return row ? row->bind_contract : nullptr;
}

std::string family_list() {
  std::string list;
  for (const OpRow& row : kOpRows)
    if (row.bind_contract) list += (list.empty() ? "" : ", ") + std::string(row.name);
  return list;
}

// torch 2.x writes SymInt where 1.13 writes int; to a caller both take a Python int.
std::string type_text(const c10::TypePtr& type) {
  std::string text = type->str();
  for (auto at = text.find("SymInt"); at != std::string::npos; at = text.find("SymInt", at)) text.replace(at, 6, "int");
  return text;
}

std::string argument_text(const c10::Argument& argument) {
  return type_text(argument.type()) + " " + argument.name();
}

std::string schema_text(const c10::FunctionSchema& schema) {
  std::ostringstream out;
  out << schema;
  return out.str();
}

// What a bound op is: a dispatcher op or a TorchScript method, with its schema as a caller
// sees it (a method's `self` left out).
class Callee {
 public:
  virtual ~Callee() = default;
  virtual const c10::FunctionSchema& schema() const = 0;
  virtual Availability availability(Device device) const = 0;
  virtual std::vector<c10::IValue> call(std::vector<c10::IValue> arguments) const = 0;
};

class DispatcherCallee final : public Callee {
 public:
  DispatcherCallee(std::string name, c10::OperatorHandle op) : name_(std::move(name)), op_(std::move(op)) {}
  const c10::FunctionSchema& schema() const override { return op_.schema(); }
  Availability availability(Device device) const override { return op_availability(name_, device); }
  std::vector<c10::IValue> call(std::vector<c10::IValue> arguments) const override {
    return call_boxed(op_, std::move(arguments));
  }

 private:
  std::string name_;
  c10::OperatorHandle op_;
};

class ScriptCallee final : public Callee {
 public:
  ScriptCallee(torch::jit::Module module, std::string method)
      : module_(std::move(module)), method_(std::move(method)) {
    const c10::FunctionSchema& full = module_.get_method(method_).function().getSchema();
    std::vector<c10::Argument> arguments(full.arguments().begin() + 1, full.arguments().end());  // drop self
    schema_ = std::make_unique<c10::FunctionSchema>(full.name(), full.overload_name(), std::move(arguments),
                                                    full.returns());
  }
  const c10::FunctionSchema& schema() const override { return *schema_; }
  Availability availability(Device device) const override { return aten_availability(device); }
  std::vector<c10::IValue> call(std::vector<c10::IValue> arguments) const override {
    c10::IValue result = translating_unsupported([&] { return module_.get_method(method_)(std::move(arguments)); });
    if (result.isTuple()) {
      const auto& elements = result.toTupleRef().elements();
      return std::vector<c10::IValue>(elements.begin(), elements.end());
    }
    return {std::move(result)};
  }

 private:
  torch::jit::Module module_;
  std::string method_;
  std::unique_ptr<c10::FunctionSchema> schema_;
};

// Nullopt when `actual` takes the contract's arguments (extra trailing ones need defaults,
// which detfuzz then passes) and returns its types; otherwise both side by side.
std::optional<std::string> schema_mismatch(const c10::FunctionSchema& contract, const c10::FunctionSchema& actual) {
  const auto& expected_arguments = contract.arguments();
  const auto& actual_arguments = actual.arguments();
  bool matches = actual_arguments.size() >= expected_arguments.size();
  for (std::size_t i = 0; matches && i < actual_arguments.size(); ++i)
    matches = i < expected_arguments.size()
                  ? type_text(actual_arguments[i].type()) == type_text(expected_arguments[i].type())
                  : actual_arguments[i].default_value().has_value();
  matches = matches && contract.returns().size() == actual.returns().size();
  for (std::size_t i = 0; matches && i < contract.returns().size(); ++i)
    matches = type_text(contract.returns()[i].type()) == type_text(actual.returns()[i].type());
  if (matches) return std::nullopt;

  std::ostringstream table;
  const std::size_t rows = std::max(expected_arguments.size(), actual_arguments.size());
  table << "    " << std::left << std::setw(10) << "" << std::setw(36) << "contract" << "bound op\n";
  auto row = [&](const std::string& label, const std::string& expected, const std::string& got, bool differs) {
    table << "    " << std::left << std::setw(10) << label << std::setw(36) << expected << got
          << (differs ? "   <- differs" : "") << "\n";
  };
  for (std::size_t i = 0; i < rows; ++i) {
    std::string expected = i < expected_arguments.size() ? argument_text(expected_arguments[i]) : "-";
    std::string got = i < actual_arguments.size() ? argument_text(actual_arguments[i]) : "-";
    bool differs = i >= expected_arguments.size() || i >= actual_arguments.size() ||
                   type_text(expected_arguments[i].type()) != type_text(actual_arguments[i].type());
    if (i >= expected_arguments.size() && i < actual_arguments.size() && actual_arguments[i].default_value()) {
      differs = false;
      got += " (has a default)";
    }
    row("arg " + std::to_string(i), expected, got, differs);
  }
  auto returns_text = [](const std::vector<c10::Argument>& returns) {
    std::string text;
    for (const auto& r : returns) text += (text.empty() ? "" : ", ") + type_text(r.type());
    return returns.size() == 1 ? text : "(" + text + ")";
  };
  const std::string expected_returns = returns_text(contract.returns());
  const std::string actual_returns = returns_text(actual.returns());
  row("returns", expected_returns, actual_returns, expected_returns != actual_returns);
  return table.str();
}

std::string library_state_hint() {
  return "is the library that registers it given with --load (and loaded without error)?";
}

// Process-wide: a library loads once, a TorchScript file is read once.
struct Loaded {
  std::mutex mutex;
  std::set<std::string> libraries;
  std::map<std::string, std::shared_ptr<const Callee>> callees;  // by target name
};

Loaded& loaded() {
  static Loaded state;
  return state;
}

void load_library(const std::string& path) {
  if (!loaded().libraries.insert(path).second) return;
  if (!fs::exists(path)) {
    loaded().libraries.erase(path);
    throw Error(ErrorKind::usage, "--load " + path + ": no such file; give the path of a shared library (.so) "
                                  "that registers ops with TORCH_LIBRARY");
  }
  if (!dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL)) {
    const char* message = dlerror();
    loaded().libraries.erase(path);
    throw Error(ErrorKind::usage, "--load " + path + ": dlopen failed: " + (message ? message : "unknown error") +
                                      " (undefined symbols usually mean the library was built against another "
                                      "LibTorch than this detfuzz's, torch " TORCH_VERSION ")");
  }
}

std::shared_ptr<const Callee> resolve(const Binding& binding) {
  const std::string where = "--bind " + binding.family + "=" +
                            (binding.script.empty() ? binding.op : "script:" + binding.script +
                                                                        (binding.method == "forward" ? "" : ":" + binding.method));
  const char* contract = find_contract(binding.family);
  if (!contract)
    throw Error(ErrorKind::usage, where + ": '" + binding.family + "' is not an op family that takes bindings; use one of " +
                                      family_list() + " (`detfuzz list` shows each contract)");
  auto& cache = loaded().callees;
  const std::string name = binding.target_name();
  if (auto found = cache.find(name); found != cache.end()) return found->second;

  std::shared_ptr<const Callee> callee;
  if (binding.script.empty()) {
    auto op = find_op(binding.op);
    if (!op) throw Error(ErrorKind::usage, where + ": no loaded library registers " + binding.op + "; " + library_state_hint());
    callee = std::make_shared<DispatcherCallee>(binding.op, *op);
  } else {
    if (!fs::exists(binding.script))
      throw Error(ErrorKind::usage, where + ": TorchScript file " + binding.script +
                                        " does not exist; export one with torch.jit.script(fn).save(PATH) "
                                        "(scripts/export_torchscript.py does it for torchvision's ops)");
    torch::jit::Module module;
    try {
      module = torch::jit::load(binding.script);
    } catch (const std::exception& e) {
      std::string message = e.what();
      throw Error(ErrorKind::usage, where + ": torch::jit::load(" + binding.script + ") failed: " +
                                        message.substr(0, message.find('\n')) +
                                        " (a script that calls a library's ops needs that library loaded: --load)");
    }
    if (!module.find_method(binding.method)) {
      std::string methods;
      for (const auto& method : module.get_methods()) methods += (methods.empty() ? "" : ", ") + method.name();
      throw Error(ErrorKind::usage, where + ": " + binding.script + " has no method '" + binding.method +
                                        "'; its methods: " + (methods.empty() ? "none" : methods));
    }
    callee = std::make_shared<ScriptCallee>(std::move(module), binding.method);
  }
  const c10::FunctionSchema expected = torch::jit::parseSchema(contract);
  if (auto mismatch = schema_mismatch(expected, callee->schema()))
    throw Error(ErrorKind::usage, where + ": the schema does not match the " + binding.family + " contract:\n" +
                                      *mismatch + "  contract: " + std::string(contract) +
                                      "\n  bound op: " + schema_text(callee->schema()) +
                                      "\n  write the op with the contract's argument and return types (names may differ)");
  cache.emplace(name, callee);
  return callee;
}

std::vector<Binding> parsed_bindings(const KernelConfig& config) {
  std::vector<Binding> bindings;
  for (const auto& text : config.bindings) bindings.push_back(parse_binding(text));
  return bindings;
}

// Calls `callee` with the contract's arguments, then the defaults of any extra ones.
std::vector<c10::IValue> call_with_defaults(const Callee& callee, std::vector<c10::IValue> arguments) {
  const auto& declared = callee.schema().arguments();
  for (std::size_t i = arguments.size(); i < declared.size(); ++i) arguments.push_back(*declared[i].default_value());
  return callee.call(std::move(arguments));
}

// What each family passes, in its contract's order.
std::vector<c10::IValue> contract_arguments(const NmsProblem& p, DType dtype, Device device) {
  return {boxes_tensor(p.boxes, dtype, device), values_tensor(p.scores, dtype, device), p.iou_threshold};
}

// A class-agnostic case is one class for all; max_num cuts keep, as torchvision's users do.
std::vector<c10::IValue> contract_arguments(const BatchedNmsProblem& p, DType dtype, Device device) {
  std::vector<double> classes(p.classes.size(), 0.0);
  if (!p.class_agnostic) std::copy(p.classes.begin(), p.classes.end(), classes.begin());
  return {boxes_tensor(p.boxes, dtype, device), values_tensor(p.scores, p.score_dtype.value_or(dtype), device),
          values_tensor(classes, DType::int64, device), p.iou_threshold};
}

std::vector<c10::IValue> contract_arguments(const BoxIouProblem& p, DType dtype, Device device) {
  return {boxes_tensor(p.boxes1, dtype, device), boxes_tensor(p.boxes2, dtype, device)};
}

std::vector<c10::IValue> contract_arguments(const BoxAreaProblem& p, DType dtype, Device device) {
  return {boxes_tensor(p.boxes, dtype, device)};
}

std::vector<c10::IValue> contract_arguments(const GiouLossProblem& p, DType dtype, Device device) {
  return {boxes_tensor(p.boxes1, dtype, device), boxes_tensor(p.boxes2, dtype, device),
          std::string(reduction_name(p.reduction)), p.eps};
}

std::vector<c10::IValue> contract_arguments(const BoxCoderProblem& p, DType dtype, Device device) {
  const bool encode = p.mode == BoxCoderProblem::Mode::encode;
  std::vector<Box> other = p.references;
  if (!encode)
    for (const auto& d : p.deltas) other.push_back({d[0], d[1], d[2], d[3]});
  return {std::string(encode ? "encode" : "decode"), boxes_tensor(p.boxes, dtype, device),
          boxes_tensor(other, dtype, device), c10::List<double>(std::vector<double>(p.weights.begin(), p.weights.end())),
          p.clip};
}

std::vector<c10::IValue> contract_arguments(const RoiAlignProblem& p, DType dtype, Device device) {
  return {feature_tensor(p.input, dtype, device), rois_tensor(p.rois, dtype, device), p.spatial_scale,
          p.pooled_height, p.pooled_width, p.sampling_ratio, p.aligned};
}

std::vector<c10::IValue> contract_arguments(const RoiPoolProblem& p, DType dtype, Device device) {
  return {feature_tensor(p.input, dtype, device), rois_tensor(p.rois, dtype, device), p.spatial_scale,
          p.pooled_height, p.pooled_width};
}

template <class Problem>
void adapt_outputs(const Problem&, std::vector<at::Tensor>&) {}

void adapt_outputs(const BatchedNmsProblem& p, std::vector<at::Tensor>& outputs) {
  if (p.max_num > 0 && !outputs.empty()) outputs[0] = outputs[0].slice(0, 0, p.max_num);
}

}  // namespace

std::string Binding::target_name() const {
  if (script.empty()) return op;
  return "script:" + fs::path(script).filename().string() + (method == "forward" ? "" : ":" + method);
}

Binding parse_binding(const std::string& text) {
  const auto usage = [&](const std::string& why) {
    return Error(ErrorKind::usage, "--bind '" + text + "': " + why +
                                       "; write FAMILY=NS::OP (an op a --load library registers, e.g. "
                                       "nms=myops::nms_v2) or FAMILY=script:FILE.pt[:METHOD]");
  };
  const auto equals = text.find('=');
  if (equals == std::string::npos || equals == 0) throw usage("no FAMILY= before the op");
  Binding binding;
  binding.family = text.substr(0, equals);
  const std::string callee = text.substr(equals + 1);
  if (callee.rfind("script:", 0) == 0) {
    std::string rest = callee.substr(7);
    // FILE.pt:METHOD; a colon inside the file's path is kept when no method follows it.
    if (auto colon = rest.rfind(':'); colon != std::string::npos && rest.find('/', colon) == std::string::npos &&
                                      colon + 1 < rest.size()) {
      binding.method = rest.substr(colon + 1);
      rest = rest.substr(0, colon);
    }
    if (rest.empty()) throw usage("no file after script:");
    binding.script = rest;
    return binding;
  }
  const auto separator = callee.find("::");
  if (separator == std::string::npos || separator == 0 || separator + 2 >= callee.size())
    throw usage("'" + callee + "' is not NS::OP");
  binding.op = callee;
  return binding;
}

void check_bindings(const KernelConfig& config) {
  const std::vector<Binding> bindings = parsed_bindings(config);
  if (config.plugin_libraries.empty() && bindings.empty()) return;
  // Plugins and scripts may call torchvision's ops: load it first when it is there.
  (void)load_torchvision(config);
  std::lock_guard<std::mutex> lock(loaded().mutex);
  for (const auto& path : config.plugin_libraries) load_library(path);
  std::map<std::string, std::string> families_by_target;
  for (const auto& binding : bindings) {
    auto [existing, inserted] = families_by_target.emplace(binding.target_name(), binding.family);
    if (!inserted)
      throw Error(ErrorKind::usage, "--bind: target " + binding.target_name() + " is bound twice (to " +
                                        existing->second + " and " + binding.family +
                                        "); bind each op once, or give script files different names");
    (void)resolve(binding);
  }
}

std::vector<std::pair<std::string, std::string>> binding_contracts() {
  std::vector<std::pair<std::string, std::string>> contracts;
  for (const OpRow& row : kOpRows)
    if (row.bind_contract) contracts.emplace_back(row.name, row.bind_contract);
  return contracts;
}

template <class Problem>
std::vector<Target<Problem>> bound_targets(const KernelConfig& config, const std::string& family) {
  std::vector<Target<Problem>> targets;
  for (const Binding& binding : parsed_bindings(config)) {
    if (binding.family != family) continue;
    std::shared_ptr<const Callee> callee;
    {
      std::lock_guard<std::mutex> lock(loaded().mutex);
      callee = resolve(binding);
    }
    Target<Problem> target;
    target.name = binding.target_name();
    target.description = (binding.script.empty() ? "plugin op " : "TorchScript " + binding.script + " method ") +
                         schema_text(callee->schema()) + ", bound to " + family;
    target.availability = [callee](Device device) { return callee->availability(device); };
    target.run = [callee](const Problem& problem, DType dtype, Device device) {
      return translating_unsupported([&] {
        std::vector<at::Tensor> outputs;
        for (const c10::IValue& output : call_with_defaults(*callee, contract_arguments(problem, dtype, device))) {
          if (!output.isTensor())
            throw Error(ErrorKind::input, "the bound op returned a " + output.tagKind() + ", not a Tensor");
          outputs.push_back(output.toTensor());
        }
        adapt_outputs(problem, outputs);
        std::vector<HostTensor> host;
        for (const at::Tensor& output : outputs) host.push_back(to_host(output));
        return host;
      });
    };
    targets.push_back(std::move(target));
  }
  return targets;
}

template std::vector<Target<NmsProblem>> bound_targets(const KernelConfig&, const std::string&);
template std::vector<Target<BatchedNmsProblem>> bound_targets(const KernelConfig&, const std::string&);
template std::vector<Target<BoxIouProblem>> bound_targets(const KernelConfig&, const std::string&);
template std::vector<Target<BoxAreaProblem>> bound_targets(const KernelConfig&, const std::string&);
template std::vector<Target<GiouLossProblem>> bound_targets(const KernelConfig&, const std::string&);
template std::vector<Target<BoxCoderProblem>> bound_targets(const KernelConfig&, const std::string&);
template std::vector<Target<RoiAlignProblem>> bound_targets(const KernelConfig&, const std::string&);
template std::vector<Target<RoiPoolProblem>> bound_targets(const KernelConfig&, const std::string&);

}  // namespace detfuzz::kernels
