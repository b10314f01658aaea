// The one string hash detfuzz keeps in files and seeds (case file names, case seeds, the
// pinned case streams): 64-bit FNV-1a. Its values are stored, so it never changes.
#pragma once

#include <cstdint>
#include <string_view>

namespace detfuzz {

inline std::uint64_t fnv1a(std::string_view text) {
  std::uint64_t hash = 0xcbf29ce484222325ULL;
  for (unsigned char c : text) hash = (hash ^ c) * 0x100000001b3ULL;
  return hash;
}

}  // namespace detfuzz
