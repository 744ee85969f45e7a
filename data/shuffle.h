// Fisher-Yates shuffle driven by sf::Rng, so a permutation depends only on the
// generator's state (std::shuffle's algorithm is implementation-defined).
#pragma once
#include <utility>
#include <vector>

#include "base/random.h"

namespace sf::data {

template <class T>
void shuffle(std::vector<T>& items, Rng& rng) {
  for (size_t i = items.size(); i > 1; --i) std::swap(items[i - 1], items[rng.below(i)]);
}

}  // namespace sf::data
