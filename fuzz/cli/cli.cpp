// detfuzz's command line. One CLI11 definition per subcommand drives parsing, --help and
// the settings recorded in report.json, so the three cannot drift apart.
#include "fuzz/cli/cli.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <unistd.h>
#include <filesystem>
#include <iostream>
#include <thread>
#include <tuple>

#include "corpus/atomic_file.h"
#include "fuzz/campaign.h"
#include "fuzz/environment.h"
#include "fuzz/replay.h"
#include "fuzz/runner.h"
#include "fuzz/wire_format.h"
#include "fuzz/zygote.h"
#include "fuzz/selftest.h"
#include "reports/gate.h"
#include "reports/merge.h"
#include "reports/render.h"
#include "corpus/case_file.h"
#include "kernels/run_policy.h"
#include "model/error.h"

namespace detfuzz::cli {
namespace {

constexpr int kMaxBoxesLimit = 100000;
constexpr int kMaxJobs = 256;

// The one reading of a --dtypes and a --devices value (run and replay alike).
DType dtype_flag(const std::string& name) {
  const std::optional<DType> dtype = parse_dtype(name);
  if (!dtype || !is_floating(*dtype))
    throw Error(ErrorKind::usage, fmt::format("unknown dtype '{}' in --dtypes; use fp16, bf16, fp32 or fp64", name));
  return *dtype;
}

Device device_flag(const std::string& name) {
  const std::optional<Device> device = parse_device(name);
  if (!device) throw Error(ErrorKind::usage, fmt::format("unknown device '{}' in --devices; use cpu or cuda", name));
  return *device;
}

// How kernels are run: in worker processes (crashes and hangs become findings) or here.
struct IsolationSettings {
  std::string isolation = "process";
  std::string case_timeout = "10s";
  std::string case_timeout_floor = "50ms";
};

struct RunSettings {
  std::vector<std::string> ops, targets;
  std::vector<std::string> dtypes{"fp16", "bf16", "fp32", "fp64"};
  std::vector<std::string> devices{"cpu"};
  std::optional<std::uint64_t> cases;
  std::string budget;
  std::uint64_t seed = 1;
  int max_boxes = 64;
  bool hostile = false;
  bool fail_outside_contract = false;
  std::string report_dir = "detfuzz-report";
  std::vector<std::string> fail_on;
  std::string minimize_budget = "10s";
  std::string corpus_dir;  // default: <report>/corpus
  std::string progress = "auto";
  bool profile = false;
  int jobs = 0;  // 0: one lane per CPU core
  std::string shard;                        // "i/N"; else from the scheduler's environment
  std::optional<std::uint64_t> shard_count;  // with JOB_COMPLETION_INDEX
  IsolationSettings isolation;
};

// One cell and one case of a campaign, named the way `run` names them.
struct CaseSelection {
  std::string op, target, dtype = "fp32", device = "cpu";
  std::optional<std::uint64_t> seed, case_index;
  std::string reproduce;
  int max_boxes = 64;
  bool hostile = false;
  bool minimize = false;
  std::string kind, property;  // which verdict --minimize keeps (default: the first failing one)
  std::string corpus_dir;
  std::string minimize_budget = "10s";
};

struct ReplaySettings {
  std::vector<std::string> files;
  std::string report_dir;  // case files: also write a report (JUnit per cell, a finding per mismatch)
  CaseSelection selection;
  IsolationSettings isolation;
};

struct SelftestSettings {
  std::vector<std::string> mutants;
  std::string budget_per_mutant = "60s";
  std::uint64_t seed = 1;
  int max_boxes = 64;
  std::string minimize_budget = "10s";
  std::string report_dir = "detfuzz-selftest";
  std::uint64_t twin_cases = 0;
  bool false_alarms_only = false;
  // Short, so that the hang mutant is a hang within a small budget.
  IsolationSettings isolation{"process", "2s"};
};

struct EvalSettings {
  std::string file;
  std::string target;  // default: the file's
  IsolationSettings isolation;
};

// A whole non-negative number, or nullopt.
std::optional<std::uint64_t> whole_number(const std::string& text) {
  if (text.empty() || text.size() > 18 || text.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  return std::stoull(text);
}

std::uint64_t environment_number(const char* name) {
  const char* value = std::getenv(name);
  auto number = whole_number(value ? value : "");
  if (!number)
    throw Error(ErrorKind::usage, fmt::format("{}='{}' is not a whole number (it says which shard to run)", name,
                                              value ? value : ""));
  return *number;
}

// Which shard to run: --shard i/N, else a Slurm job array's task (SLURM_ARRAY_TASK_ID
// counted from SLURM_ARRAY_TASK_MIN, of SLURM_ARRAY_TASK_COUNT), else a Kubernetes Indexed
// Job's JOB_COMPLETION_INDEX of --shard-count (or DETFUZZ_SHARD_COUNT); else the only one.
std::pair<std::uint64_t, std::uint64_t> shard_of(const RunSettings& settings) {
  if (!settings.shard.empty()) {
    const auto slash = settings.shard.find('/');
    auto index = whole_number(settings.shard.substr(0, slash));
    auto count = slash == std::string::npos ? std::nullopt : whole_number(settings.shard.substr(slash + 1));
    if (!index || !count)
      throw Error(ErrorKind::usage, fmt::format("--shard '{}' is not i/N (shard i of N, counted from 0: 0/4 .. 3/4)",
                                                settings.shard));
    return {*index, *count};
  }
  if (std::getenv("SLURM_ARRAY_TASK_ID")) {
    const std::uint64_t id = environment_number("SLURM_ARRAY_TASK_ID");
    const std::uint64_t first = std::getenv("SLURM_ARRAY_TASK_MIN") ? environment_number("SLURM_ARRAY_TASK_MIN") : 0;
    if (!std::getenv("SLURM_ARRAY_TASK_COUNT"))
      throw Error(ErrorKind::usage, "SLURM_ARRAY_TASK_ID is set but SLURM_ARRAY_TASK_COUNT is not; pass --shard i/N");
    if (id < first) throw Error(ErrorKind::usage, "SLURM_ARRAY_TASK_ID is below SLURM_ARRAY_TASK_MIN; pass --shard i/N");
    return {id - first, environment_number("SLURM_ARRAY_TASK_COUNT")};
  }
  if (std::getenv("JOB_COMPLETION_INDEX")) {
    const std::uint64_t index = environment_number("JOB_COMPLETION_INDEX");
    if (settings.shard_count) return {index, *settings.shard_count};
    if (std::getenv("DETFUZZ_SHARD_COUNT")) return {index, environment_number("DETFUZZ_SHARD_COUNT")};
    throw Error(ErrorKind::usage,
                "JOB_COMPLETION_INDEX is set but the number of shards is not; pass --shard-count N (the Job's "
                "completions) or set DETFUZZ_SHARD_COUNT");
  }
  return {0, 1};
}

fuzz::CampaignOptions campaign_options(const RunSettings& settings) {
  fuzz::CampaignOptions options;
  options.ops = settings.ops;
  options.targets = settings.targets;
  options.dtypes.clear();
  for (const auto& name : settings.dtypes) options.dtypes.push_back(dtype_flag(name));
  options.devices.clear();
  for (const auto& name : settings.devices) options.devices.push_back(device_flag(name));
  if (settings.max_boxes < 0 || settings.max_boxes > kMaxBoxesLimit)
    throw Error(ErrorKind::usage, fmt::format("--max-boxes {} is out of range; use 0..{}",
                                              settings.max_boxes, kMaxBoxesLimit));
  options.max_boxes = settings.max_boxes;
  options.hostile = settings.hostile;
  options.fail_outside_contract = settings.fail_outside_contract;
  options.cases_per_cell = settings.cases;
  if (!settings.budget.empty()) options.budget_s = parse_duration(settings.budget, "--budget");
  if (!options.cases_per_cell && !options.budget_s) options.cases_per_cell = 200;
  options.seed = settings.seed;
  std::tie(options.shard_index, options.shard_count) = shard_of(settings);
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
  options.minimize_budget_s = parse_duration(settings.minimize_budget, "--minimize-budget");
  options.corpus_dir = settings.corpus_dir.empty() ? settings.report_dir + "/corpus" : settings.corpus_dir;
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
    corpus::ensure_directory(dir);
    corpus::write_file_atomically(dir + "/.detfuzz-write-test", "");
    std::remove((dir + "/.detfuzz-write-test").c_str());
  } catch (const std::exception& e) {
    throw Error(ErrorKind::usage, std::string(e.what()) + "; pass a writable --report DIR");
  }
}

std::string own_executable() {
  std::error_code error;
  auto path = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) throw Error(ErrorKind::internal, "cannot find the detfuzz executable for workers: " + error.message());
  return path.string();
}

// Kernels that crash or hang must not take detfuzz with them: by default they run in worker
// processes (`detfuzz worker`), replaced when they die.
std::unique_ptr<fuzz::CaseRunner> make_runner(const IsolationSettings& settings, const std::string& scratch_dir,
                                              const kernels::KernelConfig& config) {
  const double timeout = parse_duration(settings.case_timeout, "--case-timeout");
  if (settings.isolation == "none") return std::make_unique<fuzz::InProcessRunner>();
  if (settings.isolation != "process")
    throw Error(ErrorKind::usage, "unknown --isolation '" + settings.isolation + "'; use process or none");
  fuzz::WorkerOptions options;
  options.executable = own_executable();
  if (!config.torchvision_lib.empty()) options.arguments = {"--torchvision-lib", config.torchvision_lib};
  for (const auto& library : config.plugin_libraries) options.arguments.insert(options.arguments.end(), {"--load", library});
  for (const auto& binding : config.bindings) options.arguments.insert(options.arguments.end(), {"--bind", binding});
  if (config.repeats > 0) options.arguments.insert(options.arguments.end(), {"--repeat", std::to_string(config.repeats)});
  if (config.deterministic) options.arguments.push_back("--deterministic");
  options.timeout_rule.ceiling_s = timeout;
  options.timeout_rule.floor_s = parse_duration(settings.case_timeout_floor, "--case-timeout-floor");
  if (options.timeout_rule.floor_s > timeout)
    throw Error(ErrorKind::usage, fmt::format("--case-timeout-floor {} is above --case-timeout {}; use a floor at or "
                                              "below the ceiling (equal: no calibration)",
                                              settings.case_timeout_floor, settings.case_timeout));
  options.scratch_dir = scratch_dir;
  return fuzz::make_worker_runner(options);
}

// Where replay and eval keep their worker's stderr: a folder of their own under /tmp,
// removed when they are done.
struct ScratchDir {
  std::string path =
      (std::filesystem::temp_directory_path() / ("detfuzz-" + std::to_string(::getpid()))).string();
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
};

void add_isolation_options(CLI::App* command, IsolationSettings& settings) {
  command->add_option("--isolation", settings.isolation,
                      "process: kernels run in worker processes, a crash or hang is a finding; none: in this process")
      ->capture_default_str();
  command->add_option("--case-timeout", settings.case_timeout,
                      "the ceiling: no case runs longer (x (1 + the op's largest generated case / 1000)); each cell's "
                      "first 32 cases get it, later ones 8x the slowest measured case of their size class (cost "
                      "model: pairs for NMS and IoU, linear otherwise), at least --case-timeout-floor; a case past a "
                      "calibrated limit is a hang once its cell's first one also ran past the ceiling")
      ->capture_default_str();
  command->add_option("--case-timeout-floor", settings.case_timeout_floor,
                      "the least a calibrated case timeout can be (set it to --case-timeout for a fixed timeout)")
      ->capture_default_str();
}

volatile std::sig_atomic_t g_stop_signal = 0;

extern "C" void on_stop_signal(int signal) {
  g_stop_signal = signal;
  fuzz::request_stop();
}

// SIGINT/SIGTERM stop the campaign after (or abandon) the case in flight; no SA_RESTART, so
// a wait for a worker wakes up to notice.
void install_stop_handlers() {
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

int run_command(const RunSettings& settings, const kernels::KernelConfig& kernel_config) {
  fuzz::CampaignOptions options = campaign_options(settings);
  check_report_dir(settings.report_dir);
  // Each lane runs whole cells with a worker of its own; more lanes than cores would only
  // make kernels fight (and turn fast cases into false hangs).
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  if (settings.jobs < 0 || settings.jobs > kMaxJobs)
    throw Error(ErrorKind::usage, fmt::format("--jobs {} is out of range; use 1..{} (or 0 for one per core, {} here)",
                                              settings.jobs, kMaxJobs, cores));
  const int jobs = settings.jobs == 0 ? static_cast<int>(cores) : settings.jobs;
  std::vector<std::unique_ptr<fuzz::CaseRunner>> runners;
  std::vector<fuzz::CaseRunner*> lanes;
  for (int lane = 0; lane < jobs; ++lane) {
    const std::string scratch =
        settings.report_dir + "/workers" + (lane == 0 ? std::string() : "/lane-" + std::to_string(lane));
    runners.push_back(make_runner(settings.isolation, scratch, kernel_config));
    lanes.push_back(runners.back().get());
  }
  // A hang's shrink candidates cost its cell's calibrated limit each; the ceiling is paid
  // for the confirmation (twice at most), not per candidate.
  options.slow_minimize_budget_s =
      std::max(6 * options.minimize_budget_s, 2 * parse_duration(settings.isolation.case_timeout, "--case-timeout"));
  auto progress = fuzz::make_progress(progress_mode(settings.progress));
  kernels::set_single_threaded();
  fuzz::Registry registry = fuzz::default_registry(kernel_config);
  options.environment = fuzz::environment_json(kernel_config);
  options.checkpoint = [&](const reports::Report& partial) {
    reports::Report copy = partial;
    copy.environment = options.environment;
    try {
      reports::write_report(copy, settings.report_dir);
    } catch (const std::exception&) {
      // A checkpoint that cannot be written is retried at the next one; the end says why.
    }
  };
  install_stop_handlers();
  reports::Report report = fuzz::run_campaign(registry, options, *progress, lanes);
  report.environment = options.environment;
  // The summary first: if the report cannot be written after all, the findings are on screen.
  reports::print_summary(report, std::cout);
  if (settings.profile) reports::print_profile(report, std::cout);
  std::string path;
  try {
    path = reports::write_report_files(report, settings.report_dir);
  } catch (const std::exception& e) {
    throw Error(ErrorKind::input, std::string(e.what()) + " (the summary above holds the findings)");
  }
  std::cout << "report: " << path << (report.partial ? " (partial: interrupted)" : "") << "\n";
  if (g_stop_signal) return 128 + g_stop_signal;  // 130 for SIGINT, 143 for SIGTERM
  return report.has_failing_finding() ? 1 : 0;
}

int selftest_command(const SelftestSettings& settings, const kernels::KernelConfig& kernel_config) {
  fuzz::SelftestOptions options;
  options.mutants = settings.mutants;
  fuzz::select_mutants(options.mutants);  // unknown names: exit 2 before anything runs
  options.budget_per_mutant_s = parse_duration(settings.budget_per_mutant, "--budget-per-mutant");
  options.seed = settings.seed;
  if (settings.max_boxes < 0 || settings.max_boxes > kMaxBoxesLimit)
    throw Error(ErrorKind::usage, fmt::format("--max-boxes {} is out of range; use 0..{}",
                                              settings.max_boxes, kMaxBoxesLimit));
  options.max_boxes = settings.max_boxes;
  options.minimize_budget_s = parse_duration(settings.minimize_budget, "--minimize-budget");
  options.corpus_dir = settings.report_dir + "/corpus";
  options.cases_per_correct_cell = settings.twin_cases;
  options.skip_mutants = settings.false_alarms_only;
  check_report_dir(settings.report_dir);
  auto runner = make_runner(settings.isolation, settings.report_dir + "/workers", kernel_config);
  kernels::set_single_threaded();
  fuzz::Registry registry = fuzz::default_registry(kernel_config);
  install_stop_handlers();
  fuzz::SelftestResult result = fuzz::run_selftest(registry, options, *runner, std::cerr);
  fuzz::print_scorecard(result, std::cout);
  const std::string path = settings.report_dir + "/selftest.json";
  try {
    corpus::write_file_atomically(path, fuzz::to_json(result).dump(2) + "\n");
  } catch (const std::exception& e) {
    throw Error(ErrorKind::input, std::string(e.what()) + " (the scorecard above holds the results)");
  }
  std::cout << "selftest report: " << path << (g_stop_signal ? " (partial: interrupted)" : "") << "\n";
  if (g_stop_signal) return 128 + g_stop_signal;
  return result.passed() ? 0 : 1;
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
  nlohmann::json contracts = nlohmann::json::object();
  for (const auto& [family, schema] : kernels::binding_contracts()) contracts[family] = schema;
  std::vector<std::string> kinds;
  for (FindingKind kind : kAllFindingKinds) kinds.emplace_back(finding_kind_name(kind));
  nlohmann::json listing = {{"ops", ops},
                            {"dtypes", {"fp16", "bf16", "fp32", "fp64"}},
                            {"devices", {"cpu", "cuda"}},
                            {"finding_kinds", kinds},
                            {"bind_contracts", contracts},
                            {"environment", fuzz::environment_json(kernel_config)}};
  if (as_json) {
    std::cout << listing.dump(2) << "\n";
    return 0;
  }
  // The stack first: whether a cell below is unavailable often comes down to these lines.
  fmt::print("environment:\n");
  for (const auto& [key, value] : listing["environment"].items())
    fmt::print("  {}: {}\n", key, value.is_string() ? value.get<std::string>() : value.dump());
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
  fmt::print("contracts for --bind FAMILY=NS::OP or FAMILY=script:FILE.pt (argument and return types must match):\n");
  for (const auto& [family, schema] : contracts.items()) fmt::print("  {}: {}\n", family, schema.get<std::string>());
  return 0;
}

// `replay FILE...`: every file is replayed even when an earlier one is malformed; the
// status says the worst that happened (2 input error, 1 expectation not met, 77 all
// skipped: CTest's skip code, 0 otherwise).
// A replay as a report, so CI shows it and `gate` compares corpora: one cell per case file
// (named after it), a failing finding in it when the case no longer matches its expect
// (property: the file's name); an unreadable file is such a finding too.
struct ReplayReport {
  reports::Report report;

  reports::CellSummary& cell(const corpus::CaseFile& file, const std::string& path) {
    reports::CellSummary summary;
    summary.op = file.op;
    summary.target = file.target;
    summary.dtype = file.dtype;
    summary.device = file.device;
    summary.case_name = std::filesystem::path(path).filename().string();
    report.cells.push_back(summary);
    return report.cells.back();
  }
  void mismatch(reports::CellSummary& cell, const corpus::CaseFile& file, const std::string& path,
                const std::string& message, const nlohmann::json& details) {
    reports::FindingRecord f;
    f.op = cell.op;
    f.target = cell.target;
    f.dtype = cell.dtype;
    f.device = cell.device;
    f.kind = "corpus";
    f.property = cell.case_name;
    f.signature = fmt::format("{}/{}/{}/{}/{}/{}", f.op, f.target, f.dtype, f.device, f.kind, f.property);
    f.message = message;
    f.input = file.input;
    f.details = details;
    f.replay = "detfuzz replay " + path;
    f.case_file = path;
    cell.findings = 1;
    cell.status = reports::CellStatus::failed;
    report.findings.push_back(std::move(f));
  }
};

int replay_files(const ReplaySettings& settings, const fuzz::Registry& registry, fuzz::CaseRunner& runner) {
  const auto& files = settings.files;
  if (!settings.report_dir.empty()) check_report_dir(settings.report_dir);
  const auto start = std::chrono::steady_clock::now();
  ReplayReport replayed;
  // By name, so the same corpus replayed from another checkout is the same campaign to `gate`.
  std::vector<std::string> names;
  for (const auto& path : files) names.push_back(std::filesystem::path(path).filename().string());
  replayed.report.config = {{"replay", true}, {"files", names}};
  int matched = 0, mismatched = 0, skipped = 0, broken = 0;
  for (const std::string& path : files) {
    try {
      corpus::CaseFile file = corpus::read_case_file(path);
      compare::Judgement judgement;
      const auto status = fuzz::replay_case(registry, file, path, std::cout, runner, &judgement);
      reports::CellSummary& cell = replayed.cell(file, path);
      switch (status) {
        case fuzz::ReplayStatus::matched:
          ++matched;
          cell.cases = 1;
          break;
        case fuzz::ReplayStatus::mismatched: {
          ++mismatched;
          cell.cases = 1;
          nlohmann::json verdicts = nlohmann::json::array();
          std::string message =
              file.expect.fail ? fmt::format("expected fail: {}/{}", finding_kind_name(file.expect.kind), file.expect.property)
                               : std::string("expected pass");
          for (const auto& v : judgement.verdicts) {
            verdicts.push_back(fuzz::verdict_json(v));
            message += fmt::format("; got [{}] {}: {}", finding_kind_name(v.kind), v.property, v.message);
          }
          if (judgement.verdicts.empty()) message += "; got no verdict";
          replayed.mismatch(cell, file, path, message, {{"verdicts", verdicts}});
          break;
        }
        case fuzz::ReplayStatus::skipped:
          ++skipped;
          cell.status = reports::CellStatus::unsupported;
          cell.reason = "its target, dtype or device is not available here";
          break;
      }
    } catch (const Error& e) {
      ++broken;
      std::cout << "ERROR " << e.what() << "\n";
      corpus::CaseFile unreadable;
      unreadable.op = "unreadable";
      unreadable.target = unreadable.dtype = unreadable.device = "-";
      replayed.mismatch(replayed.cell(unreadable, path), unreadable, path, e.what(), nlohmann::json::object());
    }
  }
  if (files.size() > 1)
    fmt::print("{} matched, {} did not, {} skipped, {} unreadable\n", matched, mismatched, skipped, broken);
  if (!settings.report_dir.empty()) {
    replayed.report.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::cout << "report: " << reports::write_report_files(replayed.report, settings.report_dir) << "\n";
  }
  if (broken) return 2;
  if (mismatched) return 1;
  return matched == 0 && skipped > 0 ? 77 : 0;
}

// `replay --seed S ... --case-index K` or `--reproduce STRING`: regenerate a campaign's case
// bit for bit, run it, and (with --minimize) minimize it and write its case file.
int replay_generated(const CaseSelection& selection, const fuzz::Registry& registry,
                     const kernels::KernelConfig& kernel_config, fuzz::CaseRunner& runner) {
  const DType dtype = dtype_flag(selection.dtype);
  const Device device = device_flag(selection.device);
  if (!selection.seed && !selection.case_index && selection.reproduce.empty())
    throw Error(ErrorKind::usage, "replay needs case files, or --seed S with --case-index K, or --reproduce STRING");
  if (selection.op.empty() || selection.target.empty())
    throw Error(ErrorKind::usage, "replay --seed/--reproduce needs --ops and --targets (one each), as the "
                                  "case file's origin.replay or the report's replay command gives them");
  const fuzz::OpHarness& op = fuzz::find_op_or_throw(registry, selection.op, "--ops");
  const auto targets = op.target_names();
  if (std::find(targets.begin(), targets.end(), selection.target) == targets.end())
    throw Error(ErrorKind::usage, fmt::format("op {} has no target '{}' (targets: {})", selection.op,
                                              selection.target, fmt::join(targets, ", ")));
  fuzz::CaseRequest request{selection.target, dtype, device, 0, 0, selection.max_boxes, selection.hostile};
  nlohmann::json input;
  if (!selection.reproduce.empty()) {
    fuzz::ShrinkPath path = fuzz::parse_reproduce_string(selection.reproduce, request);
    input = op.follow_shrink_path(request, path);
  } else {
    if (!selection.seed || !selection.case_index)
      throw Error(ErrorKind::usage, "replay needs case files, or --seed S with --case-index K, or --reproduce STRING");
    request.case_seed = fuzz::case_seed(*selection.seed, selection.op, dtype, *selection.case_index);
    request.generator_size = fuzz::generator_size(*selection.case_index);
    input = op.generated_input(request);
  }
  if (selection.minimize && selection.reproduce.empty()) {
    fuzz::CaseOutcome outcome = runner.run_cases(op, {request}).front();
    if (outcome.judgement.verdicts.empty()) {
      std::cout << "the case raises no verdict: nothing to minimize\n";
    } else {
      const auto& verdicts = outcome.judgement.verdicts;
      auto chosen = std::find_if(verdicts.begin(), verdicts.end(), [&](const compare::Verdict& v) {
        if (!selection.kind.empty() || !selection.property.empty())
          return (selection.kind.empty() || finding_kind_name(v.kind) == selection.kind) &&
                 (selection.property.empty() || v.property == selection.property);
        return fuzz::finding_fails(v, fuzz::CampaignOptions{});
      });
      if (chosen == verdicts.end() && selection.kind.empty() && selection.property.empty()) chosen = verdicts.begin();
      if (chosen == verdicts.end())
        throw Error(ErrorKind::usage, "the case raises no verdict of kind '" + selection.kind + "' and property '" +
                                          selection.property + "'");
      const compare::Verdict& first = *chosen;
      fuzz::ShrinkLimits limits{std::chrono::steady_clock::now() +
                                    std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                        std::chrono::duration<double>(parse_duration(selection.minimize_budget, "--minimize-budget"))),
                                fuzz::ShrinkLimits{}.max_evaluations, nullptr};
      fuzz::ShrinkResult shrunk = op.shrink(request, first, limits, runner.input_judge(op, request));
      input = shrunk.input;
      fmt::print("minimized [{}] {} from {} to {} boxes in {} steps ({:.2f} s)\n", finding_kind_name(first.kind),
                 first.property, outcome.size, shrunk.size, shrunk.steps, shrunk.seconds);
      if (!selection.corpus_dir.empty()) {
        fuzz::FindingOrigin origin{selection.op, *selection.seed, *selection.case_index, outcome.size};
        std::cout << "case file: "
                  << corpus::store_case(
                         fuzz::case_file_for(origin, request, shrunk, fuzz::environment_json(kernel_config)),
                         selection.corpus_dir)
                  << "\n";
      }
    }
  }
  fuzz::Evaluation evaluation = runner.evaluate(op, input, selection.target, dtype, device);
  fmt::print("{}/{}/{}/{} case: {}\n", selection.op, selection.target, selection.dtype, selection.device, input.dump());
  bool failing = false;
  for (const auto& verdict : evaluation.judgement.verdicts) {
    failing = failing || fuzz::finding_fails(verdict, fuzz::CampaignOptions{});
    fmt::print("  [{}{}] {}: {}\n", finding_kind_name(verdict.kind),
               verdict.outside_contract.empty() ? "" : ", outside the documented contract", verdict.property,
               verdict.message);
  }
  if (evaluation.judgement.verdicts.empty()) std::cout << "  no verdict: the kernel agrees with the oracle\n";
  std::cout << evaluation.side_by_side;
  return failing ? 1 : 0;
}

// `corpus-add FILE...`: validate hand-written (or edited) case files and write them under
// their canonical, content-addressed names, replacing an older text of the same case (an
// edited description or reference). Unlike `run`, no deduplication by signature: the
// person adding a case decides.
struct MergeSettings {
  std::vector<std::string> reports;
  std::string out_dir;
};

int merge_command(const MergeSettings& settings) {
  std::vector<reports::Report> inputs;
  std::vector<std::string> dirs;
  for (const auto& path : settings.reports) {
    inputs.push_back(reports::read_report(path));
    const std::filesystem::path p(path);
    dirs.push_back(std::filesystem::is_directory(p) ? p.string() : p.parent_path().string());
  }
  reports::Report merged = reports::merge_reports(inputs);
  check_report_dir(settings.out_dir);
  const auto missing = reports::gather_corpus(merged, dirs, settings.out_dir + "/corpus");
  reports::print_summary(merged, std::cout);
  const std::string path = reports::write_report_files(merged, settings.out_dir);
  std::cout << "merged " << merged.parts.size() << " part(s) from " << inputs.size() << " report(s): " << path << "\n";
  for (const auto& file : missing)
    std::cerr << "detfuzz: warning: case file " << file << " was not found next to any input report; "
              << "its finding keeps the path\n";
  return merged.has_failing_finding() ? 1 : 0;
}

struct GateSettings {
  std::string baseline, candidate, policy;
  std::vector<std::string> renames;
  bool allow_config_mismatch = false;
};

int gate_command(const GateSettings& settings) {
  reports::GateOptions options;
  if (!settings.policy.empty()) options.policy = reports::read_gate_policy(settings.policy);
  for (const auto& rename : settings.renames) {
    const auto equals = rename.find('=');
    if (equals == std::string::npos || equals == 0 || equals + 1 == rename.size())
      throw Error(ErrorKind::usage, "--rename-target '" + rename + "' is not OLD=NEW (a baseline target = a candidate target)");
    options.rename_target[rename.substr(0, equals)] = rename.substr(equals + 1);
  }
  options.allow_config_mismatch = settings.allow_config_mismatch;
  const reports::Report baseline = reports::read_report(settings.baseline);
  const reports::Report candidate = reports::read_report(settings.candidate);
  const reports::GateResult result = reports::gate(baseline, candidate, options);
  reports::print_gate(result, std::cout);
  return result.pass ? 0 : 1;
}

int corpus_add_command(const std::vector<std::string>& files, const std::string& dir) {
  corpus::ensure_directory(dir);
  for (const std::string& path : files) {
    corpus::CaseFile file = corpus::read_case_file(path);
    const std::string target = dir + "/" + corpus::file_name(file);
    corpus::write_file_atomically(target, corpus::canonical_text(file));
    std::cout << path << " -> " << target << "\n";
  }
  return 0;
}

int eval_command(const EvalSettings& settings, const fuzz::Registry& registry, fuzz::CaseRunner& runner) {
  corpus::CaseFile file = corpus::read_case_file(settings.file);
  const std::string target = settings.target.empty() ? file.target : settings.target;
  const fuzz::OpHarness& op = fuzz::find_op_or_throw(registry, file.op, settings.file);
  const auto targets = op.target_names();
  if (target != fuzz::kOracleTarget && std::find(targets.begin(), targets.end(), target) == targets.end())
    throw Error(ErrorKind::usage, fmt::format("op {} has no target '{}'; use one of {} or oracle", file.op, target,
                                              fmt::join(targets, ", ")));
  const Device device = *parse_device(file.device);  // read_case_file checked it
  if (target != fuzz::kOracleTarget) {
    kernels::Availability availability = op.availability(target, device);
    std::optional<std::string> unsupported =
        availability.available ? op.unsupported_reason(target, *parse_dtype(file.dtype), device) : availability.reason;
    if (unsupported) {
      std::cerr << "detfuzz: skipped: " << file.op << "/" << target << "/" << file.dtype << "/" << file.device
                << " cannot run here: " << *unsupported << "\n";
      return 77;
    }
  }
  fuzz::Evaluation evaluation;
  try {
    evaluation = target == fuzz::kOracleTarget ? op.evaluate(file.input, target, *parse_dtype(file.dtype), device)
                                               : runner.evaluate(op, file.input, target, *parse_dtype(file.dtype), device);
  } catch (const Error& e) {
    throw Error(ErrorKind::input, settings.file + ": input: " + e.what());
  }
  nlohmann::json verdicts = nlohmann::json::array();
  for (const auto& v : evaluation.judgement.verdicts) {
    nlohmann::json verdict = fuzz::verdict_json(v);
    verdict.erase("details");  // eval shows the outputs themselves
    verdicts.push_back(std::move(verdict));
  }
  nlohmann::json result = {{"file", settings.file}, {"op", file.op}, {"target", target}, {"dtype", file.dtype},
                           {"device", file.device}, {"output", evaluation.output}};
  if (target != fuzz::kOracleTarget) result["verdicts"] = verdicts;
  std::cout << result.dump(2) << "\n";
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
  // One value per occurrence, repeatable: a case file after `--bind X` is not a second binding.
  const auto add_repeatable = [&](const std::string& name, std::vector<std::string>& values, const std::string& help) {
    app.add_option(name, values, help)->allow_extra_args(false)->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  };
  add_repeatable("--load", kernel_config.plugin_libraries,
                 "a shared library whose TORCH_LIBRARY ops become bindable (repeatable)");
  add_repeatable("--bind", kernel_config.bindings,
                 "FAMILY=NS::OP or FAMILY=script:FILE.pt[:METHOD]: fuzz that op as a target of op family FAMILY, "
                 "named NS::OP or script:FILE.pt; its schema must match the family's contract (`detfuzz list`) "
                 "(repeatable)");
  app.add_option("--repeat", kernel_config.repeats,
                 "run every kernel call N times and require outputs identical bit for bit (a difference is a "
                 "nondeterministic finding, whatever the oracle says); default: 1, and " +
                     std::to_string(kernels::kDefaultBackwardCudaRepeats) + " for backward ops on cuda")
      ->check(CLI::Range(1, kernels::kMaxRepeats));
  app.add_flag("--deterministic", kernel_config.deterministic,
               "run the kernels under LibTorch's deterministic algorithms (torch.use_deterministic_algorithms): a "
               "kernel without a deterministic implementation makes its cell unsupported, naming it");
  // --torchvision-lib, --load, --bind, --repeat and --deterministic may follow the command:
  // `detfuzz run --load x.so ...`.
  app.fallthrough();

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
  run->add_option("--shard", settings.shard,
                  "run shard i of N (i/N, from 0): the shards of one seed split each cell's case indices and "
                  "together cover N times --cases; default from SLURM_ARRAY_TASK_ID/_COUNT or "
                  "JOB_COMPLETION_INDEX");
  run->add_option("--shard-count", settings.shard_count,
                  "the number of shards when the index comes from JOB_COMPLETION_INDEX (or DETFUZZ_SHARD_COUNT)");
  run->add_option("--jobs,-j", settings.jobs,
                  "lanes running cells side by side, each with its own worker process; a cell's cases and "
                  "findings do not depend on it (default 0: one per CPU core)")
      ->capture_default_str();
  run->add_option("--max-boxes", settings.max_boxes,
                  "cap on boxes per generated set / RoIs per case (batched_nms also draws sets of exactly its "
                  "strategy-switch counts, 999..10,001 boxes, whatever this cap)")
      ->capture_default_str();
  run->add_flag("--hostile", settings.hostile,
                "hostile inputs: NaN, infinities, subnormals, extremes, inverted boxes, bad batch indices, and "
                "inputs outside each op's documented contract (negative box coordinates for torchvision's box "
                "ops); the kernel owes no crash, no hang, a clean error or NaN only where the input put it");
  run->add_flag("--fail-outside-contract", settings.fail_outside_contract,
                "findings on input outside an op's documented contract fail the run too (by default they are "
                "listed apart and only their crashes and hangs fail)");
  run->add_option("--report", settings.report_dir, "directory for report.json")->capture_default_str();
  run->add_option("--fail-on", settings.fail_on,
                  "also fail on these non-default kinds: precision, overflow (or all)")
      ->delimiter(',');
  run->add_option("--minimize-budget", settings.minimize_budget, "time to minimize each new finding")
      ->capture_default_str();
  run->add_option("--corpus", settings.corpus_dir,
                  "directory for the case files of new findings (default: REPORT/corpus)");
  run->add_option("--progress", settings.progress, "auto, live, lines or none")->capture_default_str();
  run->add_flag("--profile", settings.profile,
                "print where each cell's time went (generation, kernel, oracle, comparison, minimization, I/O, "
                "harness overhead) and cases/s; report.json has it always (cells[].profile_s)");
  add_isolation_options(run, settings.isolation);

  SelftestSettings selftest_settings;
  CLI::App* selftest = app.add_subcommand(
      "selftest", "the fuzzer's scorecard: catch each planted mutant (kernels/mutants), count false alarms on "
                  "their correct twins; exit 0 only when every mutant is caught and no twin raises an alarm");
  selftest->add_option("--mutants", selftest_settings.mutants, "mutants to measure (default: the whole catalog)")
      ->delimiter(',');
  selftest->add_option("--budget-per-mutant", selftest_settings.budget_per_mutant,
                       "time to find each mutant; each correct twin runs this long too")
      ->capture_default_str();
  selftest->add_option("--seed", selftest_settings.seed, "campaign seed")->capture_default_str();
  selftest->add_option("--max-boxes", selftest_settings.max_boxes, "cap on boxes per generated set")
      ->capture_default_str();
  selftest->add_option("--minimize-budget", selftest_settings.minimize_budget, "time to minimize each catch")
      ->capture_default_str();
  selftest->add_option("--report", selftest_settings.report_dir,
                       "directory for selftest.json and the minimized cases (corpus/)")
      ->capture_default_str();
  selftest->add_option("--twin-cases", selftest_settings.twin_cases,
                       "the false-alarm measure: run each correct twin's cells for exactly N in-contract cases "
                       "(e.g. 1000000) instead of one mutant's budget; selftest.json gives each twin's rate")
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1} << 40));
  selftest->add_flag("--false-alarms-only", selftest_settings.false_alarms_only,
                     "skip the mutants: only the correct twins (with --twin-cases, the false-alarm measure alone)");
  add_isolation_options(selftest, selftest_settings.isolation);

  CLI::App* worker = app.add_subcommand("worker", "(internal) run cases for a campaign over stdin/stdout");
  worker->group("");  // not in --help: campaigns start it
  int doorbell_fd = -1;
  worker->add_option("--doorbell-fd", doorbell_fd, "descriptor to write a byte to once a message's answers are out");
  int staging_fd = -1;
  worker->add_option("--answer-staging-fd", staging_fd,
                     "descriptor of the shared memory to stage answers in until they are sent");
  int zygote_fd = -1;
  worker->add_option("--zygote-fd", zygote_fd,
                     "be the lane's fork server: fork a worker for each request on this socket (fuzz/zygote.h)");

  ReplaySettings replay_settings;
  CaseSelection& selection = replay_settings.selection;
  CLI::App* replay = app.add_subcommand(
      "replay", "re-run case files against their `expect`, or regenerate a campaign's case from its seed");
  replay->add_option("files", replay_settings.files, "case files (exit 0 when each matches its expect)")
      ->check(CLI::ExistingFile);
  replay->add_option("--report", replay_settings.report_dir,
                     "with case files: also write report.json, junit.xml, summary.md and report.html here (a "
                     "failing finding per case that no longer matches its expect; `gate` compares two of them)");
  replay->add_option("--seed", selection.seed, "the campaign's seed");
  replay->add_option("--case-index", selection.case_index, "the case's index in its cell (0-based)");
  replay->add_option("--reproduce", selection.reproduce,
                     "a case file's origin.reproduce: rebuilds the minimized case without judging");
  replay->add_option("--ops", selection.op, "the op of the case");
  replay->add_option("--targets", selection.target, "the target to run it on");
  replay->add_option("--dtypes", selection.dtype, "its dtype")->capture_default_str();
  replay->add_option("--devices", selection.device, "its device")->capture_default_str();
  replay->add_option("--max-boxes", selection.max_boxes, "the campaign's --max-boxes")->capture_default_str();
  replay->add_flag("--hostile", selection.hostile, "the campaign ran with --hostile");
  replay->add_flag("--minimize", selection.minimize, "minimize the regenerated case (deterministic)");
  replay->add_option("--kind", selection.kind, "with --minimize: the finding kind to keep (default: the first failing)");
  replay->add_option("--property", selection.property, "with --minimize: the property to keep");
  replay->add_option("--corpus", selection.corpus_dir, "with --minimize: store the case file here");
  replay->add_option("--minimize-budget", selection.minimize_budget, "time to minimize")->capture_default_str();
  add_isolation_options(replay, replay_settings.isolation);

  EvalSettings eval_settings;
  CLI::App* eval = app.add_subcommand("eval", "evaluate a case file's input on a target (or the oracle), print JSON");
  eval->add_option("file", eval_settings.file, "a case file")->required()->check(CLI::ExistingFile);
  eval->add_option("--target", eval_settings.target, "a target of the case's op, or `oracle` (default: the file's)");
  add_isolation_options(eval, eval_settings.isolation);

  std::vector<std::string> add_files;
  std::string add_dir = "corpus/cases";
  CLI::App* corpus_add = app.add_subcommand(
      "corpus-add", "validate case files and store them under canonical, content-addressed names");
  corpus_add->add_option("files", add_files, "case files")->required()->check(CLI::ExistingFile);
  corpus_add->add_option("--corpus", add_dir, "the corpus directory")->capture_default_str();

  MergeSettings merge_settings;
  CLI::App* merge = app.add_subcommand(
      "merge", "merge the reports of a campaign's shards: report.json, junit.xml, summary.md, report.html and the "
               "union of their corpora in -o DIR; merging is commutative and idempotent (a shard merged twice "
               "counts once); exit 1 when the merged report has failing findings");
  merge->add_option("reports", merge_settings.reports, "report.json files or the --report DIRs of runs")->required();
  merge->add_option("-o,--out", merge_settings.out_dir, "directory for the merged report")->required();

  GateSettings gate_settings;
  CLI::App* gate = app.add_subcommand(
      "gate", "compare a candidate library's campaign with the baseline's: exit 1 on a new failing finding, a cell "
              "that became unsupported or an error that grew past the policy, 0 otherwise, 2 when the two ran "
              "different campaigns; prints what changed");
  gate->add_option("--baseline", gate_settings.baseline, "the old library's report.json (or its --report DIR)")
      ->required();
  gate->add_option("--candidate", gate_settings.candidate, "the new library's report.json (or its --report DIR)")
      ->required();
  gate->add_option("--policy", gate_settings.policy,
                   "JSON: max_error_growth (default 2), error_floor (0.01), fail_on_new_findings, "
                   "fail_on_unsupported, fail_on_error_growth (true), fail_on_findings_in_new_cells (false: a "
                   "finding where the baseline could not run is printed, not a regression)");
  gate->add_option("--rename-target", gate_settings.renames,
                   "OLD=NEW: compare the baseline's target OLD with the candidate's NEW (repeatable)");
  gate->add_flag("--allow-config-mismatch", gate_settings.allow_config_mismatch,
                 "compare campaigns with different seeds, matrices or budgets anyway");

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
      message = "unknown command '" + app.remaining().front() + "'; the commands are list, run, selftest, replay, eval, corpus-add, merge and gate";
    std::cerr << "detfuzz: error: " << message << "\nRun `detfuzz --help` or `detfuzz "
              << (app.get_subcommands().empty() ? "run" : app.get_subcommands().front()->get_name())
              << " --help` for the options.\n";
    return 2;
  }

  try {
    if (list->parsed()) return list_command(list_json, kernel_config);
    if (run->parsed()) return run_command(settings, kernel_config);
    if (selftest->parsed()) return selftest_command(selftest_settings, kernel_config);
    if (worker->parsed()) {
      kernels::set_single_threaded();
      if (zygote_fd >= 0) return fuzz::serve_zygote(fuzz::default_registry(kernel_config), zygote_fd);
      return fuzz::serve_worker(fuzz::default_registry(kernel_config), doorbell_fd, staging_fd);
    }
    if (corpus_add->parsed()) return corpus_add_command(add_files, add_dir);
    if (merge->parsed()) return merge_command(merge_settings);
    if (gate->parsed()) return gate_command(gate_settings);
    kernels::set_single_threaded();
    fuzz::Registry registry = fuzz::default_registry(kernel_config);
    ScratchDir scratch;
    if (eval->parsed()) {
      auto runner = make_runner(eval_settings.isolation, scratch.path, kernel_config);
      return eval_command(eval_settings, registry, *runner);
    }
    auto runner = make_runner(replay_settings.isolation, scratch.path, kernel_config);
    if (!replay_settings.files.empty()) {
      if (selection.seed || selection.case_index || !selection.reproduce.empty())
        throw Error(ErrorKind::usage, "replay takes case files or --seed/--reproduce, not both");
      return replay_files(replay_settings, registry, *runner);
    }
    return replay_generated(selection, registry, kernel_config, *runner);
  } catch (const Error& e) {
    std::cerr << "detfuzz: error: " << e.what() << "\n";
    return (e.kind() == ErrorKind::usage || e.kind() == ErrorKind::input) ? 2 : 3;
  } catch (const std::exception& e) {
    std::cerr << "detfuzz: internal error: " << e.what() << "\n";
    return 3;
  }
}

}  // namespace detfuzz::cli
