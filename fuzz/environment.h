#pragma once

#include <nlohmann/json.hpp>

#include "kernels/target.h"

namespace detfuzz::fuzz {

// What report.json records about where it ran: detfuzz, torch, torchvision, CUDA, CPU,
// compiler, OS. Enough to tell two runs of a gate apart.
nlohmann::json environment_json(const kernels::KernelConfig& config);

}  // namespace detfuzz::fuzz
