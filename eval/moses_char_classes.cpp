#include "moses_char_classes.h"

namespace sf::eval {

using data::detail::in_ranges;

bool is_perl_alpha(char32_t cp) { return in_ranges(cp, detail::kPerlAlphaRanges, detail::kPerlAlphaRanges_size); }
bool is_perl_alnum(char32_t cp) {
  return is_perl_alpha(cp) || in_ranges(cp, detail::kPerlDigitRanges, detail::kPerlDigitRanges_size);
}
bool is_perl_number(char32_t cp) { return in_ranges(cp, detail::kPerlNumberRanges, detail::kPerlNumberRanges_size); }
bool is_perl_lower(char32_t cp) { return in_ranges(cp, detail::kPerlLowerRanges, detail::kPerlLowerRanges_size); }
bool is_perl_space(char32_t cp) { return in_ranges(cp, detail::kPerlSpaceRanges, detail::kPerlSpaceRanges_size); }

}  // namespace sf::eval
