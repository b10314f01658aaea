// The one way detfuzz writes files: to a temporary name beside the target, flushed and
// fsync'ed, then renamed, so a reader (or a crash) sees the old file or the new one.
#pragma once

#include <string>

namespace detfuzz::corpus {

enum class WriteMode {
  // fsync'ed, then renamed over the old file: survives power loss, and a reader always
  // finds the old file or the new one.
  durable,
  // For files rewritten often (ScratchFile's fallback): no fsync, and the old file is
  // unlinked before the rename, so a reader finds the old file, the new one or, for an
  // instant, none; never a torn one. ext4 flushes the data of a file renamed over another
  // (auto_da_alloc): that made each write ~10x dearer (226 vs 25 us measured here).
  scratch,
};

// detfuzz::Error{usage} naming the path and the system's reason on failure.
void write_file_atomically(const std::string& path, const std::string& contents, WriteMode mode = WriteMode::durable);

// A file rewritten whole many times a second (a worker's write-ahead, once per batch and
// per minimization step), never torn and never absent once written. The new contents go to
// a companion file (PATH.swap) whose name is then exchanged with PATH's (renameat2
// RENAME_EXCHANGE); both stay open and swap roles. A fresh temporary per write cost ext4 an
// inode allocation each time (its search for one not recently deleted was most of the
// cost): 29 against 7.4 us a write measured here, and over a third of a campaign process's
// time. Where the file system cannot exchange names, each write is write_file_atomically's
// scratch mode. The companion holds the previous contents, or part of the next.
class ScratchFile {
 public:
  enum class Replacement { exchange, rename };
  explicit ScratchFile(std::string path, Replacement replacement = Replacement::exchange);
  ~ScratchFile();
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;

  // detfuzz::Error{usage} naming the path and the system's reason on failure.
  void replace(const std::string& contents);

 private:
  void close_files();

  std::string path_, companion_path_;
  Replacement replacement_;
  int current_ = -1, companion_ = -1;  // the files named path_ and companion_path_
};

// Creates `dir` and its parents if needed; detfuzz::Error{usage} naming it otherwise.
void ensure_directory(const std::string& dir);

}  // namespace detfuzz::corpus
