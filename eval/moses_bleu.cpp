#include "moses_bleu.h"

#include "eval/metrics.h"
#include "eval/moses_tokenizer.h"
#include "eval/sacrebleu.h"

namespace sf::eval {

double corpus_moses_bleu(const std::vector<std::string>& hypotheses, const std::vector<std::string>& references,
                         std::string_view language) {
  std::vector<Words> hyp_words, ref_words;
  for (const std::string& line : hypotheses) hyp_words.push_back(moses_lowercase_tokens(line, language));
  for (const std::string& line : references) ref_words.push_back(moses_lowercase_tokens(line, language));
  // multi-bleu.perl's formula is token BLEU's: no smoothing, the brevity
  // penalty when the hypotheses are shorter.
  return corpus_bleu(hyp_words, ref_words);
}

std::string moses_bleu_signature() { return sacrebleu_signature(Case::lowercase, "none", "none"); }

}  // namespace sf::eval
