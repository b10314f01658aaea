#include "fuzz/zygote.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "fuzz/ops/op_harness.h"
#include "fuzz/runner.h"
#include "model/error.h"

extern char** environ;

namespace detfuzz::fuzz {
namespace {

constexpr int kZygoteFd = 3;
constexpr int kMostDescriptors = 8;

// What the zygote answers.
struct ZygoteMessage {
  enum Kind : std::int32_t { forked = 1, exited = 2 };
  std::int32_t kind;
  std::int32_t pid;
  std::int32_t status;  // exited: the wait status
};

// A fork request: one byte, the new worker's descriptors beside it (SCM_RIGHTS).
struct DescriptorMessage {
  char byte = 'f';
  iovec data{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMostDescriptors)] = {};
  msghdr header{};
  DescriptorMessage() {
    header.msg_iov = &data;
    header.msg_iovlen = 1;
    header.msg_control = control;
    header.msg_controllen = sizeof control;
  }
  DescriptorMessage(const DescriptorMessage&) = delete;
  DescriptorMessage& operator=(const DescriptorMessage&) = delete;
};

bool send_message(int socket, const ZygoteMessage& message) {
  return ::send(socket, &message, sizeof message, MSG_NOSIGNAL) == static_cast<ssize_t>(sizeof message);
}

}  // namespace

Zygote::Zygote(const std::string& executable, const std::vector<std::string>& arguments,
               const std::string& stderr_path) {
  int sockets[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sockets) != 0)
    throw Error(ErrorKind::internal, std::string("cannot create the zygote's socket: ") + std::strerror(errno));
  // The child's end becomes its descriptor 3: it must not be 3 already in a way dup2 skips
  // (dup2 onto itself keeps close-on-exec).
  int child_end = sockets[1];
  if (child_end == kZygoteFd) {
    child_end = ::fcntl(sockets[1], F_DUPFD_CLOEXEC, kZygoteFd + 1);
    ::close(sockets[1]);
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, child_end, kZygoteFd);
  std::vector<std::string> args{executable};
  args.insert(args.end(), arguments.begin(), arguments.end());
  args.insert(args.end(), {"worker", "--zygote-fd", std::to_string(kZygoteFd)});
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int error = posix_spawn(&pid_, executable.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(child_end);
  if (error != 0) {
    ::close(sockets[0]);
    throw Error(ErrorKind::internal, "cannot start the worker zygote (" + executable + "): " + std::strerror(error));
  }
  socket_ = sockets[0];
}

Zygote::~Zygote() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);  // its workers follow (PR_SET_PDEATHSIG)
    int status;
    ::waitpid(pid_, &status, 0);
  }
  if (socket_ >= 0) ::close(socket_);
}

void Zygote::gone() {
  if (socket_ >= 0) ::close(socket_);
  socket_ = -1;
}

template <class Done>
void Zygote::read_messages(double timeout_s, Done done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                               std::chrono::duration<double>(timeout_s));
  while (socket_ >= 0 && !done()) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left < 0) return;
    pollfd fd{socket_, POLLIN, 0};
    const int ready = ::poll(&fd, 1, static_cast<int>(std::min<long long>(left, 1000)));
    if (ready < 0 && errno != EINTR) return gone();
    if (ready <= 0) continue;
    ZygoteMessage message{};
    const ssize_t n = ::recv(socket_, &message, sizeof message, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n != static_cast<ssize_t>(sizeof message)) return gone();  // closed: the zygote died
    if (message.kind == ZygoteMessage::forked) forked_ = message.pid;
    if (message.kind == ZygoteMessage::exited) exits_[message.pid] = message.status;
  }
}

pid_t Zygote::fork_worker(const std::vector<int>& descriptors) {
  if (socket_ < 0 || descriptors.empty() || descriptors.size() > kMostDescriptors) return -1;
  DescriptorMessage request;
  msghdr& message = request.header;
  message.msg_controllen = CMSG_SPACE(sizeof(int) * descriptors.size());
  cmsghdr* header = CMSG_FIRSTHDR(&message);
  header->cmsg_level = SOL_SOCKET;
  header->cmsg_type = SCM_RIGHTS;
  header->cmsg_len = CMSG_LEN(sizeof(int) * descriptors.size());
  std::memcpy(CMSG_DATA(header), descriptors.data(), sizeof(int) * descriptors.size());
  forked_.reset();
  if (::sendmsg(socket_, &message, MSG_NOSIGNAL) != 1) {
    gone();
    return -1;
  }
  // The first request waits for the zygote to load LibTorch and torchvision (as a spawned
  // worker's ping does); later ones for a fork.
  read_messages(120.0, [&] { return forked_.has_value(); });
  if (!forked_) {
    gone();
    return -1;
  }
  return *forked_;
}

std::optional<int> Zygote::exit_status(pid_t worker, double timeout_s) {
  read_messages(timeout_s, [&] { return exits_.count(worker) > 0; });
  const auto found = exits_.find(worker);
  if (found == exits_.end()) return std::nullopt;
  const int status = found->second;
  exits_.erase(found);
  return status;
}

int serve_zygote(const Registry& registry, int control_fd) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() == 1) return 0;
  sigset_t child_signals;
  sigemptyset(&child_signals);
  sigaddset(&child_signals, SIGCHLD);
  ::sigprocmask(SIG_BLOCK, &child_signals, nullptr);
  const int child_exits = ::signalfd(-1, &child_signals, SFD_CLOEXEC | SFD_NONBLOCK);
  if (child_exits < 0) throw Error(ErrorKind::internal, std::string("zygote: no signalfd: ") + std::strerror(errno));
  auto reap = [&] {
    signalfd_siginfo info;
    while (::read(child_exits, &info, sizeof info) > 0) {
    }
    int status = 0;
    for (pid_t pid; (pid = ::waitpid(-1, &status, WNOHANG)) > 0;)
      if (!send_message(control_fd, {ZygoteMessage::exited, pid, status})) std::_Exit(0);
  };
  for (;;) {
    pollfd fds[2] = {{control_fd, POLLIN, 0}, {child_exits, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return 3;
    }
    if (fds[1].revents) reap();
    if (!fds[0].revents) continue;
    DescriptorMessage request;
    msghdr& message = request.header;
    const ssize_t n = ::recvmsg(control_fd, &message, MSG_CMSG_CLOEXEC);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return 0;  // the campaign is gone
    std::vector<int> received;
    for (cmsghdr* header = CMSG_FIRSTHDR(&message); header; header = CMSG_NXTHDR(&message, header)) {
      if (header->cmsg_level != SOL_SOCKET || header->cmsg_type != SCM_RIGHTS) continue;
      const std::size_t count = (header->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      const int* fds_in = reinterpret_cast<const int*>(CMSG_DATA(header));
      received.assign(fds_in, fds_in + count);
    }
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::sigprocmask(SIG_UNBLOCK, &child_signals, nullptr);
      ::close(child_exits);
      ::close(control_fd);
      // Above every target first, so that no dup2 replaces a descriptor still to be placed.
      for (int& fd : received) {
        const int high = ::fcntl(fd, F_DUPFD_CLOEXEC, 16);
        ::close(fd);
        fd = high;
      }
      for (std::size_t i = 0; i < received.size(); ++i) ::dup2(received[i], static_cast<int>(i));
      for (int fd : received) ::close(fd);
      const int staging_fd = received.size() > 4 ? 4 : -1;
      int status = 3;
      try {
        status = serve_worker(registry, 3, staging_fd);
      } catch (const std::exception& e) {
        const std::string line = std::string("detfuzz worker: ") + e.what() + "\n";
        (void)!::write(STDERR_FILENO, line.data(), line.size());
      }
      std::_Exit(status);
    }
    for (int fd : received) ::close(fd);
    if (!send_message(control_fd, {ZygoteMessage::forked, pid < 0 ? -1 : pid, 0})) return 0;
  }
}

}  // namespace detfuzz::fuzz
