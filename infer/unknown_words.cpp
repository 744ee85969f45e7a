#include "unknown_words.h"

#include <algorithm>

#include "base/error.h"

namespace sf::infer {

std::vector<int64_t> attended_source_words(const AttentionRecord& record, size_t generated) {
  std::vector<int64_t> best(generated, -1);
  // The framed source is [SOS] w_0 ... w_{n-1} [EOS]: word i sits at key i + 1.
  int64_t words = static_cast<int64_t>(record.source.size()) - 2;
  if (words <= 0 || record.cross.empty()) return best;
  for (const AttentionWeights& layer : record.cross)
    if (layer.keys != words + 2) internal_fail("cross-attention over ", layer.keys, " keys, expected ", words + 2);
  // Decoder position j (its input: [SOS] for j = 0, else generated token j - 1)
  // is the one that predicts generated token j.
  for (size_t j = 0; j < generated; ++j) {
    if (static_cast<int64_t>(j) >= record.cross[0].queries) break;
    std::vector<double> sum(words, 0.0);
    for (const AttentionWeights& layer : record.cross) {
      for (int64_t h = 0; h < layer.heads; ++h) {
        const float* row = layer.values.data() + (h * layer.queries + static_cast<int64_t>(j)) * layer.keys;
        for (int64_t i = 0; i < words; ++i) sum[i] += row[i + 1];
      }
    }
    int64_t argmax = 0;
    for (int64_t i = 1; i < words; ++i)
      if (sum[i] > sum[argmax]) argmax = i;
    best[j] = argmax;
  }
  return best;
}

std::string replace_unknown_words(const TokenIds& output, const AttentionRecord& record,
                                  const std::vector<std::string_view>& source_words,
                                  const data::Tokenizer& target_tokenizer) {
  if (record.source.size() != source_words.size() + 2)
    internal_fail("a record of ", record.source.size(), " source positions for ", source_words.size(), " words");
  if (std::find(output.begin(), output.end(), data::kUnkId) == output.end()) return target_tokenizer.decode(output);
  std::vector<int64_t> attended = attended_source_words(record, output.size());
  std::vector<std::string_view> replacements(output.size());
  for (size_t j = 0; j < output.size(); ++j)
    if (attended[j] >= 0) replacements[j] = source_words[attended[j]];
  return target_tokenizer.decode(output, replacements);
}

}  // namespace sf::infer
