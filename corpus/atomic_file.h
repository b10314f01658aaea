// The one way detfuzz writes files: to a temporary name beside the target, flushed and
// fsync'ed, then renamed, so a reader (or a crash) sees the old file or the new one.
#pragma once

#include <string>

namespace detfuzz::corpus {

enum class WriteMode {
  // fsync'ed, then renamed over the old file: survives power loss, and a reader always
  // finds the old file or the new one.
  durable,
  // For files rewritten per batch (a worker's write-ahead): no fsync, and the old file is
  // unlinked before the rename, so a reader finds the old file, the new one or, for an
  // instant, none; never a torn one. ext4 flushes the data of a file renamed over another
  // (auto_da_alloc): that made each write ~10x dearer (226 vs 25 us measured here).
  scratch,
};

// std::runtime_error naming the path and the system's reason on failure.
void write_file_atomically(const std::string& path, const std::string& contents, WriteMode mode = WriteMode::durable);

// Creates `dir` and its parents if needed; std::runtime_error naming it otherwise.
void ensure_directory(const std::string& dir);

}  // namespace detfuzz::corpus
