// Storage for an oracle's answer that runs to megabytes (RoIAlign's: 64 bytes an output
// element, 800 KB a 256-channel RoI): written once, element by element, by the oracle.
//  - No value-initializing pass: a vector of a trivial element type resized through this
//    allocator leaves the elements to the oracle, which writes every field.
//  - A large answer is mapped in huge pages where the kernel offers them (Linux, THP in
//    "madvise" or "always" mode), and its mapping is kept for the next large answer:
//    page faults are dear on this machine (a VM), and faulting in a fresh 80 MB answer on
//    every call was about two thirds of a 100-RoI oracle call under glibc malloc, whose
//    largest blocks go back to the system on free (275 -> 71 ms with this allocator).
#pragma once

#include <cstddef>
#include <new>
#include <type_traits>
#include <utility>

namespace detfuzz::oracles {

// Answers from this size on are mapped on their own, in huge pages.
inline constexpr std::size_t kHugeAnswerBytes = std::size_t{4} << 20;

void* allocate_answer_bytes(std::size_t bytes);
void free_answer_bytes(void* memory, std::size_t bytes) noexcept;

template <class T>
struct AnswerAllocator {
  static_assert(std::is_trivially_destructible_v<T>, "answer elements are released without destructors");
  using value_type = T;
  AnswerAllocator() = default;
  template <class U>
  AnswerAllocator(const AnswerAllocator<U>&) noexcept {}  // NOLINT: allocators convert implicitly

  T* allocate(std::size_t n) { return static_cast<T*>(allocate_answer_bytes(n * sizeof(T))); }
  void deallocate(T* memory, std::size_t n) noexcept { free_answer_bytes(memory, n * sizeof(T)); }

  // Default-initialization where the vector would value-initialize: for a trivial T, nothing.
  template <class U>
  void construct(U* at) noexcept(std::is_nothrow_default_constructible_v<U>) {
    ::new (static_cast<void*>(at)) U;
  }
  template <class U, class... Args>
  void construct(U* at, Args&&... args) {
    ::new (static_cast<void*>(at)) U(std::forward<Args>(args)...);
  }

  template <class U>
  bool operator==(const AnswerAllocator<U>&) const noexcept { return true; }
  template <class U>
  bool operator!=(const AnswerAllocator<U>&) const noexcept { return false; }
};

}  // namespace detfuzz::oracles
