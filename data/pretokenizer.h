// Pre-tokenisation: the Hugging Face `Whitespace` pre-tokenizer, i.e.
// the matches of the regex \w+|[^\w\s]+ with Python 3's Unicode \w and \s.
// No normalisation: case and accents are kept. "l'uomo" -> l ' uomo;
// "perché?!" -> perché ?!
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace sf::data {

// The words of `text`, as views into it: maximal runs of word characters and
// maximal runs of other non-space characters; spaces only separate.
// Throws sf::InternalError on invalid UTF-8 (callers validate input first).
std::vector<std::string_view> pre_tokenize(std::string_view text);

// The words joined by single spaces: how metrics see a sentence (BLEU, chrF,
// CER and WER all compare these strings).
std::string pre_tokenized_text(std::string_view text);

// The same split as an Oniguruma regex whose matches are the words, for Hugging
// Face's Split pre-tokenizer: \w+|[^\w\s]+ with Python's classes spelled out
// as code-point ranges. HF's own Whitespace pre-tokenizer uses Oniguruma's \w
// and \s, which differ from Python's on a few characters: "CO₂" is one word
// here ("₂" is alphanumeric to Python) but "CO" "₂" there.
std::string pre_tokenizer_regex();

}  // namespace sf::data
