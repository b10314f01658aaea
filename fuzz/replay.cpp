#include "fuzz/replay.h"

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <ostream>

#include "fuzz/wire_format.h"
#include "model/error.h"

namespace detfuzz::fuzz {
namespace {

bool matches(const corpus::Expectation& expect, const compare::Judgement& judgement) {
  for (const auto& verdict : judgement.verdicts) {
    // Outside the documented contract only a crash or a hang would fail a run (campaign.cpp).
    const bool inside = verdict.outside_contract.empty();
    if (!expect.fail && inside && fails_by_default(verdict.kind)) return false;
    if (expect.fail && verdict.kind == expect.kind && verdict.property == expect.property &&
        expect.outside_contract == !inside)
      return true;
  }
  return !expect.fail;
}

std::string expectation_text(const corpus::Expectation& expect) {
  if (!expect.fail) return "pass";
  return fmt::format("fail [{}] {}{}", finding_kind_name(expect.kind), expect.property,
                     expect.outside_contract ? " (outside the documented contract)" : "");
}

}  // namespace

const OpHarness& find_op_or_throw(const Registry& registry, const std::string& name,
                                  const std::string& where) {
  if (const OpHarness* op = registry.find(name)) return *op;
  std::vector<std::string> known;
  for (const auto& op : registry.ops) known.push_back(op->name());
  throw Error(ErrorKind::input, fmt::format("{}: unknown op '{}'; this detfuzz knows {}", where, name,
                                            fmt::join(known, ", ")));
}

ReplayStatus replay_case(const Registry& registry, const corpus::CaseFile& file,
                         const std::string& path, std::ostream& out, CaseRunner& runner,
                         compare::Judgement* judged) {
  const OpHarness& op = find_op_or_throw(registry, file.op, path);
  const auto targets = op.target_names();
  if (std::find(targets.begin(), targets.end(), file.target) == targets.end())
    throw Error(ErrorKind::input, fmt::format("{}: op {} has no target '{}' here (targets: {}); a plugin op or "
                                              "TorchScript target needs its --load LIB and --bind {}=... again",
                                              path, file.op, file.target, fmt::join(targets, ", "), file.op));
  const DType dtype = *parse_dtype(file.dtype);
  const Device device = *parse_device(file.device);  // read_case_file checked it
  const std::string cell = fmt::format("{}/{}/{}/{}", file.op, file.target, file.dtype, file.device);

  kernels::Availability availability = op.availability(file.target, device);
  std::optional<std::string> unsupported =
      availability.available ? runner.unsupported_reason(op, file.target, dtype, device) : availability.reason;
  if (unsupported) {
    fmt::print(out, "SKIP {}  {}: {}\n", path, cell, *unsupported);
    return ReplayStatus::skipped;
  }

  Evaluation evaluation;
  try {
    evaluation = runner.evaluate(op, file.input, file.target, dtype, device);
  } catch (const Error& e) {
    throw Error(ErrorKind::input, path + ": input: " + e.what());
  }
  const bool ok = matches(file.expect, evaluation.judgement);
  if (judged) *judged = evaluation.judgement;
  fmt::print(out, "{} {}  {}  expect {}, got {}\n", ok ? "PASS" : "FAIL", path, cell,
             expectation_text(file.expect),
             evaluation.judgement.verdicts.empty() ? "no verdict" : "the verdicts below");
  const bool described_by_a_verdict =
      std::any_of(evaluation.judgement.verdicts.begin(), evaluation.judgement.verdicts.end(),
                  [&](const compare::Verdict& v) { return v.message == file.description; });
  if (!file.description.empty() && !described_by_a_verdict) fmt::print(out, "  {}\n", file.description);
  if (!file.expect.reference.empty()) fmt::print(out, "  reference: {}\n", file.expect.reference);
  for (const auto& verdict : evaluation.judgement.verdicts)
    fmt::print(out, "  [{}] {}: {}\n", finding_kind_name(verdict.kind), verdict.property, verdict.message);
  if (!evaluation.side_by_side.empty()) fmt::print(out, "{}", evaluation.side_by_side);
  return ok ? ReplayStatus::matched : ReplayStatus::mismatched;
}

std::string reproduce_string(const CaseRequest& request, const ShrinkPath& path) {
  return fmt::format("{}/{}/{}/{}", request.case_seed, request.generator_size,
                     fmt::join(path.rapidcheck, "."), fmt::join(path.domain, "."));
}

ShrinkPath parse_reproduce_string(const std::string& text, CaseRequest& request) {
  auto fail = [&]() -> ShrinkPath {
    throw Error(ErrorKind::usage, "--reproduce '" + text +
                                      "' is not <case seed>/<size>/<path>/<path> (copy it from a case "
                                      "file's origin.reproduce)");
  };
  std::vector<std::string> parts;
  std::size_t begin = 0;
  for (std::size_t slash; (slash = text.find('/', begin)) != std::string::npos; begin = slash + 1)
    parts.push_back(text.substr(begin, slash - begin));
  parts.push_back(text.substr(begin));
  if (parts.size() != 4) return fail();
  auto indices = [&](const std::string& list) {
    std::vector<int> values;
    std::size_t start = 0;
    while (start < list.size()) {
      std::size_t dot = list.find('.', start);
      std::string item = list.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
      if (item.empty() || item.find_first_not_of("0123456789") != std::string::npos) fail();
      values.push_back(std::stoi(item));
      if (dot == std::string::npos) break;
      start = dot + 1;
    }
    return values;
  };
  try {
    if (parts[0].empty() || parts[0].find_first_not_of("0123456789") != std::string::npos) return fail();
    request.case_seed = std::stoull(parts[0]);
    request.generator_size = std::stoi(parts[1]);
  } catch (const std::exception&) {
    return fail();
  }
  return {indices(parts[2]), indices(parts[3])};
}

std::string replay_command(const std::string& op, const std::string& target, DType dtype,
                           Device device, std::uint64_t seed, std::uint64_t index, int max_boxes, bool hostile) {
  return fmt::format(
      "detfuzz replay --seed {} --ops {} --targets {} --dtypes {} --devices {} --case-index {} --max-boxes {}{}",
      seed, op, target, dtype_name(dtype), device_name(device), index, max_boxes, hostile ? " --hostile" : "");
}

std::string minimize_command(const std::string& op, const std::string& target, DType dtype, Device device,
                             std::uint64_t seed, std::uint64_t index, int max_boxes, bool hostile,
                             const compare::Verdict& verdict) {
  return replay_command(op, target, dtype, device, seed, index, max_boxes, hostile) +
         fmt::format(" --minimize --kind {} --property {} --corpus DIR", finding_kind_name(verdict.kind),
                     verdict.property);
}

corpus::CaseFile case_file_for(const FindingOrigin& origin, const CaseRequest& request,
                               const ShrinkResult& shrunk, const nlohmann::json& environment) {
  const compare::Verdict& verdict = shrunk.verdict;
  corpus::CaseFile file;
  file.op = origin.op;
  file.target = request.target;
  file.dtype = std::string(dtype_name(request.dtype));
  file.device = device_name(request.device);
  file.input = shrunk.input;
  file.expect.fail = true;
  file.expect.kind = verdict.kind;
  file.expect.property = verdict.property;
  file.expect.outside_contract = !verdict.outside_contract.empty();
  file.description = verdict.message;
  file.origin = {
      {"seed", origin.seed},
      {"case_index", origin.case_index},
      {"case_seed", std::to_string(request.case_seed)},
      {"generator_size", request.generator_size},
      {"max_boxes", request.max_boxes},
      {"hostile", request.hostile},
      {"shrink_path", {{"rapidcheck", shrunk.path.rapidcheck}, {"domain", shrunk.path.domain}}},
      {"reproduce", reproduce_string(request, shrunk.path)},
      {"replay", minimize_command(origin.op, request.target, request.dtype, request.device, origin.seed,
                                  origin.case_index, request.max_boxes, request.hostile, verdict)}};
  file.environment = environment;
  file.verdict = verdict_json(verdict);
  file.minimization = {{"original_size", origin.original_size},
                       {"size", shrunk.size},
                       {"steps", shrunk.steps},
                       {"complete", shrunk.complete},
                       {"reproducible", shrunk.reproducible}};
  return file;
}

}  // namespace detfuzz::fuzz
