// A campaign over one op's harness, run in this process without progress output: what a
// verdict test uses to say "no false alarm over N generated cases".
#pragma once

#include <memory>
#include <utility>

#include "fuzz/campaign.h"
#include "fuzz/ops/op_harness.h"
#include "fuzz/progress.h"
#include "fuzz/runner.h"

namespace detfuzz::testing {

inline reports::Report in_process_campaign(std::unique_ptr<fuzz::OpHarness> harness, const fuzz::CampaignOptions& options) {
  fuzz::Registry registry;
  registry.ops.push_back(std::move(harness));
  auto progress = fuzz::make_progress(fuzz::ProgressMode::none);
  fuzz::InProcessRunner runner;
  return fuzz::run_campaign(registry, options, *progress, runner);
}

}  // namespace detfuzz::testing
