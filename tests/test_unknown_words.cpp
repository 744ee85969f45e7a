// Unknown-word replacement (infer/unknown_words.h): the alignment worked by
// hand, then real sentences of both corpora whose rare words a made-up
// alignment must put back, then a trained model that copies names it has
// never seen through `translate`.
#include <doctest/doctest.h>

#include <fstream>

#include "cli_process.h"
#include "data/detokenizer.h"
#include "real_corpora.h"
#include "skip.h"
#include "eval/metrics.h"
#include "names_model.h"
#include "infer/unknown_words.h"
#include "train_helpers.h"

using namespace sf;
using namespace sf::infer;
using namespace sf::testing;

namespace {

// Cross-attention of one layer, [heads, queries, keys], from rows of weights
// (head by head, query by query).
AttentionWeights cross_layer(int64_t heads, int64_t queries, int64_t keys, std::vector<float> values) {
  REQUIRE(values.size() == static_cast<size_t>(heads * queries * keys));
  return {heads, queries, keys, std::move(values)};
}

// A record whose source is `words` framed, attending with one head from
// generated token j to source word alignment[j] (weight 0.6, the rest spread
// over every position, the [SOS] and [EOS] included).
AttentionRecord aligned_record(size_t words, const std::vector<size_t>& alignment) {
  AttentionRecord record;
  record.source.assign(words + 2, 5);
  int64_t keys = static_cast<int64_t>(words + 2), queries = static_cast<int64_t>(alignment.size());
  std::vector<float> values(queries * keys, 0.4f / static_cast<float>(keys));
  for (size_t j = 0; j < alignment.size(); ++j) values[j * keys + alignment[j] + 1] += 0.6f;
  record.cross.push_back(cross_layer(1, queries, keys, values));
  return record;
}

}  // namespace

TEST_CASE("unknown words: each [UNK] takes the source word of the largest mean weight over layers and heads") {
  // Source "the Zorblax sat": keys [SOS] the Zorblax sat [EOS].
  std::string source = "the Zorblax sat";
  std::vector<std::string_view> words = data::split_words(source);
  data::Tokenizer german = data::Tokenizer::train({"der saß"}, 1);
  int32_t der = german.token_to_id("der"), sass = german.token_to_id("saß");
  TokenIds output = {data::kUnkId, data::kUnkId, sass, data::kUnkId};
  AttentionRecord record;
  record.source = {data::kSosId, 10, data::kUnkId, 11, data::kEosId};
  record.target = {data::kSosId, data::kUnkId, data::kUnkId};  // three positions fed: token 3 has no row
  // Per layer and head, rows for generated tokens 0, 1, 2 over the 5 keys.
  // Token 0: mostly [EOS] and [SOS], which are not words: "the" (0.1) wins.
  // Token 1: three heads lean to "sat" (0.50 vs 0.45), one puts 0.95 on
  // "Zorblax": the mean (2.30 against 1.55) picks "Zorblax", a vote would not.
  // Token 2 ("saß", known) is left as it is.
  std::vector<float> lean_sat = {0, 0.05f, 0.45f, 0.50f, 0}, sure_zorblax = {0, 0, 0.95f, 0.05f, 0},
                     specials = {0.2f, 0.1f, 0, 0, 0.7f}, on_sat = {0, 0, 0, 1, 0};
  auto head = [&](const std::vector<float>& token1) {
    std::vector<float> rows = specials;
    rows.insert(rows.end(), token1.begin(), token1.end());
    rows.insert(rows.end(), on_sat.begin(), on_sat.end());
    return rows;
  };
  std::vector<float> layer0 = head(lean_sat), layer1 = head(lean_sat);
  std::vector<float> h1 = head(lean_sat), h1_sure = head(sure_zorblax);
  layer0.insert(layer0.end(), h1.begin(), h1.end());
  layer1.insert(layer1.end(), h1_sure.begin(), h1_sure.end());
  record.cross = {cross_layer(2, 3, 5, layer0), cross_layer(2, 3, 5, layer1)};

  CHECK(attended_source_words(record, output.size()) == std::vector<int64_t>{0, 1, 2, -1});
  CHECK(replace_unknown_words(output, record, words, german) == "the Zorblax saß [UNK]");
  // [PAD], [SOS] and [EOS] in an output print nothing, as in Tokenizer::decode;
  // the [UNK] is token 2, which attends to "sat".
  CHECK(replace_unknown_words({der, data::kPadId, data::kUnkId}, record, words, german) == "der sat");
  // A source without words has nothing to copy.
  AttentionRecord empty = aligned_record(0, {});
  CHECK(attended_source_words(empty, 2) == std::vector<int64_t>{-1, -1});
  CHECK(replace_unknown_words({data::kUnkId}, empty, {}, german) == "[UNK]");
}

TEST_CASE("unknown words: on real sentences of both corpora, an aligned copy gets every rare word back") {
  fs::path root = shared_data();
  if (!fs::is_directory(root)) SF_SKIP(("no real corpora at " + root.string()).c_str());
  for (std::string corpus : {"multi30k_en_de", "tatoeba_en_es"}) {
    CAPTURE(corpus);
    // The target side of the first 300 validation pairs; a vocabulary of the
    // words seen twice in the first 100 leaves most sentences with [UNK]s.
    std::vector<std::string> sentences;
    std::ifstream in(root / corpus / "valid.tsv");
    for (std::string line; sentences.size() < 300 && std::getline(in, line);)
      sentences.push_back(line.substr(line.find('\t') + 1));
    REQUIRE(sentences.size() == 300);
    std::vector<std::string_view> seen(sentences.begin(), sentences.begin() + 100);
    data::Tokenizer tokenizer = data::Tokenizer::train(seen, 2);
    int checked = 0, with_unknown = 0;
    for (const std::string& sentence : sentences) {
      if (data::detokenize(data::pre_tokenize(sentence)) != sentence) continue;  // spacing the pre-tokenizer loses
      ++checked;
      // The "translation" is the sentence itself, then its words reversed,
      // each attending to the source word it came from.
      std::vector<std::string_view> words = data::split_words(sentence);
      TokenIds copy = tokenizer.encode(sentence), reversed(copy.rbegin(), copy.rend());
      std::vector<size_t> identity(words.size()), mirror(words.size());
      for (size_t j = 0; j < words.size(); ++j) identity[j] = j, mirror[j] = words.size() - 1 - j;
      with_unknown += std::count(copy.begin(), copy.end(), data::kUnkId) > 0;
      CHECK(data::detokenize(replace_unknown_words(copy, aligned_record(words.size(), identity), words, tokenizer)) ==
            sentence);
      std::string reversed_spaced;
      for (auto word = words.rbegin(); word != words.rend(); ++word) {
        if (!reversed_spaced.empty()) reversed_spaced += ' ';
        reversed_spaced += *word;
      }
      CHECK(replace_unknown_words(reversed, aligned_record(words.size(), mirror), words, tokenizer) == reversed_spaced);
    }
    MESSAGE(corpus << ": " << with_unknown << " of " << checked << " sentences had unknown words, all restored");
    CHECK(checked >= 290);
    CHECK(with_unknown >= checked / 2);
  }
}

TEST_CASE("unknown words: a model trained to reverse sentences with names puts back names it never saw") {
  const NamesModel& model = names_model();
  const std::string held_out = read_file(model.valid);
  std::vector<std::string> sources, references;
  std::istringstream pairs(held_out);
  for (std::string line; std::getline(pairs, line);) {
    if (line.find("Quill") == std::string::npos) continue;  // the pairs with a name
    sources.push_back(line.substr(0, line.find('\t')));
    references.push_back(line.substr(line.find('\t') + 1));
  }
  REQUIRE(sources.size() == 20);
  std::string input, tsv;
  for (size_t i = 0; i < sources.size(); ++i) {
    input += sources[i] + "\n";
    tsv += sources[i] + "\t" + references[i] + "\n";
  }
  TempDir dir;
  std::ofstream(dir.path / "sources.txt") << input;
  std::ofstream(dir.path / "names.tsv") << tsv;
  std::string prefix = "cd '" + dir.path.string() + "' && '" + scratchformer_binary() +
                       "' translate --config " + model.config + " --set min_frequency=2 ";
  std::istringstream replaced(capture(prefix + "< sources.txt")), kept(capture(prefix + "--keep-unk < sources.txt"));
  int restored = 0;
  for (size_t i = 0; i < sources.size(); ++i) {
    std::string with_name, with_unk;
    REQUIRE(std::getline(replaced, with_name));
    REQUIRE(std::getline(kept, with_unk));
    CAPTURE(sources[i]);
    restored += with_name == references[i];
    // --keep-unk prints the same words but [UNK] where a source word went in.
    std::vector<std::string_view> words = data::split_words(with_name), unk_words = data::split_words(with_unk);
    REQUIRE(words.size() == unk_words.size());
    int unknown = 0;
    for (size_t k = 0; k < words.size(); ++k) {
      if (unk_words[k] == "[UNK]") ++unknown;
      else CHECK(unk_words[k] == words[k]);
    }
    CHECK(unknown == (with_name.find("Quill") != std::string::npos));
  }
  CHECK(reaches_bar("names restored in reversed sentences", restored / double(sources.size()), 0.8));
  // eval scores the tokens as the model wrote them, [UNK] and all: the lines
  // translate --tokens prints, not the ones with the names put back.
  std::vector<std::string> tokens = capture_lines(prefix + "--tokens < sources.txt");
  REQUIRE(tokens.size() == sources.size());
  CHECK(std::count_if(tokens.begin(), tokens.end(), [](const std::string& t) { return t.find("[UNK]") != std::string::npos; }) >= 16);
  std::string eval = prefix.substr(0, prefix.rfind("translate")) + "eval --config " + model.config + " --set min_frequency=2 --data names.tsv";
  auto scores = nlohmann::json::parse(capture(eval));
  CHECK(scores["bleu"].get<double>() == doctest::Approx(eval::score_translations(tokens, references, "reversed").at("bleu")));
}
