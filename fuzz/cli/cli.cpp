// detfuzz's command line. One CLI11 definition per subcommand drives parsing, --help and
// the settings recorded in report.json, so the three cannot drift apart.
#include "fuzz/cli/cli.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <cstdio>
#include <iostream>

#include "fuzz/campaign.h"
#include "fuzz/environment.h"
#include "model/error.h"

namespace detfuzz::cli {
namespace {

constexpr int kMaxBoxesLimit = 100000;

struct RunSettings {
  std::vector<std::string> ops, targets;
  std::vector<std::string> dtypes{"fp16", "bf16", "fp32", "fp64"};
  std::vector<std::string> devices{"cpu"};
  std::optional<std::uint64_t> cases;
  std::string budget;
  std::uint64_t seed = 1;
  int max_boxes = 64;
  std::string report_dir = "detfuzz-report";
  std::vector<std::string> fail_on;
  std::string shrink_budget = "10s";
  std::string progress = "auto";
};

fuzz::CampaignOptions campaign_options(const RunSettings& settings) {
  fuzz::CampaignOptions options;
  options.ops = settings.ops;
  options.targets = settings.targets;
  options.dtypes.clear();
  for (const auto& name : settings.dtypes) {
    auto dtype = parse_dtype(name);
    if (!dtype || !is_floating(*dtype))
      throw Error(ErrorKind::usage,
                  fmt::format("unknown dtype '{}' in --dtypes; use fp16, bf16, fp32 or fp64", name));
    options.dtypes.push_back(*dtype);
  }
  options.devices.clear();
  for (const auto& name : settings.devices) {
    if (name == "cpu") options.devices.push_back(Device::cpu);
    else if (name == "cuda") options.devices.push_back(Device::cuda);
    else throw Error(ErrorKind::usage, fmt::format("unknown device '{}' in --devices; use cpu or cuda", name));
  }
  if (settings.max_boxes < 0 || settings.max_boxes > kMaxBoxesLimit)
    throw Error(ErrorKind::usage, fmt::format("--max-boxes {} is out of range; use 0..{}",
                                              settings.max_boxes, kMaxBoxesLimit));
  options.max_boxes = settings.max_boxes;
  options.cases_per_cell = settings.cases;
  if (!settings.budget.empty()) options.budget_s = parse_duration(settings.budget, "--budget");
  if (!options.cases_per_cell && !options.budget_s) options.cases_per_cell = 200;
  options.seed = settings.seed;
  for (const auto& name : settings.fail_on) {
    if (name == "all") {
      options.fail_on.assign(kAllFindingKinds.begin(), kAllFindingKinds.end());
      continue;
    }
    auto kind = parse_finding_kind(name);
    if (!kind) {
      std::vector<std::string> names;
      for (FindingKind k : kAllFindingKinds) names.emplace_back(finding_kind_name(k));
      throw Error(ErrorKind::usage, fmt::format("unknown finding kind '{}' in --fail-on; use {} or all",
                                                name, fmt::join(names, ", ")));
    }
    options.fail_on.push_back(*kind);
  }
  options.shrink_budget_s = parse_duration(settings.shrink_budget, "--shrink-budget");
  return options;
}

fuzz::ProgressMode progress_mode(const std::string& name) {
  if (name == "auto") return fuzz::ProgressMode::automatic;
  if (name == "live") return fuzz::ProgressMode::live;
  if (name == "lines") return fuzz::ProgressMode::lines;
  if (name == "none") return fuzz::ProgressMode::none;
  throw Error(ErrorKind::usage, "unknown --progress '" + name + "'; use auto, live, lines or none");
}

// A campaign may run for hours: find out before it starts that its report can be written.
void check_report_dir(const std::string& dir) {
  try {
    reports::write_file_atomically(reports::ensure_report_dir(dir) + "/.detfuzz-write-test", "");
    std::remove((dir + "/.detfuzz-write-test").c_str());
  } catch (const std::exception& e) {
    throw Error(ErrorKind::usage, std::string(e.what()) + "; pass a writable --report DIR");
  }
}

int run_command(const RunSettings& settings, const kernels::KernelConfig& kernel_config) {
  fuzz::CampaignOptions options = campaign_options(settings);
  check_report_dir(settings.report_dir);
  auto progress = fuzz::make_progress(progress_mode(settings.progress));
  kernels::set_single_threaded();
  fuzz::Registry registry = fuzz::default_registry(kernel_config);
  reports::Report report = fuzz::run_campaign(registry, options, *progress);
  report.environment = fuzz::environment_json(kernel_config);
  // The summary first: if the report cannot be written after all, the findings are on screen.
  reports::print_summary(report, std::cout);
  std::string path;
  try {
    path = reports::write_report(report, settings.report_dir);
  } catch (const std::exception& e) {
    throw Error(ErrorKind::input, std::string(e.what()) + " (the summary above holds the findings)");
  }
  std::cout << "report: " << path << "\n";
  return report.has_failing_finding() ? 1 : 0;
}

int list_command(bool as_json, const kernels::KernelConfig& kernel_config) {
  kernels::set_single_threaded();
  fuzz::Registry registry = fuzz::default_registry(kernel_config);
  nlohmann::json ops = nlohmann::json::array();
  for (const auto& op : registry.ops) {
    nlohmann::json targets = nlohmann::json::array();
    for (const auto& target : op->target_names()) {
      nlohmann::json devices = nlohmann::json::object();
      for (Device device : {Device::cpu, Device::cuda}) {
        kernels::Availability availability = op->availability(target, device);
        nlohmann::json entry = {{"available", availability.available}};
        if (!availability.available) {
          entry["reason"] = availability.reason;
        } else {
          nlohmann::json dtypes = nlohmann::json::object();
          for (DType dtype : kFloatDTypes) {
            auto reason = op->unsupported_reason(target, dtype, device);
            dtypes[std::string(dtype_name(dtype))] = reason ? nlohmann::json(*reason) : nlohmann::json("supported");
          }
          entry["dtypes"] = dtypes;
        }
        devices[device_name(device)] = entry;
      }
      targets.push_back({{"name", target},
                         {"description", op->target_description(target)},
                         {"devices", devices}});
    }
    ops.push_back({{"name", op->name()}, {"description", op->description()}, {"targets", targets}});
  }
  std::vector<std::string> kinds;
  for (FindingKind kind : kAllFindingKinds) kinds.emplace_back(finding_kind_name(kind));
  nlohmann::json listing = {{"ops", ops},
                            {"dtypes", {"fp16", "bf16", "fp32", "fp64"}},
                            {"devices", {"cpu", "cuda"}},
                            {"finding_kinds", kinds},
                            {"environment", fuzz::environment_json(kernel_config)}};
  if (as_json) {
    std::cout << listing.dump(2) << "\n";
    return 0;
  }
  for (const auto& op : listing["ops"]) {
    fmt::print("{}: {}\n", op["name"].get<std::string>(), op["description"].get<std::string>());
    for (const auto& target : op["targets"]) {
      fmt::print("  target {}: {}\n", target["name"].get<std::string>(),
                 target["description"].get<std::string>());
      for (const auto& [device, entry] : target["devices"].items()) {
        if (!entry["available"].get<bool>()) {
          fmt::print("    {}: unavailable: {}\n", device, entry["reason"].get<std::string>());
          continue;
        }
        for (const auto& [dtype, state] : entry["dtypes"].items())
          fmt::print("    {} {}: {}\n", device, dtype, state.get<std::string>());
      }
    }
  }
  fmt::print("finding kinds: {}\n", fmt::join(kinds, ", "));
  return 0;
}

}  // namespace

double parse_duration(const std::string& text, const std::string& option) {
  std::size_t consumed = 0;
  double value = 0;
  try {
    value = std::stod(text, &consumed);
  } catch (const std::exception&) {
    consumed = 0;
  }
  std::string unit = text.substr(consumed);
  double scale = unit.empty() || unit == "s" ? 1 : unit == "ms" ? 1e-3 : unit == "m" ? 60 : unit == "h" ? 3600 : -1;
  if (consumed == 0 || scale < 0 || !std::isfinite(value) || value < 0)
    throw Error(ErrorKind::usage, fmt::format("{} '{}' is not a duration; write e.g. 90, 90s, 1500ms, 5m or 1h",
                                              option, text));
  return value * scale;
}

int main_with_args(int argc, char** argv) {
  CLI::App app{"detfuzz: a numerical-consistency fuzzer for object-detection kernels.\n"
               "Exit status: 0 no failing finding, 1 failing findings, 2 usage or input error,\n"
               "3 internal error.",
               "detfuzz"};
  app.set_version_flag("--version", DETFUZZ_VERSION);
  app.require_subcommand(1);
  kernels::KernelConfig kernel_config;
  app.add_option("--torchvision-lib", kernel_config.torchvision_lib,
                 "torchvision op library (_C*.so) to test; default: $DETFUZZ_TORCHVISION_LIB, then "
                 "the python3-torchvision package's")
      ->envname("DETFUZZ_TORCHVISION_LIB");

  bool list_json = false;
  CLI::App* list = app.add_subcommand("list", "ops, targets and the dtypes/devices each supports");
  list->add_flag("--json", list_json, "print the listing as JSON");

  RunSettings settings;
  CLI::App* run = app.add_subcommand("run", "run a fuzzing campaign over op x target x dtype x device");
  run->add_option("--ops", settings.ops, "ops to fuzz (default: all; see `detfuzz list`)")->delimiter(',');
  run->add_option("--targets", settings.targets, "targets to fuzz (default: all of the ops')")->delimiter(',');
  run->add_option("--dtypes", settings.dtypes, "input dtypes: fp16, bf16, fp32, fp64")
      ->delimiter(',')->capture_default_str();
  run->add_option("--devices", settings.devices, "cpu and/or cuda")->delimiter(',')->capture_default_str();
  run->add_option("--cases", settings.cases,
                  "cases per cell (default 200 when no --budget is given)");
  run->add_option("--budget", settings.budget,
                  "wall-time budget shared fairly by all cells, e.g. 60s, 5m (stops at --cases too)");
  run->add_option("--seed", settings.seed, "campaign seed: same seed and settings, same cases and findings")
      ->capture_default_str();
  run->add_option("--max-boxes", settings.max_boxes, "cap on boxes per generated set")->capture_default_str();
  run->add_option("--report", settings.report_dir, "directory for report.json")->capture_default_str();
  run->add_option("--fail-on", settings.fail_on,
                  "also fail on these non-default kinds: precision, overflow (or all)")
      ->delimiter(',');
  run->add_option("--shrink-budget", settings.shrink_budget, "time to minimize each new finding")
      ->capture_default_str();
  run->add_option("--progress", settings.progress, "auto, live, lines or none")->capture_default_str();

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::string message = e.what();
    if (app.get_subcommands().empty() && !app.remaining().empty() && app.remaining().front()[0] != '-')
      message = "unknown command '" + app.remaining().front() + "'; the commands are list and run";
    std::cerr << "detfuzz: error: " << message << "\nRun `detfuzz --help` or `detfuzz "
              << (app.get_subcommands().empty() ? "run" : app.get_subcommands().front()->get_name())
              << " --help` for the options.\n";
    return 2;
  }

  try {
    if (list->parsed()) return list_command(list_json, kernel_config);
    return run_command(settings, kernel_config);
  } catch (const Error& e) {
    std::cerr << "detfuzz: error: " << e.what() << "\n";
    return (e.kind() == ErrorKind::usage || e.kind() == ErrorKind::input) ? 2 : 3;
  } catch (const std::exception& e) {
    std::cerr << "detfuzz: internal error: " << e.what() << "\n";
    return 3;
  }
}

}  // namespace detfuzz::cli
