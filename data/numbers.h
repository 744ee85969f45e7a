// The `numbers` toy task: English number words -> digit tokens, 0..999999.
// "three hundred and forty - two" -> "3 4 2" (one token per digit).
#pragma once
#include <string>

#include "base/random.h"
#include "corpus.h"

namespace sf::data::numbers {

// British usage: "and" before the last two digits after a hundred or a
// thousand ("one thousand and five"); compound tens hyphenated with the hyphen
// as its own token ("forty - two").
std::string words(int value);
std::string digits(int value);  // "3 4 2"

// The number of digits is uniform in 1..6, so small numbers are as common as large.
Pair sample_pair(Rng& rng);

}  // namespace sf::data::numbers
