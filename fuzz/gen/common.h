// Internal to fuzz/gen: pieces every generator family uses.
#pragma once

#include <rapidcheck.h>

#include <utility>
#include <vector>

namespace detfuzz::gen {

// A uniform integer in [min, max) that shrinks toward min. rc::gen::inRange scales its range
// by RapidCheck's size, which would bias every choice at small sizes toward its first
// option; here only counts scale with size, and they do it explicitly.
template <class T>
rc::Gen<T> in_range(T min, T max) {
  return rc::gen::resize(100, rc::gen::inRange<T>(min, max));
}

// rc::gen::weightedOneOf over a list built at run time (it takes an initializer_list).
template <class T>
rc::Gen<T> weighted(const std::vector<std::pair<std::size_t, rc::Gen<T>>>& choices) {
  std::size_t total = 0;
  for (const auto& choice : choices) total += choice.first;
  return rc::gen::mapcat(in_range<std::size_t>(0, total), [choices](std::size_t pick) {
    for (const auto& [weight, generator] : choices) {
      if (pick < weight) return generator;
      pick -= weight;
    }
    return choices.front().second;
  });
}

// Counts 0..max_count that grow with RapidCheck's size (0..100) so small cases come first;
// tiny counts at every size, the cap itself at large sizes.
rc::Gen<int> count(int max_count);

}  // namespace detfuzz::gen
