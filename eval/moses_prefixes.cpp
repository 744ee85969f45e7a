#include "moses_prefixes.h"

#include <algorithm>
#include <array>

namespace sf::eval {

namespace {

// Common abbreviations of each language, lowercase. Abbreviations with a
// period inside ("z.b.", "e.g.") need no entry: tokenizer.perl never splits a
// word that has a period and a letter before its last period. The test against
// tokenizer.perl on the real corpora (tests/sacrebleu_fixture.py) shows which
// ones matter there: German "ca.", and "nummer 10." in Multi30k's test2016.
constexpr std::array<std::u32string_view, 10> kGerman = {U"bzw", U"ca", U"etc", U"evtl", U"ggf",
                                                          U"sog", U"usw", U"vgl", U"vs", U"zzt"};
// Spanish keeps units whole too: "5 km." at the end of a sentence stays one word.
constexpr std::array<std::u32string_view, 15> kSpanish = {U"av",  U"cm", U"dcha", U"doc", U"ej",
                                                           U"etc", U"izq", U"kg",  U"km",  U"mg",
                                                           U"mm",  U"núm", U"pág", U"págs", U"vol"};
constexpr std::array<std::u32string_view, 3> kEnglish = {U"rev", U"v", U"vs"};
// "sec" (seconde, section) stays whole even where it is the adjective "dry"
// ending a sentence ("un grand ravin sec."), as Moses keeps it: a line of
// Multi30k's French training data.
constexpr std::array<std::u32string_view, 12> kFrench = {U"art", U"av",  U"ca",  U"cf",  U"chap", U"env",
                                                          U"etc", U"ex", U"fig", U"sec", U"vol", U"vs"};

template <size_t N>
bool listed(const std::array<std::u32string_view, N>& list, std::u32string_view word) {
  return std::find(list.begin(), list.end(), word) != list.end();
}

bool is_single_letter(std::u32string_view word) { return word.size() == 1 && word[0] >= 'a' && word[0] <= 'z'; }

// German writes ordinals with a period ("am 3. mai", "nummer 10."); Moses
// keeps one- and two-digit numbers whole before a period, larger ones (a year
// at the end of a sentence) not.
bool is_small_number(std::u32string_view word) {
  return !word.empty() && word.size() <= 2 && word[0] != '0' &&
         std::all_of(word.begin(), word.end(), [](char32_t c) { return c >= '0' && c <= '9'; });
}

}  // namespace

NonbreakingPrefix nonbreaking_prefix(std::u32string_view word, std::string_view language) {
  using enum NonbreakingPrefix;
  if (language == "de")
    // Single letters: initials, and "linie a." (so a sentence ending in one
    // keeps its period on it, as Moses does).
    return is_single_letter(word) || is_small_number(word) || listed(kGerman, word) ? always : none;
  if (language == "es")
    // "c." and "s." (calle, siglo, san) besides the list.
    return word == U"c" || word == U"p" || word == U"s" || listed(kSpanish, word) ? always : none;
  if (language == "fr")
    // Initials, but not "a", which is a French word ("il y a.").
    return (is_single_letter(word) && word != U"a") || listed(kFrench, word) ? always : none;
  if (word == U"pp") return before_number;  // "pp. 12-14"
  return listed(kEnglish, word) ? always : none;
}

}  // namespace sf::eval
