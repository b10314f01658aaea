// Cases run in worker processes: batches pipelined to a worker, each case timed by its
// cell's calibrated limit, a suspect confirmed in a fresh worker, a dead worker replaced
// by its warm spare (forked from the lane's zygote).
#include "fuzz/runner.h"

#include <signal.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "corpus/atomic_file.h"
#include "fuzz/case_timeout.h"
#include "fuzz/wire_format.h"
#include "fuzz/worker_process.h"
#include "fuzz/zygote.h"
#include "model/error.h"

namespace detfuzz::fuzz {

namespace {

class WorkerRunner final : public CaseRunner {
 public:
  explicit WorkerRunner(WorkerOptions options)
      : options_(std::move(options)),
        zygote_(start_zygote(options_)),
        workers_{std::make_unique<WorkerProcess>(options_, 0, zygote_.get()),
                 std::make_unique<WorkerProcess>(options_, 1, zygote_.get())} {
    ::signal(SIGPIPE, SIG_IGN);  // a dead worker's pipe must be an error, not our death
  }

  void warm_up() override { workers_[0]->warm_up(); }

  std::vector<CaseOutcome> run_cases(const OpHarness& op, const std::vector<CaseRequest>& requests) override {
    // The oldest batch prefetched, if these are its cases (its answers, or none where it
    // must be sent again); anything else prefetched is received and dropped.
    std::vector<WorkerProcess::Reply> replies;
    if (!prefetched_.empty() && prefetched_.front().op == &op && prefetched_.front().requests == requests) {
      receive_prefetched(1);
      replies = std::move(prefetched_.front().replies);
      prefetched_.pop_front();
    } else {
      receive_prefetched(prefetched_.size());
      prefetched_.clear();
    }
    std::vector<CaseOutcome> outcomes;
    CellTimeout& clock = cell_timeout(op, requests.front());
    while (outcomes.size() < requests.size()) {
      if (replies.empty()) {
        const std::vector<CaseRequest> rest(requests.begin() + static_cast<std::ptrdiff_t>(outcomes.size()), requests.end());
        replies = send_to_worker({runs_message(op, rest)}, rest.size(), clock.limit_s(), &clock);
      }
      for (const WorkerProcess::Reply& reply : replies) {
        if (reply.outcome == WorkerProcess::Outcome::interrupted) return outcomes;
        const CaseRequest& request = requests[outcomes.size()];
        if (reply.outcome == WorkerProcess::Outcome::timed_out && reply.limit_s < clock.ceiling_s() && !clock.hang_confirmed) {
          // A suspect: alone, in a fresh worker, with the ceiling. A slow case answers (and
          // calibrates the cell); a hang confirms the cell's hangs.
          const WorkerProcess::Reply again = send_to_worker({runs_message(op, {request})}, 1, clock.ceiling_s()).front();
          if (again.outcome == WorkerProcess::Outcome::interrupted) return outcomes;
          if (again.outcome == WorkerProcess::Outcome::timed_out) clock.hang_confirmed = true;
          outcomes.push_back(outcome_of(again, op, request, clock, reply.limit_s));
          continue;
        }
        if (reply.outcome == WorkerProcess::Outcome::timed_out) clock.hang_confirmed = true;  // past the ceiling, or confirmed
        outcomes.push_back(outcome_of(reply, op, request, clock, reply.limit_s));
      }
      replies.clear();
    }
    return outcomes;
  }

  // The worker starts on these cases as soon as it is done with those sent before: the
  // campaign sends the next batch before it takes in the one before, so the worker never
  // waits while the campaign reads, parses and bookkeeps a batch (about 6% of a lane's time
  // with one batch in flight). run_cases with the same requests collects them; any other
  // request first receives them. Two in flight at most: a batch (kMaxBatch cases, about
  // 15 KB) always fits in the request pipe beside the one the worker is reading, so
  // sending never blocks on a worker that is blocked on us.
  void prefetch(const OpHarness& op, const std::vector<CaseRequest>& requests) override {
    if (requests.empty()) return;
    if (prefetched_.size() >= kMostInFlight) receive_prefetched(prefetched_.size() - kMostInFlight + 1);
    CellTimeout& clock = cell_timeout(op, requests.front());
    Prefetched batch{&op, requests, clock.limit_s(), &clock, requests.size(), {}};
    const std::vector<nlohmann::json> message{runs_message(op, requests)};
    const bool behind = std::any_of(prefetched_.begin(), prefetched_.end(), [](const Prefetched& b) { return b.pending > 0; });
    if (behind) {
      // A worker that cannot take it died in the batch before, whose answers say so when
      // received: not this batch's doing. It is sent again when run.
      if (!workers_[0]->send_ahead(message)) batch.pending = 0;
    } else if (auto failed = workers_[0]->submit(message)) {
      batch.pending = 0;
      batch.replies = {*failed};
      after_casualty(failed->outcome);
    }
    prefetched_.push_back(std::move(batch));
  }

  compare::Judgement judge_input(const OpHarness& op, const CaseRequest& request,
                                 const nlohmann::json& input) override {
    nlohmann::json message = cell_json(op.name(), request.target, request.dtype, request.device);
    message["cmd"] = "judge";
    message["input"] = input;
    // Shrinking a confirmed hang: each candidate that still hangs costs the calibrated limit
    // for its size, not the ceiling.
    CellTimeout& clock = cell_timeout(op, request);
    const double limit = clock.hang_confirmed ? clock.limit_s(op.size_of(input)) : clock.ceiling_s();
    WorkerProcess::Reply reply = send_to_worker({message}, 1, limit, clock.hang_confirmed ? &clock : nullptr).front();
    if (reply.outcome == WorkerProcess::Outcome::answered) {
      checked(reply.answer);
      return judgement_from_answer(reply.answer);
    }
    compare::Judgement judgement;
    judgement.verdicts.push_back(casualty(reply, &clock, limit));
    return judgement;
  }

  std::optional<std::string> unsupported_reason(const OpHarness& op, const std::string& target, DType dtype,
                                                Device device) override {
    nlohmann::json message = cell_json(op.name(), target, dtype, device);
    message["cmd"] = "probe";
    WorkerProcess::Reply reply = send_to_worker({message}, 1, options_.timeout_rule.ceiling_s).front();
    // A probe that kills the worker is a finding the campaign will meet again, not a reason.
    if (reply.outcome != WorkerProcess::Outcome::answered) return std::nullopt;
    checked(reply.answer);
    if (reply.answer.at("unsupported").is_null()) return std::nullopt;
    return reply.answer.at("unsupported").get<std::string>();
  }

  InputJudge input_judge(const OpHarness& op, const CaseRequest& request) override {
    return [this, &op, request](const nlohmann::json& input) { return judge_input(op, request, input); };
  }

  Evaluation evaluate(const OpHarness& op, const nlohmann::json& input, const std::string& target, DType dtype,
                      Device device) override {
    nlohmann::json message = cell_json(op.name(), target, dtype, device);
    message["cmd"] = "evaluate";
    message["input"] = input;
    const double case_timeout = scaled_ceiling_s(options_.timeout_rule.ceiling_s, op.size_of(input));
    WorkerProcess::Reply reply = send_to_worker({message}, 1, case_timeout).front();
    Evaluation evaluation;
    evaluation.size = op.size_of(input);
    if (reply.outcome != WorkerProcess::Outcome::answered) {
      evaluation.judgement.verdicts.push_back(casualty(reply, nullptr, case_timeout));
      return evaluation;
    }
    checked(reply.answer);
    evaluation.judgement = judgement_from_answer(reply.answer);
    evaluation.output = reply.answer.value("output", nlohmann::json());
    evaluation.side_by_side = reply.answer.value("side_by_side", "");
    return evaluation;
  }

 private:
  // A reply as the case's outcome; an answered case's time calibrates its cell.
  // `suspected_at_s`: the limit that first called the case hung (the ceiling, or a
  // calibrated limit that the ceiling then confirmed).
  CaseOutcome outcome_of(const WorkerProcess::Reply& reply, const OpHarness& op, const CaseRequest& request,
                         CellTimeout& clock, double suspected_at_s) {
    CaseOutcome outcome;
    if (reply.outcome == WorkerProcess::Outcome::answered && reply.run) {
      outcome = *reply.run;
    } else if (reply.outcome == WorkerProcess::Outcome::answered) {
      checked(reply.answer);
      outcome.judgement = judgement_from_answer(reply.answer);
      outcome.size = reply.answer.value("size", static_cast<std::size_t>(0));
      if (reply.answer.contains("times")) {
        const auto& t = reply.answer.at("times");
        outcome.times = {t.at(0).get<double>(), t.at(1).get<double>(), t.at(2).get<double>(), t.at(3).get<double>()};
      }
      outcome.input_magnitude = reply.answer.value("magnitude", -1.0);
    } else {
      // The case in flight killed its worker; the ones after it run on a fresh one.
      outcome.judgement.verdicts.push_back(casualty(reply, &clock, suspected_at_s));
      outcome.size = op.size_of(op.generated_input(request));  // generation is pure: redo it here
      return outcome;
    }
    clock.observe(outcome.size, outcome.times.generation_s + outcome.times.judge_s);
    return outcome;
  }

  // Each cell's case-time calibration (fuzz/case_timeout.h).
  CellTimeout& cell_timeout(const OpHarness& op, const CaseRequest& request) {
    const std::string key = fmt::format("{}/{}/{}/{}/{}/{}", op.name(), request.target, dtype_name(request.dtype),
                                        device_name(request.device), request.max_boxes, request.hostile);
    auto found = cells_.find(key);
    if (found == cells_.end()) {
      CaseTimeoutRule rule = options_.timeout_rule;
      rule.ceiling_s = timeout(op, request);
      found = cells_.emplace(key, CellTimeout(rule, op.cost_exponent())).first;
    }
    return found->second;
  }

  double timeout(const OpHarness& op, const CaseRequest& request) const {
    return scaled_ceiling_s(options_.timeout_rule.ceiling_s, op.largest_case(request.max_boxes));
  }

  static void checked(const nlohmann::json& answer) {
    if (answer.contains("error"))
      throw Error(ErrorKind::internal, "worker: " + answer.at("error").get<std::string>());
  }

  // `clock`: the cell's calibration (nullptr: the case ran under the ceiling alone).
  static compare::Verdict casualty(const WorkerProcess::Reply& reply, const CellTimeout* clock, double suspected_at_s) {
    compare::Verdict verdict;
    if (reply.outcome == WorkerProcess::Outcome::timed_out) {
      verdict.kind = FindingKind::hang;
      verdict.property = "timeout";
      if (!clock || suspected_at_s >= clock->ceiling_s())
        verdict.message = fmt::format("no answer within {:.3g} s: the worker was killed", reply.limit_s);
      else
        verdict.message = fmt::format(
            "no answer within {:.3g} s ({:g} x the slowest of the cell's {} measured cases, floor {:g} s); the "
            "cell's first such case ran past the full {:.3g} s limit too: the worker was killed",
            reply.limit_s, CaseTimeoutRule{}.headroom, clock->measured(), CaseTimeoutRule{}.floor_s, clock->ceiling_s());
    } else {
      verdict.kind = FindingKind::crash;
      verdict.property = reply.death;
      verdict.message = "the worker died (" + reply.death + ") running the case";
    }
    std::string tail = reply.stderr_tail;
    if (!tail.empty()) {
      std::string last = tail.substr(0, tail.size() - 1);
      last = last.substr(last.rfind('\n') == std::string::npos ? 0 : last.rfind('\n') + 1);
      verdict.message += "; last stderr line: " + last.substr(0, 200);
    }
    verdict.details = {{"death", reply.death}, {"stderr_tail", tail}};
    return verdict;
  }

  // After a worker dies, the spare (warmed up meanwhile) takes over and a new spare starts:
  // kernels that crash often cost a swap, not a LibTorch start, per death.
  std::vector<WorkerProcess::Reply> send_to_worker(const std::vector<nlohmann::json>& messages, std::size_t answers,
                                           double timeout_s, const CellTimeout* clock = nullptr) {
    receive_prefetched(prefetched_.size());  // their answers come first on the pipe
    std::vector<WorkerProcess::Reply> replies = workers_[0]->requests(messages, answers, timeout_s, clock);
    after_casualty(replies.back().outcome);
    return replies;
  }

  void after_casualty(WorkerProcess::Outcome outcome) {
    if (outcome == WorkerProcess::Outcome::died || outcome == WorkerProcess::Outcome::timed_out) {
      std::swap(workers_[0], workers_[1]);
      workers_[1]->warm_up();
    }
  }

  // Receives the answers of the `count` oldest prefetched batches (kept for run_cases). A
  // death or timeout ends its batch's answers; the batches after it went to the dead worker
  // and are sent again when run.
  void receive_prefetched(std::size_t count) {
    for (std::size_t i = 0; i < count && i < prefetched_.size(); ++i) {
      Prefetched& batch = prefetched_[i];
      if (batch.pending == 0) continue;
      batch.replies = workers_[0]->collect(batch.pending, batch.timeout_s, batch.clock);
      batch.pending = 0;
      const WorkerProcess::Outcome outcome = batch.replies.back().outcome;
      if (outcome == WorkerProcess::Outcome::died || outcome == WorkerProcess::Outcome::timed_out) {
        for (std::size_t later = i + 1; later < prefetched_.size(); ++later) prefetched_[later].pending = 0;
        after_casualty(outcome);
        return;
      }
    }
  }

  // A batch of one cell's cases as one message (one line to write ahead, parse and send,
  // instead of one per case); the worker answers each case on its own line as it ends.
  static nlohmann::json runs_message(const OpHarness& op, const std::vector<CaseRequest>& requests) {
    const CaseRequest& first = requests.front();
    nlohmann::json message = cell_json(op.name(), first.target, first.dtype, first.device);
    message["cmd"] = "runs";
    message["max_boxes"] = first.max_boxes;
    message["hostile"] = first.hostile;
    nlohmann::json cases = nlohmann::json::array();
    for (const CaseRequest& r : requests) {
      if (r.target != first.target || r.dtype != first.dtype || r.device != first.device ||
          r.max_boxes != first.max_boxes || r.hostile != first.hostile)
        throw Error(ErrorKind::internal, "a batch of cases mixes cells");
      cases.push_back({std::to_string(r.case_seed), r.generator_size});
    }
    message["cases"] = std::move(cases);
    return message;
  }

  // Batches sent ahead, oldest first: answers still on the pipe (pending), or received
  // (replies; none for a batch the worker could not take, which run_cases sends again).
  struct Prefetched {
    const OpHarness* op;
    std::vector<CaseRequest> requests;
    double timeout_s;
    const CellTimeout* clock;
    std::size_t pending;
    std::vector<WorkerProcess::Reply> replies;
  };
  static constexpr std::size_t kMostInFlight = 2;
  std::deque<Prefetched> prefetched_;

  // Started at once: it loads LibTorch while the campaign sets up (nullptr: workers are
  // spawned, as when DETFUZZ_NO_ZYGOTE is set).
  static std::unique_ptr<Zygote> start_zygote(const WorkerOptions& options) {
    if (std::getenv("DETFUZZ_NO_ZYGOTE")) return nullptr;
    corpus::ensure_directory(options.scratch_dir);
    try {
      return std::make_unique<Zygote>(options.executable, options.arguments, options.scratch_dir + "/zygote.stderr");
    } catch (const Error& e) {
      std::cerr << "detfuzz: " << e.what() << "; workers are spawned one by one\n";
      return nullptr;
    }
  }

  WorkerOptions options_;
  std::unique_ptr<Zygote> zygote_;
  std::unique_ptr<WorkerProcess> workers_[2];
  std::map<std::string, CellTimeout> cells_;
};

}  // namespace

std::unique_ptr<CaseRunner> make_worker_runner(const WorkerOptions& options) {
  return std::make_unique<WorkerRunner>(options);
}

}  // namespace detfuzz::fuzz
