// The character classes of Moses' tokenizer.perl, as Perl defines them on
// character strings: \p{IsAlnum}, \p{IsAlpha}, \p{IsN} (any number: digits,
// Roman numeral letters, fractions), \p{IsLower} and \s. The tables are
// generated from Perl itself (eval/gen_moses_char_tables.pl).
#pragma once
#include <cstddef>

#include "data/unicode.h"

namespace sf::eval {

bool is_perl_alpha(char32_t cp);   // \p{IsAlpha}: Unicode's Alphabetic
bool is_perl_alnum(char32_t cp);   // \p{IsAlnum}: Alphabetic or a decimal digit
bool is_perl_number(char32_t cp);  // \p{IsN}: general category N
bool is_perl_lower(char32_t cp);   // \p{IsLower}: Unicode's Lowercase
bool is_perl_space(char32_t cp);   // \s: Unicode's White_Space

namespace detail {
extern const data::detail::CodePointRange kPerlAlphaRanges[], kPerlDigitRanges[], kPerlNumberRanges[],
    kPerlLowerRanges[], kPerlSpaceRanges[];
extern const size_t kPerlAlphaRanges_size, kPerlDigitRanges_size, kPerlNumberRanges_size, kPerlLowerRanges_size,
    kPerlSpaceRanges_size;
}  // namespace detail

}  // namespace sf::eval
