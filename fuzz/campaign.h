// A campaign: the op x target x dtype x device matrix, each cell fed a deterministic
// stream of cases, findings deduplicated per signature and shrunk, all of it a pure
// function of the options (the same seed and settings give the same cases and findings).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "fuzz/ops/op_harness.h"
#include "fuzz/progress.h"
#include "model/finding_kind.h"
#include "reports/report.h"

namespace detfuzz::fuzz {

struct CampaignOptions {
  std::vector<std::string> ops;      // empty: every op
  std::vector<std::string> targets;  // empty: every target of the selected ops
  std::vector<DType> dtypes{kFloatDTypes.begin(), kFloatDTypes.end()};
  std::vector<Device> devices{Device::cpu};
  std::optional<std::uint64_t> cases_per_cell;
  std::optional<double> budget_s;  // wall time shared fairly by the cells
  std::uint64_t seed = 1;
  // This campaign is shard `shard_index` of `shard_count`: the k-th case of each cell is
  // case index shard_index + k * shard_count, so the shards of one seed split the indices
  // between them and together cover what one campaign with shard_count times the cases would.
  std::uint64_t shard_index = 0, shard_count = 1;
  int max_boxes = 64;
  bool hostile = false;  // add NaN, infinities, inverted boxes, bad batch indices
  std::vector<FindingKind> fail_on;  // kinds that fail beyond the default ones
  // Findings on input outside the op's documented contract (from --hostile) fail too;
  // otherwise only their crashes and hangs do.
  bool fail_outside_contract = false;
  double minimize_budget_s = 10;     // per finding; the evaluation cap keeps results exact
  double slow_minimize_budget_s = 60;  // per crash or hang finding (restarts, timeouts)
  int minimize_max_evaluations = 5000;
  std::string corpus_dir;            // new minimized findings are stored here ("" = nowhere)
  nlohmann::json environment = nlohmann::json::object();  // recorded in each case file
  // Called with the report so far (marked partial) after each new finding and at least
  // every checkpoint_interval_s: a campaign killed at any moment leaves a recent report.
  std::function<void(const reports::Report&)> checkpoint;
  // Ends the campaign at its first failing finding (what `selftest` measures: time and cases
  // to it); findings of non-failing kinds before it are recorded but not minimized.
  bool stop_at_first_failure = false;
  double checkpoint_interval_s = 30;
};

// Asks a running campaign to stop after the case in flight (a signal handler may call it);
// the campaign then returns its report marked partial.
void request_stop();
bool stop_requested();

struct CellPlan {
  const OpHarness* op = nullptr;
  std::string target;
  DType dtype = DType::fp32;
  Device device = Device::cpu;
  std::string label() const;  // "nms/torchvision/fp32/cpu"
};

// Validates the selection against the registry (unknown names: Error{usage} listing the
// known ones) and expands the matrix.
std::vector<CellPlan> plan_cells(const Registry& registry, const CampaignOptions& options);

// The case index of a cell's k-th case in the campaign's shard.
std::uint64_t sharded_case_index(const CampaignOptions& options, std::uint64_t k);

// The seed of case `index` of (op, dtype): independent of target and device, so every
// target of an op sees the same inputs, on CPU and CUDA alike.
std::uint64_t case_seed(std::uint64_t seed, const std::string& op, DType dtype, std::uint64_t index);

// RapidCheck size of case `index`: cycles 0..100 so small cases come first and recur.
int generator_size(std::uint64_t index);

bool finding_fails(FindingKind kind, const std::vector<FindingKind>& fail_on);
// The same for a verdict, whose input may lie outside the op's documented contract.
bool finding_fails(const compare::Verdict& verdict, const CampaignOptions& options);

class CaseRunner;

// Runs the campaign's kernels through `runner` (in this process, or in workers that may
// crash and hang without taking the campaign with them).
reports::Report run_campaign(const Registry& registry, const CampaignOptions& options,
                             ProgressSink& progress, CaseRunner& runner);

// The same with one thread per lane, each running whole cells through its own runner (its
// own worker process): a cell's cases, findings and minimized cases are those of a
// one-lane campaign, and the report lists them in cell order whichever lane ran them.
reports::Report run_campaign(const Registry& registry, const CampaignOptions& options,
                             ProgressSink& progress, const std::vector<CaseRunner*>& lanes);

}  // namespace detfuzz::fuzz
