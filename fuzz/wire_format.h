// What crosses the boundary between a campaign and its worker processes: JSON-line
// messages (a cell, a command, its cases) and answers (verdicts, judgements), and the short
// line of numbers that a case without verdicts answers with.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "fuzz/compare/verdict.h"
#include "fuzz/ops/op_harness.h"
#include "model/problems.h"

namespace detfuzz::fuzz {

// Verdicts cross the process boundary as JSON (and live in case files so).
nlohmann::json verdict_json(const compare::Verdict& verdict);
compare::Verdict verdict_from_json(const nlohmann::json& json);

// A judgement as the worker answers it, and back.
nlohmann::json judgement_answer(const compare::Judgement& judgement);
compare::Judgement judgement_from_answer(const nlohmann::json& answer);

// A run case's answer line (ending in '\n'). A case without verdicts (nearly every one) is a
// short line of numbers, "p size max_normalized_error magnitude times...", that the campaign
// reads without building a JSON object: parsing JSON answers was two thirds of the campaign's
// own time. Anything else is a JSON object.
std::string run_answer_line(const CaseOutcome& outcome);
// The outcome a short line says (every number as it was, bit for bit); nullopt for a line
// that is not one (a JSON answer), Error for one that starts like one and is broken.
std::optional<CaseOutcome> outcome_from_short_line(std::string_view line);

// The cell a message is about.
nlohmann::json cell_json(const std::string& op, const std::string& target, DType dtype, Device device);

}  // namespace detfuzz::fuzz
