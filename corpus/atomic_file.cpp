#include "corpus/atomic_file.h"

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <utility>

#include "model/error.h"

namespace detfuzz::corpus {

namespace {

[[noreturn]] void cannot_write(const std::string& path, int error) {
  throw Error(ErrorKind::usage, "cannot write " + path + ": " + std::strerror(error) +
                                    " (check that the directory exists and is writable, or give --report/--corpus another one)");
}

}  // namespace

void write_file_atomically(const std::string& path, const std::string& contents, WriteMode mode) {
  // pid + a counter: concurrent writers (shards, threads) never share a temporary name.
  static std::atomic<unsigned> counter{0};
  const std::string temporary =
      path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  std::FILE* file = std::fopen(temporary.c_str(), "wb");
  if (!file) cannot_write(temporary, errno);
  bool ok = std::fwrite(contents.data(), 1, contents.size(), file) == contents.size();
  ok = std::fflush(file) == 0 && ok;
  if (mode == WriteMode::durable) ok = ::fsync(::fileno(file)) == 0 && ok;
  ok = std::fclose(file) == 0 && ok;
  if (ok && mode == WriteMode::scratch) std::remove(path.c_str());
  if (!ok || std::rename(temporary.c_str(), path.c_str()) != 0) {
    const int error = errno;
    std::remove(temporary.c_str());
    cannot_write(path, error);
  }
}

ScratchFile::ScratchFile(std::string path, Replacement replacement)
    : path_(std::move(path)), companion_path_(path_ + ".swap"), replacement_(replacement) {}

ScratchFile::~ScratchFile() {
  if (companion_ >= 0) ::unlink(companion_path_.c_str());  // only ever the previous contents
  close_files();
}

void ScratchFile::close_files() {
  for (int* fd : {&current_, &companion_}) {
    if (*fd >= 0) ::close(*fd);
    *fd = -1;
  }
}

void ScratchFile::replace(const std::string& contents) {
  if (replacement_ == Replacement::rename) {
    write_file_atomically(path_, contents, WriteMode::scratch);
    return;
  }
  if (current_ < 0) {  // the first write: both names made
    write_file_atomically(path_, contents, WriteMode::scratch);
    current_ = ::open(path_.c_str(), O_WRONLY | O_CLOEXEC);
    if (current_ < 0) cannot_write(path_, errno);
    companion_ = ::open(companion_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (companion_ < 0) cannot_write(companion_path_, errno);
    return;
  }
  for (std::size_t written = 0; written < contents.size();) {
    const ssize_t n = ::pwrite(companion_, contents.data() + written, contents.size() - written,
                               static_cast<off_t>(written));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) cannot_write(companion_path_, n < 0 ? errno : ENOSPC);
    written += static_cast<std::size_t>(n);
  }
  if (::ftruncate(companion_, static_cast<off_t>(contents.size())) != 0) cannot_write(companion_path_, errno);
  if (::renameat2(AT_FDCWD, companion_path_.c_str(), AT_FDCWD, path_.c_str(), RENAME_EXCHANGE) != 0) {
    const int error = errno;
    if (error != EINVAL && error != ENOSYS && error != EOPNOTSUPP) cannot_write(path_, error);
    // A file system that cannot exchange names (NFS, say): a fresh file per write.
    ::unlink(companion_path_.c_str());
    close_files();
    replacement_ = Replacement::rename;
    write_file_atomically(path_, contents, WriteMode::scratch);
    return;
  }
  std::swap(current_, companion_);
}

void ensure_directory(const std::string& dir) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error)
    throw Error(ErrorKind::usage, "cannot create directory " + dir + ": " + error.message() +
                                      " (give --report/--corpus a directory that can be created)");
}

}  // namespace detfuzz::corpus
