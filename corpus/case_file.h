// Case files: one self-contained JSON document per minimized finding or regression case,
// the same format for every op (corpus/README.md documents it with an example per op).
// The op-specific part is only `input`, which each op's serializer (case_json.h) owns, so a
// new op plugs in without code here.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "model/finding_kind.h"

namespace detfuzz::corpus {

inline constexpr int kCaseFormatVersion = 1;

// What replaying the case must show: `pass` (no failing verdict: a fixed bug, a guard
// against one) or `fail` with the finding's signature (a known bug, kept to notice when it
// changes), with where it is documented upstream.
struct Expectation {
  bool fail = false;
  FindingKind kind = FindingKind::mismatch;
  std::string property;   // "oracle", "scale_invariance", ...
  std::string reference;  // upstream file/issue, or why the behaviour is expected
  // The finding is on input outside the op's documented contract, and says so
  // ("outside_contract": true): it matches only a verdict labelled that way.
  bool outside_contract = false;
};

struct CaseFile {
  std::string op, target, dtype, device;
  nlohmann::json input;         // the op's problem, exact values (case_json.h)
  Expectation expect;
  std::string description;      // one line for people: what this case shows
  // Provenance, all optional: where the case came from and how to regenerate it.
  nlohmann::json origin = nlohmann::json::object();        // seed, case_seed, size, shrink path
  nlohmann::json environment = nlohmann::json::object();   // torch, torchvision, CUDA, device
  nlohmann::json verdict = nlohmann::json::object();       // kind, property, message, details
  nlohmann::json minimization = nlohmann::json::object();  // original_size, size, steps

  std::string signature() const;  // op/target/dtype/device/kind/property (fail cases)
};

nlohmann::json to_json(const CaseFile& file);
// `where` names the file in errors: "corpus/x.json: expect.kind: expected one of ..., got ...".
CaseFile case_from_json(const nlohmann::json& json, const std::string& where);
// Reads and validates a case file; detfuzz::Error{input} naming the file and the problem
// (missing, unreadable, truncated or malformed JSON, wrong format version, bad fields).
CaseFile read_case_file(const std::string& path);

// Serialization with sorted keys and fixed indentation: equal cases are equal bytes.
std::string canonical_text(const CaseFile& file);
// 16 hex digits of a 64-bit FNV-1a over the identity of the case (op, target, dtype, device,
// input, expectation): the same case found twice gets the same name.
std::string content_hash(const CaseFile& file);
// "<op>-<dtype>-<kind or pass>-<hash>.json"
std::string file_name(const CaseFile& file);

// Size used to pick the smaller of two cases with one signature: minimization.size, then
// the length of the input's text.
std::pair<std::size_t, std::size_t> case_size(const CaseFile& file);

// Stores a case in `dir` (created if needed) under its content-addressed name. For a `fail`
// case, a stored case with the same signature that is no larger is kept and the new one
// dropped; a larger one is replaced. Returns the path of the file that holds the case.
std::string store_case(const CaseFile& file, const std::string& dir);

// Every *.json below `dir`, sorted, so replays and tests have a stable order.
std::vector<std::string> list_case_files(const std::string& dir);

}  // namespace detfuzz::corpus
