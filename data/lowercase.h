// Lowercasing as the lowercased BLEU conventions do it: sacreBLEU's
// `--lowercase` calls Python's str.lower(), the Multi30k papers' data went
// through Moses' lowercase.perl, Perl's lc(). Both apply Unicode's full
// lowercase mapping (U+0130 İ becomes "i" + U+0307); they differ only in the
// capital sigma: Python writes the final form ς at the end of a word, Perl
// always σ.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "data/unicode.h"

namespace sf::data {

// Whether a capital sigma at the end of a word becomes ς (str.lower()) or σ
// (Perl's lc()).
enum class FinalSigma { python, perl };

// `text` (valid UTF-8) lowercased, code point by code point, with Unicode 14's
// mapping as Python 3.11 and Perl 5.36 have it.
std::string lowercase(std::string_view text, FinalSigma sigma);

namespace detail {
// Code points first, first + stride, ..., last lowercase to themselves + delta.
struct LowercaseRun {
  char32_t first, last;
  uint8_t stride;
  int32_t delta;
};
extern const LowercaseRun kLowercaseRuns[];
extern const size_t kLowercaseRuns_size;
// The classes str.lower()'s final-sigma rule reads (Unicode's Cased and
// Case_Ignorable, as Python answers; a code point that is both counts as
// ignorable, since Python skips it first).
extern const CodePointRange kCasedRanges[];
extern const size_t kCasedRanges_size;
extern const CodePointRange kCaseIgnorableRanges[];
extern const size_t kCaseIgnorableRanges_size;
}  // namespace detail

}  // namespace sf::data
