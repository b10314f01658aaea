#include "answer_memory.h"

#include <cstdint>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace detfuzz::oracles {
namespace {

#if defined(__linux__)
constexpr std::size_t kHugePage = std::size_t{2} << 20;

std::size_t huge_pages_for(std::size_t bytes) { return (bytes + kHugePage - 1) / kHugePage * kHugePage; }

// A mapping aligned to a huge page, so that every 2 MiB of it can be one: map one huge
// page more than needed and unmap what lies before and after the aligned span.
void* map_huge(std::size_t span) {
  void* mapped = mmap(nullptr, span + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapped == MAP_FAILED) throw std::bad_alloc();
  const auto start = reinterpret_cast<std::uintptr_t>(mapped);
  const std::uintptr_t aligned = (start + kHugePage - 1) / kHugePage * kHugePage;
  if (aligned > start) munmap(mapped, aligned - start);
  const std::size_t after = start + span + kHugePage - (aligned + span);
  if (after > 0) munmap(reinterpret_cast<void*>(aligned + span), after);
  // Advice only: without THP the mapping works in small pages.
  madvise(reinterpret_cast<void*>(aligned), span, MADV_HUGEPAGE);
  return reinterpret_cast<void*>(aligned);
}

// The last large answer this thread freed, kept for the next one of about its size: a fresh
// mapping is zeroed page by page by the kernel, which on this machine ran at about 1.3 GB/s
// (a quarter of a 1,000-RoI call). Kept only while the answers stay that large: one of
// less than half its size, or the thread's end, unmaps it.
struct KeptMapping {
  void* memory = nullptr;
  std::size_t span = 0;
  ~KeptMapping() { release(); }
  void release() noexcept {
    if (memory != nullptr) munmap(memory, span);
    memory = nullptr;
    span = 0;
  }
};
thread_local KeptMapping kept;
#endif

}  // namespace

void* allocate_answer_bytes(std::size_t bytes) {
#if defined(__linux__)
  if (bytes >= kHugeAnswerBytes) {
    const std::size_t span = huge_pages_for(bytes);
    if (kept.memory != nullptr && kept.span >= span && kept.span / 2 <= span) {
      // Trimmed to this answer's span: free_answer_bytes unmaps what the answer's size
      // says, and a longer mapping would leave its tail mapped for good.
      char* memory = static_cast<char*>(kept.memory);
      if (kept.span > span) munmap(memory + span, kept.span - span);
      kept.memory = nullptr;
      kept.span = 0;
      return memory;
    }
    kept.release();
    return map_huge(span);
  }
#endif
  return ::operator new(bytes);
}

void free_answer_bytes(void* memory, std::size_t bytes) noexcept {
#if defined(__linux__)
  if (bytes >= kHugeAnswerBytes) {
    kept.release();
    kept.memory = memory;
    kept.span = huge_pages_for(bytes);
    return;
  }
#endif
  ::operator delete(memory);
}

}  // namespace detfuzz::oracles
