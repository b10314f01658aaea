// The worker's side (`detfuzz worker`): requests on stdin, answers staged and sent in
// chunks, the doorbell rung once a message's answers are out.
#include "fuzz/runner.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <iostream>
#include <string>
#include <string_view>

#include "fuzz/answer_staging.h"
#include "fuzz/profile.h"
#include "fuzz/wire_format.h"

namespace detfuzz::fuzz {

namespace {

// The cell a message names: its op (nullptr when unknown) and a request for its cases.
struct MessageCell {
  const OpHarness* op = nullptr;
  CaseRequest request;
};

MessageCell message_cell(const Registry& registry, const nlohmann::json& message) {
  MessageCell cell{registry.find(message.at("op").get<std::string>()), {}};
  CaseRequest& r = cell.request;
  r.target = message.at("target").get<std::string>();
  r.dtype = parse_dtype(message.at("dtype").get<std::string>()).value_or(DType::fp32);
  r.device = parse_device(message.at("device").get<std::string>()).value_or(Device::cpu);
  r.max_boxes = message.value("max_boxes", r.max_boxes);
  r.hostile = message.value("hostile", false);
  return cell;
}

std::string unknown_op(const nlohmann::json& message) {
  return "unknown op " + message.at("op").get<std::string>();
}

nlohmann::json answer(const Registry& registry, const nlohmann::json& request) {
  const std::string cmd = request.at("cmd");
  if (cmd == "ping") return {{"ready", true}};
  const MessageCell cell = message_cell(registry, request);
  if (!cell.op) return {{"error", unknown_op(request)}};
  const CaseRequest& r = cell.request;
  if (cmd == "probe") {
    auto reason = cell.op->unsupported_reason(r.target, r.dtype, r.device);
    return {{"unsupported", reason ? nlohmann::json(*reason) : nlohmann::json(nullptr)}};
  }
  if (cmd == "judge") return judgement_answer(cell.op->judge_json(request.at("input"), r.target, r.dtype, r.device));
  if (cmd == "evaluate") {
    Evaluation evaluation = cell.op->evaluate(request.at("input"), r.target, r.dtype, r.device);
    nlohmann::json reply = judgement_answer(evaluation.judgement);
    reply["output"] = evaluation.output;
    reply["side_by_side"] = evaluation.side_by_side;
    return reply;
  }
  return {{"error", "unknown command " + cmd}};
}

}  // namespace

int serve_worker(const Registry& registry, int doorbell_fd, int staging_fd) {
  // A campaign killed with SIGKILL cannot stop its workers; the kernel does it for us (a
  // hanging kernel would otherwise outlive everyone).
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() == 1) return 0;
  std::ios::sync_with_stdio(false);
  const int answer_pipe_bytes = ::fcntl(STDOUT_FILENO, F_GETPIPE_SZ);
  const std::size_t ring_early_bytes = answer_pipe_bytes > 0 ? static_cast<std::size_t>(answer_pipe_bytes) / 2 : 32768;
  std::size_t unannounced = 0;  // answer bytes written since the last ring
  // The campaign sleeps until the doorbell rings (fuzz/worker_process.h says why).
  auto ring = [&] {
    if (doorbell_fd >= 0) {
      const char bell = 1;
      (void)!::write(doorbell_fd, &bell, 1);  // full (EAGAIN): it is rung already
    }
    unannounced = 0;
  };
  auto write_answers = [&](std::string_view lines) {
    // Answers that could fill the pipe while the campaign sleeps would block us for good.
    if (unannounced + lines.size() > ring_early_bytes) ring();
    for (std::size_t written = 0; written < lines.size();) {
      const ssize_t n = ::write(STDOUT_FILENO, lines.data() + written, lines.size() - written);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) std::_Exit(0);  // the campaign is gone
      written += static_cast<std::size_t>(n);
    }
    unannounced += lines.size();
  };
  // Each answer is staged (or sent) before the next case starts: the campaign tells a case
  // that killed its worker by the answers that came before it (fuzz/answer_staging.h).
  AnswerStaging staging = AnswerStaging::attach(staging_fd);
  // The case in flight and its size, for the campaign to time it by (AnswerStaging).
  listen_to_case_sizes([](void* context, std::size_t size) { static_cast<AnswerStaging*>(context)->case_sized(size); },
                       &staging);
  struct CaseInFlight {
    AnswerStaging& staging;
    explicit CaseInFlight(AnswerStaging& s) : staging(s) { staging.case_started(AnswerStaging::Clock::now()); }
    ~CaseInFlight() { staging.case_ended(); }
  };
  auto send_staged = [&] {
    write_answers(staging.staged());
    staging.sent_staged(AnswerStaging::Clock::now());
  };
  auto send_line = [&](const std::string& line) {
    if (staging.stage(line)) {
      if (staging.send_due(AnswerStaging::Clock::now())) send_staged();
      return;
    }
    send_staged();
    write_answers(line);
    staging.sent_one_unstaged(AnswerStaging::Clock::now());
  };
  auto send = [&](const nlohmann::json& reply) { send_line(reply.dump() + "\n"); };
  auto reply_with = [&](auto&& body) {
    try {
      send(body());
    } catch (const std::exception& e) {
      send({{"error", e.what()}});
    }
  };
  // Every answer to one message.
  auto handle = [&](const std::string& line) {
    nlohmann::json request;
    try {
      request = nlohmann::json::parse(line);
    } catch (const std::exception& e) {
      send({{"error", e.what()}});
      return;
    }
    if (!request.is_object() || request.value("cmd", "") != "runs") {
      reply_with([&] {
        CaseInFlight in_flight(staging);
        return answer(registry, request);
      });
      return;
    }
    // A batch of one cell's cases: the cell read once, each case answered as it ends (a
    // cell that cannot be read, with its error: the campaign counts one answer per case).
    MessageCell cell;
    std::string cell_error;
    try {
      cell = message_cell(registry, request);
      if (!cell.op) cell_error = unknown_op(request);
    } catch (const std::exception& e) {
      cell_error = e.what();
    }
    // Read in place: a batch holds thousands of cases, and value() would copy them all.
    const auto cases = request.find("cases");
    if (cases == request.end() || !cases->is_array()) return;
    for (const nlohmann::json& one : *cases) {
      if (!cell_error.empty()) {
        send({{"error", cell_error}});
        continue;
      }
      std::string answer_line;
      try {
        CaseRequest r = cell.request;
        r.case_seed = std::stoull(one.at(0).get_ref<const std::string&>());
        r.generator_size = one.at(1).get<int>();
        CaseInFlight in_flight(staging);
        answer_line = run_answer_line(cell.op->run_case(r));
      } catch (const std::exception& e) {
        send({{"error", e.what()}});
        continue;
      }
      send_line(answer_line);
    }
  };
  for (std::string line; std::getline(std::cin, line);) {
    handle(line);
    send_staged();
    ring();
  }
  return 0;
}

}  // namespace detfuzz::fuzz
