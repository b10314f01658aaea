#include "corpus/atomic_file.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace detfuzz::corpus {

void write_file_atomically(const std::string& path, const std::string& contents, WriteMode mode) {
  // pid + a counter: concurrent writers (shards, threads) never share a temporary name.
  static std::atomic<unsigned> counter{0};
  const std::string temporary =
      path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  std::FILE* file = std::fopen(temporary.c_str(), "wb");
  if (!file)
    throw std::runtime_error("cannot write " + temporary + ": " + std::strerror(errno) +
                             " (check that the directory exists and is writable)");
  bool ok = std::fwrite(contents.data(), 1, contents.size(), file) == contents.size();
  ok = std::fflush(file) == 0 && ok;
  if (mode == WriteMode::durable) ok = ::fsync(::fileno(file)) == 0 && ok;
  ok = std::fclose(file) == 0 && ok;
  if (ok && mode == WriteMode::scratch) std::remove(path.c_str());
  if (!ok || std::rename(temporary.c_str(), path.c_str()) != 0) {
    const int error = errno;
    std::remove(temporary.c_str());
    throw std::runtime_error("cannot write " + path + ": " + std::strerror(error));
  }
}

void ensure_directory(const std::string& dir) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) throw std::runtime_error("cannot create directory " + dir + ": " + error.message());
}

}  // namespace detfuzz::corpus
