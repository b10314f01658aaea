#include "fuzz/ops/contained_run.h"

#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <exception>

namespace detfuzz::fuzz {
namespace {

// The child's answer on the pipe: a tag ('O' outputs, 'E' a message), then length-prefixed
// fields. Doubles travel as their bytes: bit for bit.
void put(std::string& out, const void* data, std::size_t size) { out.append(static_cast<const char*>(data), size); }
void put_size(std::string& out, std::uint64_t n) { put(out, &n, sizeof n); }
void put_string(std::string& out, const std::string& s) {
  put_size(out, s.size());
  out += s;
}

struct Reader {
  const std::string& in;
  std::size_t at = 0;
  bool ok = true;
  void get(void* data, std::size_t size) {
    if (!ok || in.size() - at < size) {
      ok = false;
      return;
    }
    std::memcpy(data, in.data() + at, size);
    at += size;
  }
  std::uint64_t size() {
    std::uint64_t n = 0;
    get(&n, sizeof n);
    return ok && n <= in.size() ? n : (ok = false, 0);
  }
  std::string string() {
    const std::uint64_t n = size();
    std::string s(n, '\0');
    get(s.data(), n);
    return s;
  }
};

std::string encoded(const std::vector<HostTensor>& outputs) {
  std::string out = "O";
  put_size(out, outputs.size());
  for (const HostTensor& t : outputs) {
    put_size(out, t.shape.size());
    for (std::int64_t d : t.shape) put(out, &d, sizeof d);
    put_string(out, t.dtype);
    put_string(out, t.device);
    put_size(out, t.values.size());
    put(out, t.values.data(), t.values.size() * sizeof(double));
  }
  return out;
}

std::vector<HostTensor> decoded(Reader& r) {
  std::vector<HostTensor> outputs(r.size());
  for (HostTensor& t : outputs) {
    t.shape.resize(r.size());
    for (std::int64_t& extent : t.shape) r.get(&extent, sizeof extent);
    t.dtype = r.string();
    t.device = r.string();
    t.values.resize(r.size());
    r.get(t.values.data(), t.values.size() * sizeof(double));
  }
  return outputs;
}

}  // namespace

std::variant<std::vector<HostTensor>, compare::Verdict> run_contained(const std::function<std::vector<HostTensor>()>& run,
                                                                      const std::string& property) {
  int pipe_ends[2];
  if (::pipe(pipe_ends) != 0) return run();
  const pid_t child = ::fork();
  if (child < 0) {
    ::close(pipe_ends[0]);
    ::close(pipe_ends[1]);
    return run();
  }
  if (child == 0) {
    ::close(pipe_ends[0]);
    std::string answer;
    try {
      answer = encoded(run());
    } catch (const std::exception& error) {
      answer = "E";
      put_string(answer, error.what());
    }
    for (std::size_t written = 0; written < answer.size();) {
      const ssize_t n = ::write(pipe_ends[1], answer.data() + written, answer.size() - written);
      if (n <= 0) break;
      written += static_cast<std::size_t>(n);
    }
    ::_exit(0);  // no destructors, no atexit: the heap may be broken
  }
  ::close(pipe_ends[1]);
  std::string answer;
  char buffer[1 << 16];
  for (ssize_t n; (n = ::read(pipe_ends[0], buffer, sizeof buffer)) != 0;) {
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    answer.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(pipe_ends[0]);
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status) || answer.empty()) {
    const int signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    const std::string name = signal ? std::string("SIG") + ::sigabbrev_np(signal) : "no answer";
    return compare::Verdict{FindingKind::crash, property,
                            "the kernel died (" + name + ") in a contained child process",
                            {{"signal", signal}}};
  }
  Reader reader{answer, 1};
  if (answer[0] == 'E') {
    std::string message = reader.string();
    message = message.substr(0, message.find('\n'));
    return compare::Verdict{FindingKind::exception, property, "the kernel raised: " + message, {{"exception", message}}};
  }
  std::vector<HostTensor> outputs = decoded(reader);
  if (!reader.ok)
    return compare::Verdict{FindingKind::crash, property, "the contained child process sent a truncated answer", {}};
  return outputs;
}

}  // namespace detfuzz::fuzz
