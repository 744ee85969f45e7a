// The tokenization of the Multi30k papers' BLEU. Their data are Multi30k's
// "lc.norm.tok" files, made by multi30k/dataset's scripts/task1-tokenize.sh
// with Moses' scripts (snapshot moses-3a0631a):
//   lowercase.perl | normalize-punctuation.perl -l LANG | tokenizer.perl -l LANG
// and their BLEU is multi-bleu.perl's on those whitespace tokens. These
// functions apply the same rules, written here from the scripts' rules;
// tests/test_moses_tokenizer.cpp compares them with the scripts themselves,
// token for token, on real sentences.
#pragma once
#include <string>
#include <string_view>

#include "eval/metrics.h"

namespace sf::eval {

// normalize-punctuation.perl -l `language` on one line (valid UTF-8, no
// newline): spaces around brackets and before : ; % tidied, typographic
// quotes, dashes, apostrophes and ellipses made ASCII, French guillemets and
// no-break spaces removed, a quote moved past a comma or period (English) or
// in front of it (other languages), and a space between digits made the
// language's thousands separator.
std::string moses_normalize_punctuation(std::string_view line, std::string_view language);

// The tokens tokenizer.perl -l `language` writes for one line (valid UTF-8),
// with its default escaping (& | < > ' " [ ] as &amp; &#124; &lt; &gt; &apos;
// &quot; &#91; &#93;). The nonbreaking prefixes are ours (moses_prefixes.h).
// One difference by construction: tokenizer.perl marks runs of dots with the
// word DOTMULTI, so it also rewrites that word where the input has it in
// capitals; lowercased input never does.
Words moses_tokenize(std::string_view line, std::string_view language);

// A line as the Multi30k papers' files have it: lowercased (Perl's lc),
// normalized, tokenized.
Words moses_lowercase_tokens(std::string_view line, std::string_view language);

}  // namespace sf::eval
