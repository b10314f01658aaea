// A fork server for workers (AFL's fork server, Android's zygote): one process per lane loads
// LibTorch, torchvision's library and the plugins once, starts no thread pool, and forks a
// worker whenever the campaign needs a new one. Replacing a worker that crashed or hung then
// costs a fork (milliseconds), not a LibTorch start (about 250 ms here, every time).
//
// The campaign sends the zygote the new worker's descriptors over a socket (SCM_RIGHTS); the
// zygote forks, answers with the pid, and tells each worker's exit status when it reaps it
// (the worker is its child, not the campaign's). Workers die with the zygote and the zygote
// with the campaign (PR_SET_PDEATHSIG), so a `kill -9` of the campaign leaves nothing behind.
#pragma once

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace detfuzz::fuzz {

struct Registry;

class Zygote {
 public:
  // Starts `executable arguments... worker --zygote-fd 3`, its stderr into `stderr_path`.
  // Error if it cannot be started.
  Zygote(const std::string& executable, const std::vector<std::string>& arguments, const std::string& stderr_path);
  ~Zygote();
  Zygote(const Zygote&) = delete;
  Zygote& operator=(const Zygote&) = delete;

  // A worker whose descriptors 0, 1, 2, 3 (and 4) are `descriptors`; its pid, or -1 when the
  // zygote is gone (it could not load, or was killed): spawn workers another way.
  pid_t fork_worker(const std::vector<int>& descriptors);
  // The wait status of a worker it forked, once reaped; nullopt after timeout_s, or when the
  // zygote is gone.
  std::optional<int> exit_status(pid_t worker, double timeout_s);
  bool alive() const { return socket_ >= 0; }

 private:
  // Takes in the zygote's messages for up to timeout_s, until `done()`.
  template <class Done>
  void read_messages(double timeout_s, Done done);
  void gone();

  pid_t pid_ = -1;
  int socket_ = -1;
  std::optional<pid_t> forked_;     // the pid answer to the last fork request
  std::map<pid_t, int> exits_;      // reaped workers' wait statuses not yet asked for
};

// The zygote's side (`detfuzz worker --zygote-fd FD`): forks a worker (serve_worker) for each
// request on control_fd until the campaign closes it.
int serve_zygote(const Registry& registry, int control_fd);

}  // namespace detfuzz::fuzz
