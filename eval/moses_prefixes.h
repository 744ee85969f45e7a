// Nonbreaking prefixes: the words tokenizer.perl leaves a final period on,
// because the period marks an abbreviation ("ca. 120 cm") and not the end of
// a sentence. Moses reads them from a file per language; these lists are ours,
// short, and written for lowercased text, the only text the Multi30k
// convention tokenizes: an entry in capitals ("Dr") could never match there.
#pragma once
#include <string>
#include <string_view>

namespace sf::eval {

enum class NonbreakingPrefix {
  none,           // the period is split off, unless a lowercase word follows
  always,         // the period stays: "bzw." "etc."
  before_number,  // the period stays when a number follows: "pp. 12"
};

// How tokenizer.perl -l `language` treats `word` (without its period) before
// a period. We list German, Spanish, French and English; other languages get
// English's list, as tokenizer.perl does for a language it has no file for
// (for one it has a file for, Italian say, an abbreviation may then differ).
NonbreakingPrefix nonbreaking_prefix(std::u32string_view word, std::string_view language);

}  // namespace sf::eval
