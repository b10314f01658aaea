#include "fuzz/campaign.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "corpus/case_file.h"
#include "fuzz/replay.h"
#include "fuzz/runner.h"
#include "model/error.h"
#include "model/hash.h"

namespace detfuzz::fuzz {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// A cell's time slice: short enough that a slow cell cannot starve the others, long
// enough that bookkeeping stays negligible.
constexpr double kSliceSeconds = 0.1;
// Cases per batch: a batch should take about kBatchSeconds, enough to amortize what a
// worker's round trip costs per batch (the worker idles while the campaign takes in one
// batch and writes the next), little enough that a budget is kept to within a slice.
constexpr double kBatchSeconds = 0.01;
constexpr std::size_t kFirstBatch = 32, kMinBatch = 4, kMaxBatch = 512;

struct CellState {
  CellPlan plan;
  reports::CellSummary summary;
  std::vector<reports::FindingRecord> findings;  // in the order the cell met them
  std::map<std::string, std::size_t> finding_by_signature;  // index into `findings`
  std::vector<double> case_errors;  // each case's largest normalized error
  std::vector<std::array<double, 2>> error_vs_magnitude;
  double elapsed_s = 0;
  std::map<std::string, double> profile_s;  // measured phases; `other` is derived
  bool done = false;
  bool busy = false;  // a lane is running it
};

std::size_t batch_size(const CellState& cell) {
  if (cell.summary.cases == 0 || cell.elapsed_s <= 0) return kFirstBatch;
  const double per_case_s = cell.elapsed_s / static_cast<double>(cell.summary.cases);
  return static_cast<std::size_t>(
      std::clamp(kBatchSeconds / per_case_s, static_cast<double>(kMinBatch), static_cast<double>(kMaxBatch)));
}

nlohmann::json config_json(const CampaignOptions& options, const std::vector<CellPlan>& cells) {
  std::vector<std::string> dtypes, devices, fail_on, ops, targets;
  for (DType d : options.dtypes) dtypes.emplace_back(dtype_name(d));
  for (Device d : options.devices) devices.push_back(device_name(d));
  for (FindingKind k : options.fail_on) fail_on.emplace_back(finding_kind_name(k));
  for (const auto& cell : cells) {
    if (std::find(ops.begin(), ops.end(), cell.op->name()) == ops.end()) ops.push_back(cell.op->name());
    if (std::find(targets.begin(), targets.end(), cell.target) == targets.end())
      targets.push_back(cell.target);
  }
  nlohmann::json config = {{"ops", ops},
                           {"targets", targets},
                           {"dtypes", dtypes},
                           {"devices", devices},
                           {"seed", options.seed},
                           {"shard", {{"index", options.shard_index}, {"count", options.shard_count}}},
                           {"max_boxes", options.max_boxes},
                           {"hostile", options.hostile},
                           {"fail_on_extra", fail_on},
                           {"fail_outside_contract", options.fail_outside_contract},
                           {"minimize_budget_s", options.minimize_budget_s},
                           {"corpus", options.corpus_dir}};
  config["cases_per_cell"] =
      options.cases_per_cell ? nlohmann::json(*options.cases_per_cell) : nlohmann::json(nullptr);
  config["budget_s"] = options.budget_s ? nlohmann::json(*options.budget_s) : nlohmann::json(nullptr);
  return config;
}

std::map<std::string, double> percentiles(std::vector<double> values) {
  if (values.empty()) return {};
  std::sort(values.begin(), values.end());
  auto at = [&](double q) {
    return values[std::min(values.size() - 1, static_cast<std::size_t>(q * static_cast<double>(values.size())))];
  };
  return {{"p50", at(0.5)}, {"p90", at(0.9)}, {"p99", at(0.99)}, {"p99.9", at(0.999)}, {"max", values.back()}};
}

std::atomic<bool> g_stop{false};

// The report as it stands: cells summarized, findings so far in cell order (whichever
// lane ran them, and whenever).
reports::Report assemble(const std::vector<CellState>& cells, const reports::Report& header,
                         Clock::time_point start) {
  reports::Report report = header;
  report.cells.clear();
  report.findings.clear();
  for (const auto& cell : cells) {
    reports::CellSummary summary = cell.summary;
    summary.elapsed_s = cell.elapsed_s;
    summary.profile_s = cell.profile_s;
    double measured = 0;
    for (const auto& [phase, seconds] : cell.profile_s) measured += seconds;
    if (cell.elapsed_s > 0) summary.profile_s["other"] = std::max(0.0, cell.elapsed_s - measured);
    summary.normalized_error_percentiles = percentiles(cell.case_errors);
    summary.error_histogram = reports::error_histogram(cell.case_errors);
    summary.error_vs_magnitude = cell.error_vs_magnitude;
    if (summary.status != reports::CellStatus::unsupported) {
      bool failed = false;
      for (const auto& finding : cell.findings) failed = failed || finding.fails;
      summary.status = failed ? reports::CellStatus::failed : reports::CellStatus::ok;
    }
    report.cells.push_back(summary);
    report.findings.insert(report.findings.end(), cell.findings.begin(), cell.findings.end());
  }
  report.elapsed_s = seconds_since(start);
  return report;
}

}  // namespace

void request_stop() { g_stop.store(true); }
bool stop_requested() { return g_stop.load(); }

std::string CellPlan::label() const {
  return fmt::format("{}/{}/{}/{}", op->name(), target, dtype_name(dtype), device_name(device));
}

std::vector<CellPlan> plan_cells(const Registry& registry, const CampaignOptions& options) {
  if (options.shard_count == 0 || options.shard_index >= options.shard_count)
    throw Error(ErrorKind::usage, fmt::format("shard {}/{} does not exist; shards are numbered 0..N-1 (--shard i/N)",
                                              options.shard_index, options.shard_count));
  std::vector<std::string> known_ops;
  for (const auto& op : registry.ops) known_ops.push_back(op->name());
  std::vector<const OpHarness*> ops;
  if (options.ops.empty()) {
    for (const auto& op : registry.ops) ops.push_back(op.get());
  } else {
    for (const auto& name : options.ops) {
      const OpHarness* op = registry.find(name);
      if (!op)
        throw Error(ErrorKind::usage, fmt::format("unknown op '{}' in --ops; known ops: {}", name,
                                                  fmt::join(known_ops, ", ")));
      ops.push_back(op);
    }
  }
  std::set<std::string> offered;
  for (const OpHarness* op : ops)
    for (const auto& target : op->target_names()) offered.insert(target);
  for (const auto& target : options.targets)
    if (!offered.count(target))
      throw Error(ErrorKind::usage,
                  fmt::format("unknown target '{}' in --targets; the selected ops offer: {} "
                              "(see `detfuzz list`)",
                              target, fmt::join(offered, ", ")));
  if (options.dtypes.empty()) throw Error(ErrorKind::usage, "--dtypes is empty; give at least one of fp16, bf16, fp32, fp64");
  if (options.devices.empty()) throw Error(ErrorKind::usage, "--devices is empty; give cpu and/or cuda");

  std::vector<CellPlan> cells;
  for (const OpHarness* op : ops)
    for (const auto& target : op->target_names()) {
      const bool named = std::find(options.targets.begin(), options.targets.end(), target) != options.targets.end();
      // Mutants and twins measure the fuzzer; they are fuzzed only when asked for by name.
      if (options.targets.empty() ? kernels::is_planted(target) : !named) continue;
      for (DType dtype : options.dtypes)
        for (Device device : options.devices) cells.push_back({op, target, dtype, device});
    }
  if (cells.empty())
    throw Error(ErrorKind::usage,
                "no op offers the selected targets; see `detfuzz list` for which op has which target");
  return cells;
}

std::uint64_t sharded_case_index(const CampaignOptions& options, std::uint64_t k) {
  return options.shard_index + k * options.shard_count;
}

std::uint64_t case_seed(std::uint64_t seed, const std::string& op, DType dtype, std::uint64_t index) {
  return splitmix64(splitmix64(seed ^ fnv1a(op + "/" + std::string(dtype_name(dtype)))) + index);
}

int generator_size(std::uint64_t index) { return static_cast<int>(index % 101); }

bool finding_fails(FindingKind kind, const std::vector<FindingKind>& fail_on) {
  return fails_by_default(kind) || std::find(fail_on.begin(), fail_on.end(), kind) != fail_on.end();
}

bool finding_fails(const compare::Verdict& verdict, const CampaignOptions& options) {
  // A crash or a hang owes nothing to the input's domain: a documented contract allows an
  // error, never a dead process.
  const bool dies = verdict.kind == FindingKind::crash || verdict.kind == FindingKind::hang;
  if (!verdict.outside_contract.empty() && !dies && !options.fail_outside_contract) return false;
  return finding_fails(verdict.kind, options.fail_on);
}

reports::Report run_campaign(const Registry& registry, const CampaignOptions& options,
                             ProgressSink& progress, CaseRunner& runner) {
  return run_campaign(registry, options, progress, std::vector<CaseRunner*>{&runner});
}

namespace {

// A campaign's scheduler. Its stages, in the order a case meets them:
//   probe_cells      each planned cell is runnable, or unsupported with the library's reason
//   take_cell        a lane takes the cell that has had the least time and that no lane holds
//   run_slice        the cell's cases for one time slice, in batches sent ahead (pipelined)
//   tally            each case's counts, times and errors into its cell
//   record_finding   a new signature minimized, stored as a case file, reported
// Lanes share the cells, the progress line and the checkpoints under `shared_`; a cell is
// run by one lane at a time (`busy`), so its own state is the lane's while it holds it.
class CampaignScheduler {
 public:
  CampaignScheduler(const Registry& registry, const CampaignOptions& options, ProgressSink& progress,
                    const std::vector<CaseRunner*>& lanes)
      : options_(options), progress_(progress), lanes_(lanes), plans_(plan_cells(registry, options)) {
    header_.config = config_json(options, plans_);
    header_.config["jobs"] = lanes.size();  // how it ran, not what it covers
  }

  reports::Report run() {
    probe_cells();
    std::vector<std::thread> threads;
    for (std::size_t lane = 1; lane < lanes_.size(); ++lane) threads.emplace_back([this, lane] { guarded_lane(*lanes_[lane]); });
    guarded_lane(*lanes_.front());
    for (auto& thread : threads) thread.join();
    if (failure_) std::rethrow_exception(failure_);
    progress_.finish();
    reports::Report report = assemble(cells_, header_, start_);
    report.partial = stop_requested();
    return report;
  }

 private:
  void probe_cells() {
    for (const auto& plan : plans_) {
      CellState cell;
      cell.plan = plan;
      cell.summary.op = plan.op->name();
      cell.summary.target = plan.target;
      cell.summary.dtype = std::string(dtype_name(plan.dtype));
      cell.summary.device = device_name(plan.device);
      kernels::Availability availability = plan.op->availability(plan.target, plan.device);
      std::optional<std::string> unsupported;
      if (!availability.available) unsupported = availability.reason;
      else unsupported = lanes_.front()->unsupported_reason(*plan.op, plan.target, plan.dtype, plan.device);
      if (unsupported) {
        cell.summary.status = reports::CellStatus::unsupported;
        cell.summary.reason = *unsupported;
        cell.done = true;
        progress_.event(fmt::format("{}: unsupported ({})", plan.label(), *unsupported));
      }
      cells_.push_back(std::move(cell));
    }
    snapshot_.cells_total = cells_.size();
    snapshot_.cells_done = std::count_if(cells_.begin(), cells_.end(), [](const CellState& c) { return c.done; });
    snapshot_.budget_s = options_.budget_s;
    if (options_.cases_per_cell) {
      std::uint64_t runnable = std::count_if(cells_.begin(), cells_.end(), [](const CellState& c) { return !c.done; });
      snapshot_.planned_cases = runnable * *options_.cases_per_cell;
    }
    last_checkpoint_ = Clock::now();
  }

  bool budget_left() const {
    return !stop_requested() && !first_failure_found_ && !lane_failed_ &&
           (!options_.budget_s || seconds_since(start_) < *options_.budget_s);
  }

  void checkpoint_now() {  // with `shared_` held
    last_checkpoint_ = Clock::now();
    if (!options_.checkpoint) return;
    reports::Report partial = assemble(cells_, header_, start_);
    partial.partial = true;
    options_.checkpoint(partial);
  }

  // The cell that has had the least time and that no lane holds; nullptr when every cell
  // is done (or the campaign is over), after waiting for held ones to come back.
  CellState* take_cell() {
    std::unique_lock<std::mutex> lock(shared_);
    for (;;) {
      if (!budget_left()) return nullptr;
      CellState* cell = nullptr;
      bool any_busy = false;
      for (auto& candidate : cells_) {
        any_busy = any_busy || candidate.busy;
        if (!candidate.done && !candidate.busy && (!cell || candidate.elapsed_s < cell->elapsed_s)) cell = &candidate;
      }
      if (cell) {
        cell->busy = true;
        return cell;
      }
      if (!any_busy) return nullptr;
      cell_released_.wait_for(lock, std::chrono::milliseconds(100));
    }
  }

  // One case's counts, times and errors into its cell; the cell's ordinal of the case. With
  // `shared_` held.
  std::uint64_t tally(CellState& cell, const CaseOutcome& outcome) {
    const std::uint64_t ordinal = cell.summary.cases;  // the cell's ordinal-th case in this shard
    ++cell.summary.cases;
    cell.profile_s["generation"] += outcome.times.generation_s;
    cell.profile_s["kernel"] += outcome.times.kernel_s;
    cell.profile_s["oracle"] += outcome.times.oracle_s;
    cell.profile_s["comparison"] += outcome.times.comparison_s();
    ++snapshot_.cases;
    cell.summary.max_normalized_error =
        std::max(cell.summary.max_normalized_error, outcome.judgement.max_normalized_error);
    if (outcome.judgement.max_normalized_error >= 0) {
      cell.case_errors.push_back(outcome.judgement.max_normalized_error);
      if (outcome.input_magnitude >= 0 && cell.error_vs_magnitude.size() < reports::kMaxMagnitudePoints)
        cell.error_vs_magnitude.push_back({outcome.input_magnitude, outcome.judgement.max_normalized_error});
    }
    return ordinal;
  }

  // One case's results into its cell (whose lane calls this): tallied, each verdict an
  // occurrence of a known finding or a new one.
  void process_outcome(CellState& cell, const CaseRequest& request, const CaseOutcome& outcome, CaseRunner& runner,
                       Clock::time_point slice_start) {
    std::unique_lock<std::mutex> lock(shared_);
    const std::uint64_t ordinal = tally(cell, outcome);
    for (const auto& verdict : outcome.judgement.verdicts) {
      const std::string kind(finding_kind_name(verdict.kind));
      ++cell.summary.occurrences_by_kind[kind];
      const std::string signature = fmt::format("{}/{}/{}{}", cell.plan.label(), kind, verdict.property,
                                                verdict.outside_contract.empty() ? "" : "/outside_contract");
      auto known = cell.finding_by_signature.find(signature);
      if (known != cell.finding_by_signature.end()) {
        ++cell.findings[known->second].occurrences;
        continue;
      }
      record_finding(lock, cell, request, outcome, verdict, signature, ordinal,
                     cell.elapsed_s + seconds_since(slice_start), runner);
    }
  }

  // A new signature: minimized without holding `shared_` (`lock`), so the other lanes go on
  // meanwhile; then stored as a case file and reported.
  void record_finding(std::unique_lock<std::mutex>& lock, CellState& cell, const CaseRequest& request,
                      const CaseOutcome& outcome, const compare::Verdict& verdict, const std::string& signature,
                      std::uint64_t ordinal, double found_after_s, CaseRunner& runner) {
    const CellPlan& plan = cell.plan;
    const std::string kind(finding_kind_name(verdict.kind));
    const std::uint64_t index = sharded_case_index(options_, ordinal);
    const bool slow = verdict.kind == FindingKind::crash || verdict.kind == FindingKind::hang;
    double shrink_seconds = slow ? options_.slow_minimize_budget_s : options_.minimize_budget_s;
    if (options_.stop_at_first_failure && !finding_fails(verdict, options_)) shrink_seconds = 0;
    // A selftest's budget is for finding; its one finding is minimized in full.
    if (options_.budget_s && !options_.stop_at_first_failure)
      shrink_seconds = std::min(shrink_seconds, std::max(0.5, *options_.budget_s - seconds_since(start_)));
    lock.unlock();
    ShrinkLimits limits{Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(shrink_seconds)),
                        options_.minimize_max_evaluations,
                        [&](int steps, std::size_t size) {
                          std::lock_guard<std::mutex> hold(shared_);
                          snapshot_.current_cell = fmt::format("minimizing {} {}: step {}, {} boxes",
                                                               plan.label(), kind, steps, size);
                          snapshot_.elapsed_s = seconds_since(start_);
                          progress_.tick(snapshot_);
                        }};
    const auto shrink_start = Clock::now();
    ShrinkResult shrunk = plan.op->shrink(request, verdict, limits, runner.input_judge(*plan.op, request));
    const double shrink_s = seconds_since(shrink_start);

    reports::FindingRecord finding;
    finding.op = plan.op->name();
    finding.target = plan.target;
    finding.dtype = cell.summary.dtype;
    finding.device = cell.summary.device;
    finding.kind = kind;
    finding.property = verdict.property;
    finding.signature = signature;
    finding.message = shrunk.verdict.message;
    if (!shrunk.reproducible)
      finding.message += " (did not fail again when re-run: the kernel may be nondeterministic)";
    finding.reproducible = shrunk.reproducible;
    finding.fails = finding_fails(verdict, options_);
    finding.outside_contract = verdict.outside_contract;
    finding.seed = options_.seed;
    finding.case_seed = request.case_seed;
    finding.case_index = index;
    finding.generator_size = request.generator_size;
    finding.found_after_cases = ordinal + 1;
    finding.found_after_s = found_after_s;
    finding.size = shrunk.size;
    finding.original_size = outcome.size;
    finding.shrink_steps = shrunk.steps;
    finding.shrink_complete = shrunk.complete;
    finding.input = shrunk.input;
    finding.details = shrunk.verdict.details;
    finding.minimize_s = shrunk.seconds;
    finding.replay = replay_command(plan.op->name(), plan.target, plan.dtype, plan.device, options_.seed, index,
                                    options_.max_boxes, options_.hostile);
    const auto io_start = Clock::now();
    if (!options_.corpus_dir.empty()) {
      FindingOrigin origin{plan.op->name(), options_.seed, index, outcome.size};
      finding.case_file =
          corpus::store_case(case_file_for(origin, request, shrunk, options_.environment), options_.corpus_dir);
    }
    const bool fails = finding.fails;
    lock.lock();
    cell.profile_s["minimization"] += shrink_s;
    snapshot_.current_cell = plan.label();
    cell.finding_by_signature[signature] = cell.findings.size();
    cell.findings.push_back(std::move(finding));
    ++cell.summary.findings;
    ++snapshot_.findings;
    progress_.event(fmt::format("{} [{}] {}: {}", plan.label(), kind, verdict.property, shrunk.verdict.message));
    checkpoint_now();
    cell.profile_s["io"] += seconds_since(io_start);
    if (options_.stop_at_first_failure && fails) first_failure_found_ = true;
  }

  // The cell's cases from its `first`-th on, a batch of them. Empty when the cell has had
  // all its cases.
  std::vector<CaseRequest> batch_from(const CellState& cell, std::uint64_t first) const {
    const CellPlan& plan = cell.plan;
    std::vector<CaseRequest> requests;
    const std::size_t batch = batch_size(cell);
    for (std::uint64_t ordinal = first; requests.size() < batch; ++ordinal) {
      if (options_.cases_per_cell && ordinal >= *options_.cases_per_cell) break;
      const std::uint64_t index = sharded_case_index(options_, ordinal);
      requests.push_back({plan.target, plan.dtype, plan.device,
                          case_seed(options_.seed, plan.op->name(), plan.dtype, index), generator_size(index),
                          options_.max_boxes, options_.hostile});
    }
    return requests;
  }

  // One time slice of a cell. Batches go to the runner ahead of their turn, one beyond the
  // batch being taken in (CaseRunner::prefetch): the worker computes while the campaign
  // receives, bookkeeps and minimizes. Only while the slice has time left; every batch sent
  // is taken in.
  void run_slice(CaseRunner& runner, CellState& cell) {
    const CellPlan& plan = cell.plan;
    const auto slice_start = Clock::now();
    {
      std::lock_guard<std::mutex> lock(shared_);
      snapshot_.current_cell = plan.label();
    }
    bool exhausted = false;  // every case of the cell has been sent
    auto send_ahead = [&](std::uint64_t first) {
      std::vector<CaseRequest> requests;
      if (seconds_since(slice_start) >= kSliceSeconds || !budget_left()) return requests;
      requests = batch_from(cell, first);
      exhausted = requests.empty();
      runner.prefetch(*plan.op, requests);
      return requests;
    };
    std::vector<CaseRequest> requests = send_ahead(cell.summary.cases);
    while (!requests.empty()) {
      std::vector<CaseRequest> next = send_ahead(cell.summary.cases + requests.size());
      std::vector<CaseOutcome> outcomes = runner.run_cases(*plan.op, requests);
      for (std::size_t b = 0; b < outcomes.size(); ++b) {
        process_outcome(cell, requests[b], outcomes[b], runner, slice_start);
        if (first_failure_found_) break;
      }
      {
        std::lock_guard<std::mutex> lock(shared_);
        snapshot_.elapsed_s = seconds_since(start_);
        progress_.tick(snapshot_);
      }
      if (outcomes.size() < requests.size()) {  // interrupted: these cases have not all run
        exhausted = false;
        break;
      }
      if (first_failure_found_) break;
      requests = std::move(next);
    }
    if (exhausted) cell.done = true;  // every case of the cell has run
    std::lock_guard<std::mutex> lock(shared_);
    cell.elapsed_s += seconds_since(slice_start);
    cell.busy = false;
    if (cell.done) ++snapshot_.cells_done;
    if (seconds_since(last_checkpoint_) > options_.checkpoint_interval_s) checkpoint_now();
    cell_released_.notify_all();
  }

  void guarded_lane(CaseRunner& runner) {
    try {
      while (CellState* cell = take_cell()) run_slice(runner, *cell);
    } catch (...) {
      std::lock_guard<std::mutex> lock(shared_);
      if (!failure_) failure_ = std::current_exception();
      lane_failed_ = true;
      cell_released_.notify_all();
    }
  }

  const CampaignOptions& options_;
  ProgressSink& progress_;
  const std::vector<CaseRunner*>& lanes_;
  const std::vector<CellPlan> plans_;
  const Clock::time_point start_ = Clock::now();
  reports::Report header_;  // config; cells and findings come from cells_
  std::vector<CellState> cells_;
  std::mutex shared_;
  std::condition_variable cell_released_;
  ProgressSnapshot snapshot_;
  std::atomic<bool> first_failure_found_{false}, lane_failed_{false};
  Clock::time_point last_checkpoint_ = Clock::now();
  std::exception_ptr failure_;
};

}  // namespace

reports::Report run_campaign(const Registry& registry, const CampaignOptions& options,
                             ProgressSink& progress, const std::vector<CaseRunner*>& lanes) {
  if (lanes.empty()) throw Error(ErrorKind::internal, "run_campaign: no lane to run cases on");
  for (CaseRunner* lane : lanes) lane->warm_up();
  return CampaignScheduler(registry, options, progress, lanes).run();
}

}  // namespace detfuzz::fuzz
