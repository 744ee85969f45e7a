// Detokenisation: the inverse of the pre-tokenizer (data/pretokenizer.h) for
// text people read. The pre-tokenizer puts a space between every run of word
// characters and every run of other characters, so "¿Qué?" became "¿ Qué ?";
// detokenize decides, at each of those spaces, whether the language writes one.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace sf::data {

// The words joined as written: no space before closing punctuation (. , ; : ! ?
// ) ] } % …) or after opening punctuation (( [ { ¿ ¡ „ «); straight quotes paired
// by counting (an odd " opens and attaches to the next word, an even one closes
// and attaches to the previous); an apostrophe or hyphen between two words
// joins them (don't, Tom's, T-Shirt; German "Obst- und" keeps the space before
// und/oder); a . , or : between two digit runs joins
// them (1,000  3.5  10:30). Every other boundary keeps its space.
std::string detokenize(const std::vector<std::string_view>& words);

// The same for a line of words separated by single spaces (what the target
// tokenizer's decode and `translate --tokens` produce).
std::string detokenize(std::string_view spaced);

}  // namespace sf::data
