#include "corpus/case_file.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "corpus/atomic_file.h"
#include "model/dtype.h"
#include "model/hash.h"
#include "model/problems.h"
#include "model/error.h"

namespace detfuzz::corpus {
namespace {

namespace fs = std::filesystem;

[[noreturn]] void bad(const std::string& where, const std::string& field, const std::string& problem) {
  throw Error(ErrorKind::input, where + ": " + field + ": " + problem);
}

std::string shown(const nlohmann::json& value) {
  std::string text = value.dump();
  return text.size() > 60 ? text.substr(0, 57) + "..." : text;
}

std::string string_field(const nlohmann::json& json, const std::string& key, const std::string& where,
                         bool required = true) {
  auto it = json.find(key);
  if (it == json.end()) {
    if (required) bad(where, key, "missing (required)");
    return "";
  }
  if (!it->is_string()) bad(where, key, "expected a string, got " + shown(*it));
  return it->get<std::string>();
}

nlohmann::json object_field(const nlohmann::json& json, const std::string& key, const std::string& where) {
  auto it = json.find(key);
  if (it == json.end()) return nlohmann::json::object();
  if (!it->is_object()) bad(where, key, "expected an object, got " + shown(*it));
  return *it;
}

nlohmann::json expectation_json(const Expectation& expect) {
  nlohmann::json json = {{"result", expect.fail ? "fail" : "pass"}};
  if (expect.fail) {
    json["kind"] = std::string(finding_kind_name(expect.kind));
    json["property"] = expect.property;
    if (expect.outside_contract) json["outside_contract"] = true;
  }
  if (!expect.reference.empty()) json["reference"] = expect.reference;
  return json;
}

}  // namespace

std::string CaseFile::signature() const {
  return fmt::format("{}/{}/{}/{}/{}/{}", op, target, dtype, device,
                     expect.fail ? finding_kind_name(expect.kind) : "pass",
                     expect.fail ? expect.property : "");
}

nlohmann::json to_json(const CaseFile& file) {
  return {{"format", "detfuzz-case"},
          {"format_version", kCaseFormatVersion},
          {"op", file.op},
          {"target", file.target},
          {"dtype", file.dtype},
          {"device", file.device},
          {"description", file.description},
          {"input", file.input},
          {"expect", expectation_json(file.expect)},
          {"origin", file.origin},
          {"environment", file.environment},
          {"verdict", file.verdict},
          {"minimization", file.minimization}};
}

CaseFile case_from_json(const nlohmann::json& json, const std::string& where) {
  if (!json.is_object()) bad(where, "(top level)", "expected a JSON object, got " + shown(json));
  if (string_field(json, "format", where) != "detfuzz-case")
    bad(where, "format", "expected \"detfuzz-case\", got " + shown(json["format"]));
  auto version = json.find("format_version");
  if (version == json.end() || !version->is_number_integer())
    bad(where, "format_version", "missing or not an integer");
  if (version->get<int>() != kCaseFormatVersion)
    bad(where, "format_version",
        fmt::format("this detfuzz reads version {}, the file is version {}; use a matching detfuzz",
                    kCaseFormatVersion, version->get<int>()));
  CaseFile file;
  file.op = string_field(json, "op", where);
  file.target = string_field(json, "target", where);
  file.dtype = string_field(json, "dtype", where);
  auto dtype = parse_dtype(file.dtype);
  if (!dtype || !is_floating(*dtype)) bad(where, "dtype", "expected fp16, bf16, fp32 or fp64, got \"" + file.dtype + "\"");
  file.dtype = std::string(dtype_name(*dtype));
  file.device = string_field(json, "device", where);
  if (!parse_device(file.device)) bad(where, "device", "expected cpu or cuda, got \"" + file.device + "\"");
  file.description = string_field(json, "description", where, false);
  auto input = json.find("input");
  if (input == json.end() || !input->is_object()) bad(where, "input", "missing or not an object");
  file.input = *input;

  auto expect = json.find("expect");
  if (expect == json.end() || !expect->is_object())
    bad(where, "expect", "missing; give {\"result\": \"pass\"} or {\"result\": \"fail\", \"kind\": ..., \"property\": ...}");
  const std::string result = string_field(*expect, "result", where + ": expect");
  if (result != "pass" && result != "fail") bad(where, "expect.result", "expected \"pass\" or \"fail\", got \"" + result + "\"");
  file.expect.fail = result == "fail";
  if (file.expect.fail) {
    const std::string kind = string_field(*expect, "kind", where + ": expect");
    auto parsed = parse_finding_kind(kind);
    if (!parsed) bad(where, "expect.kind", "unknown finding kind \"" + kind + "\"");
    file.expect.kind = *parsed;
    file.expect.property = string_field(*expect, "property", where + ": expect");
    if (auto outside = expect->find("outside_contract"); outside != expect->end()) {
      if (!outside->is_boolean()) bad(where, "expect.outside_contract", "expected true or false, got " + shown(*outside));
      file.expect.outside_contract = outside->get<bool>();
    }
  }
  file.expect.reference = string_field(*expect, "reference", where + ": expect", false);
  file.origin = object_field(json, "origin", where);
  file.environment = object_field(json, "environment", where);
  file.verdict = object_field(json, "verdict", where);
  file.minimization = object_field(json, "minimization", where);
  return file;
}

CaseFile read_case_file(const std::string& path) {
  std::ifstream stream(path, std::ios::binary);
  if (!stream) throw Error(ErrorKind::input, path + ": cannot open the case file (does it exist?)");
  std::stringstream buffer;
  buffer << stream.rdbuf();
  const std::string text = buffer.str();
  if (text.find_first_not_of(" \t\r\n") == std::string::npos)
    throw Error(ErrorKind::input, path + ": the case file is empty");
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {  // parse_error, and out_of_range for 1e999
    throw Error(ErrorKind::input, path + ": not valid JSON (truncated or edited by hand?): " +
                                      std::string(e.what()).substr(std::string(e.what()).find(' ') + 1));
  }
  return case_from_json(json, path);
}

namespace {

bool scalar_array(const nlohmann::json& value) {
  if (!value.is_array()) return false;
  for (const auto& item : value)
    if (item.is_structured()) return false;
  return true;
}

// JSON with objects indented and arrays of scalars (a box, a score list) on one line: a
// 2-box case reads in a glance and diffs line by line.
void print(const nlohmann::json& value, int depth, std::string& out) {
  const std::string indent(2 * (depth + 1), ' '), closing(2 * depth, ' ');
  if (value.is_object() && !value.empty()) {
    out += "{\n";
    std::size_t i = 0;
    for (const auto& [key, item] : value.items()) {
      out += indent + nlohmann::json(key).dump() + ": ";
      print(item, depth + 1, out);
      out += ++i < value.size() ? ",\n" : "\n";
    }
    out += closing + "}";
  } else if (value.is_array() && !value.empty() && !scalar_array(value)) {
    out += "[\n";
    for (std::size_t i = 0; i < value.size(); ++i) {
      out += indent;
      print(value[i], depth + 1, out);
      out += i + 1 < value.size() ? ",\n" : "\n";
    }
    out += closing + "]";
  } else if (value.is_array()) {
    out += "[";
    for (std::size_t i = 0; i < value.size(); ++i) out += (i ? ", " : "") + value[i].dump();
    out += "]";
  } else {
    out += value.dump();
  }
}

}  // namespace

std::string canonical_text(const CaseFile& file) {
  std::string text;
  print(to_json(file), 0, text);
  return text + "\n";
}

std::string content_hash(const CaseFile& file) {
  nlohmann::json identity = {{"op", file.op},         {"target", file.target},
                             {"dtype", file.dtype},   {"device", file.device},
                             {"input", file.input},   {"expect", expectation_json(file.expect)}};
  identity["expect"].erase("reference");
  return fmt::format("{:016x}", fnv1a(identity.dump()));
}

std::string file_name(const CaseFile& file) {
  return fmt::format("{}-{}-{}-{}.json", file.op, file.dtype,
                     file.expect.fail ? finding_kind_name(file.expect.kind) : "pass", content_hash(file));
}

std::pair<std::size_t, std::size_t> case_size(const CaseFile& file) {
  std::size_t boxes = file.minimization.value("size", static_cast<std::size_t>(0));
  return {boxes, file.input.dump().size()};
}

std::string store_case(const CaseFile& file, const std::string& dir) {
  ensure_directory(dir);
  const std::string path = (fs::path(dir) / file_name(file)).string();
  // Pass cases guard different bugs of one cell: only failures share an identity.
  for (const std::string& existing_path : file.expect.fail ? list_case_files(dir) : std::vector<std::string>{}) {
    if (existing_path == path) return path;  // the very same case is already stored
    CaseFile existing;
    try {
      existing = read_case_file(existing_path);
    } catch (const Error&) {
      continue;  // someone else's broken file: not ours to judge or delete here
    }
    if (existing.signature() != file.signature()) continue;
    if (case_size(existing) <= case_size(file)) return existing_path;
    write_file_atomically(path, canonical_text(file));
    std::error_code ignored;
    fs::remove(existing_path, ignored);
    return path;
  }
  write_file_atomically(path, canonical_text(file));
  return path;
}

std::vector<std::string> list_case_files(const std::string& dir) {
  std::vector<std::string> files;
  std::error_code error;
  for (auto it = fs::recursive_directory_iterator(dir, error); !error && it != fs::recursive_directory_iterator();
       it.increment(error))
    if (it->is_regular_file() && it->path().extension() == ".json") files.push_back(it->path().string());
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace detfuzz::corpus
