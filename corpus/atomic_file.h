// The one way detfuzz writes files: to a temporary name beside the target, flushed and
// fsync'ed, then renamed, so a reader (or a crash) sees the old file or the new one.
#pragma once

#include <string>

namespace detfuzz::corpus {

// std::runtime_error naming the path and the system's reason on failure. `durable` adds an
// fsync before the rename (survives power loss, not only a killed process); hot paths that
// rewrite a file per batch pass false.
void write_file_atomically(const std::string& path, const std::string& contents, bool durable = true);

// Creates `dir` and its parents if needed; std::runtime_error naming it otherwise.
void ensure_directory(const std::string& dir);

}  // namespace detfuzz::corpus
