// Internal to fuzz/gen: pieces every generator family uses.
#pragma once

#include <rapidcheck.h>

#include <array>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <vector>

#include "model/hash.h"

namespace detfuzz::gen {

// A uniform integer in [min, max) that shrinks toward min. rc::gen::inRange scales its range
// by RapidCheck's size, which would bias every choice at small sizes toward its first
// option; here only counts scale with size, and they do it explicitly.
template <class T>
rc::Gen<T> in_range(T min, T max) {
  return rc::gen::resize(100, rc::gen::inRange<T>(min, max));
}

// Choice i with probability weights[i] / sum, its generator made by `make(i)` only once
// picked (a case builds one scenario's generator, not all ten). Shrinks toward choice 0, as
// rc::gen::weightedOneOf, and draws what weighted() over the same generators draws.
template <class Make>
auto weighted_choice(std::vector<std::size_t> weights, Make make) -> decltype(make(std::size_t{0})) {
  std::size_t total = 0;
  for (std::size_t weight : weights) total += weight;
  return rc::gen::mapcat(in_range<std::size_t>(0, total),
                         [weights = std::move(weights), make = std::move(make)](std::size_t pick) {
                           for (std::size_t i = 0; i < weights.size(); ++i) {
                             if (pick < weights[i]) return make(i);
                             pick -= weights[i];
                           }
                           return make(0);
                         });
}

// rc::gen::weightedOneOf over a list built at run time (it takes an initializer_list).
template <class T>
rc::Gen<T> weighted(std::vector<std::pair<std::size_t, rc::Gen<T>>> choices) {
  std::vector<std::size_t> weights;
  for (const auto& choice : choices) weights.push_back(choice.first);
  return weighted_choice(std::move(weights), [choices = std::move(choices)](std::size_t i) { return choices[i].second; });
}

// A column of rows(): integers in [min, max) that shrink toward `toward` (min unless given),
// as rc::gen::inRange's do toward their min.
struct Column {
  int min;
  int max;
  int toward;
  Column(int min_value, int max_value) : Column(min_value, max_value, min_value) {}
  Column(int min_value, int max_value, int toward_value) : min(min_value), max(max_value), toward(toward_value) {
    if (max <= min || toward < min || toward >= max) throw std::invalid_argument("gen::Column: empty range or target outside it");
  }
};

template <std::size_t K>
using Row = std::array<int, K>;

namespace detail {

// x % divisor for a divisor fixed in advance, by multiplications instead of a division
// (Lemire, Kaser and Kurz, "Faster Remainder by Direct Computation", 2019: with a 128-bit
// inverse it is exact for every 64-bit x and divisor). The division was a quarter of
// drawing a row.
class Remainder {
 public:
  explicit Remainder(std::uint64_t divisor) : divisor_(divisor), inverse_(~Wide{0} / divisor + 1) {
    if (divisor == 0) throw std::invalid_argument("gen::detail::Remainder: division by zero");
  }
  std::uint64_t of(std::uint64_t x) const {
    const Wide fraction = inverse_ * x;  // modulo 2^128: the fractional part of x / divisor
    const Wide low = static_cast<Wide>(static_cast<std::uint64_t>(fraction)) * divisor_;
    const Wide high = (fraction >> 64) * divisor_;
    return static_cast<std::uint64_t>((high + (low >> 64)) >> 64);
  }

 private:
  __extension__ using Wide = unsigned __int128;
  std::uint64_t divisor_;
  Wide inverse_;
};

template <std::size_t K>
std::vector<Row<K>> draw_rows(std::uint64_t seed, std::size_t n, const std::array<Column, K>& columns) {
  std::array<std::optional<Remainder>, K> ranges;
  for (std::size_t j = 0; j < K; ++j)
    ranges[j].emplace(static_cast<std::uint64_t>(static_cast<std::int64_t>(columns[j].max) - columns[j].min));
  std::vector<Row<K>> rows(n);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < K; ++j) {
      // Counter-based: element i*K + j of the stream `seed`, drawn without the ones before it.
      const std::uint64_t bits = splitmix64(seed + (i * K + j) * kSplitMix64Gamma);
      // The modulo's bias is range / 2^64: nothing for ranges of int.
      rows[i][j] = columns[j].min + static_cast<int>(ranges[j]->of(bits));
    }
  return rows;
}

// A row's smaller neighbours: one column at a time moved toward its target, as
// rc::gen::tuple shrinks its components.
template <std::size_t K>
rc::Seq<Row<K>> shrink_row(const Row<K>& row, const std::array<Column, K>& columns) {
  return rc::seq::mapcat(rc::seq::range<std::size_t>(0, K), [row, columns](std::size_t j) {
    return rc::seq::map(rc::shrink::towards(row[j], columns[j].toward), [row, j](int value) {
      Row<K> smaller = row;
      smaller[j] = value;
      return smaller;
    });
  });
}

}  // namespace detail

// `n` values, each made by `make` from a row of integers drawn uniformly from `columns`:
// what rc::gen::container(n, rc::gen::map(rc::gen::tuple(in_range(...)...), make)) gives,
// at a small fraction of its cost. RapidCheck draws each integer through its splittable
// Random (a Threefish block) and keeps a shrink tree per integer, about 1 us an element;
// here one draw of the case's Random seeds a counter-based stream and the shrink tree is
// made from the rows only when a shrinker asks. Row i depends on (that draw, i) alone, so
// a smaller n (the count shrinking) keeps a prefix, as rc's containers do; each row
// shrinks column by column toward the columns' targets.
template <class Make, std::size_t K>
auto rows(std::size_t n, Make make, const std::array<Column, K>& columns) {
  using Value = std::decay_t<std::invoke_result_t<const Make&, const Row<K>&>>;
  return rc::Gen<std::vector<Value>>([n, make, columns](const rc::Random& random, int) {
    auto drawn = rc::shrinkable::shrinkRecur(detail::draw_rows(rc::Random(random).next(), n, columns),
                                             [columns](const std::vector<Row<K>>& current) {
                                               return rc::shrink::eachElement(current, [columns](const Row<K>& row) {
                                                 return detail::shrink_row(row, columns);
                                               });
                                             });
    return rc::shrinkable::map(std::move(drawn), [make](const std::vector<Row<K>>& current) {
      std::vector<Value> values;
      values.reserve(current.size());
      for (const auto& row : current) values.push_back(make(row));
      return values;
    });
  });
}

template <class Make, class... Columns>
auto rows(std::size_t n, Make make, Columns... columns) {
  return rows(n, std::move(make), std::array<Column, sizeof...(Columns)>{Column(columns)...});
}

// Counts 0..max_count that grow with RapidCheck's size (0..100) so small cases come first;
// tiny counts at every size, the cap itself at large sizes.
rc::Gen<int> count(int max_count);

}  // namespace detfuzz::gen
