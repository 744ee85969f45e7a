// UTF-8 decoding and the two character classes the pre-tokeniser needs:
// "word" and "space" exactly as Python 3's `re` defines \w and \s on a str.
// The class tables are generated from Python itself (data/gen_unicode_tables.py).
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace sf::data {

// Decodes the code point starting at text[pos] and advances pos past it.
// Strict UTF-8 (RFC 3629): overlong forms, surrogates, code points above
// U+10FFFF and truncated sequences are errors: sf::InternalError naming the
// byte offset, since input is checked with find_invalid_utf8 where it is read.
char32_t next_code_point(std::string_view text, size_t& pos);

// The byte offset of the first invalid UTF-8 sequence, or npos when valid.
size_t find_invalid_utf8(std::string_view text);

std::u32string decode_utf8(std::string_view text);  // throws on invalid UTF-8

bool is_word_char(char32_t cp);   // Python re \w: str.isalnum() or '_'
bool is_space_char(char32_t cp);  // Python re \s: str.isspace()

// True when the text has nothing but \s characters (or nothing at all).
bool is_blank(std::string_view text);

// Appends the UTF-8 encoding of `cp` (a Unicode scalar value) to `out`.
void append_utf8(std::string& out, char32_t cp);

namespace detail {
struct CodePointRange {
  char32_t first, last;  // inclusive
};
extern const CodePointRange kWordRanges[];
extern const size_t kWordRanges_size;
extern const CodePointRange kSpaceRanges[];
extern const size_t kSpaceRanges_size;

// Whether `cp` lies in one of the `size` sorted, disjoint ranges of `table`.
bool in_ranges(char32_t cp, const CodePointRange* table, size_t size);
}  // namespace detail

}  // namespace sf::data
