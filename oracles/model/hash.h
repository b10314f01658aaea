// The hashes detfuzz keeps in files and seeds. Their values are stored (case file names,
// case seeds, reports' seeds, the pinned case streams), so they never change.
#pragma once

#include <cstdint>
#include <string_view>

namespace detfuzz {

// Strings: 64-bit FNV-1a.
inline std::uint64_t fnv1a(std::string_view text) {
  std::uint64_t hash = 0xcbf29ce484222325ULL;
  for (unsigned char c : text) hash = (hash ^ c) * 0x100000001b3ULL;
  return hash;
}

// The SplitMix64 increment (Steele, Lea and Flood 2014): stream position i of seed s is
// splitmix64(s + i * kSplitMix64Gamma).
inline constexpr std::uint64_t kSplitMix64Gamma = 0x9E3779B97F4A7C15ULL;

// One SplitMix64 step from state `x`: the next state's output, a strong 64-bit mix.
inline std::uint64_t splitmix64(std::uint64_t x) {
  x += kSplitMix64Gamma;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

}  // namespace detfuzz
