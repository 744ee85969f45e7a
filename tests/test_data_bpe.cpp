// The BPE tokenizer (data/bpe.h): training on the paper's example, encoding
// by merge rank, exact decoding, its Hugging Face tokenizers JSON and the
// errors of bad files.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "data/pipeline.h"
#include "data/pretokenizer.h"
#include "data/tokenizer.h"

using namespace sf;
using namespace sf::data;

namespace {

using Merges = std::vector<std::pair<std::string, std::string>>;

// Sennrich et al. 2016, Figure 1: low x5, lower x2, newest x6, widest x3.
std::vector<std::string_view> paper_corpus() {
  std::vector<std::string_view> texts;
  for (auto [word, count] : {std::pair{"low", 5}, {"lower", 2}, {"newest", 6}, {"widest", 3}})
    texts.insert(texts.end(), count, word);
  return texts;
}

std::vector<std::string> pieces(const Tokenizer& tokenizer, std::string_view text) {
  std::vector<std::string> out;
  for (int32_t id : tokenizer.encode(text)) out.push_back(tokenizer.id_to_token(id));
  return out;
}

Merges merges_of(const Tokenizer& tokenizer) {
  Merges out;
  nlohmann::ordered_json json = tokenizer.to_json();
  for (const nlohmann::ordered_json& merge : json["model"]["merges"])
    out.emplace_back(merge[0].get<std::string>(), merge[1].get<std::string>());
  return out;
}

const std::vector<std::string_view> kSentences = {
    "Il gatto è nero.", "L'uomo mangia il pane.", "Il cane è felice, perché mangia.",
    "Il gatto mangia il pane?", "Dov'è il cane?"};

std::string error_of(const nlohmann::json& json) {
  try {
    Tokenizer::from_json(json, "t.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("data: BPE learns the paper's merges by hand on low/lower/newest/widest") {
  // Ids: 0-3 the specials, 4-13 d e i l n o r s t w, 14-23 the same with
  // "</w>", then one per merge. Pair counts: e s 9 and s t</w> 9 tie, and the
  // smaller ids win: (5, 11) < (11, 22). Then es t</w> 9, l o 7, and three 6s:
  // e w (5, 13) < n e (8, 5) < w est</w> (13, 25), left id first; then
  // n ew 6, new est</w> 6, lo w</w> 5, and widest's 3s: d est</w> (4, 25),
  // i dest</w> (6, 31) and w idest</w>. docs/08-data.md shows this table.
  Tokenizer bpe = Tokenizer::train_bpe(paper_corpus(), 24 + 10);
  CHECK(bpe.vocab_size() == 34);
  CHECK(merges_of(bpe) == Merges{{"e", "s"},   {"es", "t</w>"},  {"l", "o"},      {"e", "w"},
                                 {"n", "ew"},  {"new", "est</w>"}, {"lo", "w</w>"}, {"d", "est</w>"},
                                 {"i", "dest</w>"}, {"w", "idest</w>"}});
  CHECK(bpe.id_to_token(4) == "d");
  CHECK(bpe.id_to_token(14) == "d</w>");
  CHECK(bpe.id_to_token(33) == "widest</w>");

  // Every training word is one token; an unseen word takes the merges by rank.
  for (std::string_view word : {"low", "newest", "widest"}) CHECK(bpe.encode(word).size() == 1);
  CHECK(pieces(bpe, "lower") == std::vector<std::string>{"lo", "w", "e", "r</w>"});
  CHECK(pieces(bpe, "lowest") == std::vector<std::string>{"lo", "w", "est</w>"});
  CHECK(pieces(bpe, "newer") == std::vector<std::string>{"new", "e", "r</w>"});
  CHECK(bpe.decode(bpe.encode("lowest newer low")) == "lowest newer low");

  // vocab_size below the specials and the alphabet: the alphabet alone.
  Tokenizer small = Tokenizer::train_bpe(paper_corpus(), 5);
  CHECK(small.vocab_size() == 24);
  CHECK(merges_of(small).empty());
}

TEST_CASE("data: BPE round trips, never [UNK] for seen characters, and marks unseen ones") {
  for (int64_t vocab_size : {40, 80, 200}) {
    CAPTURE(vocab_size);
    Tokenizer bpe = Tokenizer::train_bpe(kSentences, vocab_size);
    // Words never seen, of seen characters, in any position.
    for (std::string_view text : {"Il gatto mangia il pane, perché è nero.", "Dov'è l'uomo felice?",
                                  "nè pane, cane.", "è", "?.", "Lionero"}) {
      CAPTURE(text);
      std::vector<int32_t> ids = bpe.encode(text);
      CHECK(std::find(ids.begin(), ids.end(), kUnkId) == ids.end());
      CHECK(bpe.decode(ids) == pre_tokenized_text(text));
      // One text per id, covering each word in order.
      std::vector<std::string_view> texts = bpe.token_texts(text);
      REQUIRE(texts.size() == ids.size());
      std::string joined;
      for (std::string_view part : texts) joined += part;
      std::string words;
      for (std::string_view word : pre_tokenize(text)) words += word;
      CHECK(joined == words);
    }
  }
  Tokenizer bpe = Tokenizer::train_bpe(kSentences, 60);
  // "z" and "ü" were never seen: one [UNK] each, inside their word.
  std::vector<int32_t> ids = bpe.encode("zio üne");
  CHECK(std::count(ids.begin(), ids.end(), kUnkId) == 2);
  CHECK(bpe.decode(ids) == "[UNK]io [UNK]ne");
  // Special tokens in the text, and [SOS] [EOS] [PAD] dropped by decode.
  CHECK(bpe.encode("cane[EOS]")[bpe.encode("cane[EOS]").size() - 1] == kEosId);
  std::vector<int32_t> framed = bpe.encode("il cane");
  framed.insert(framed.begin(), kSosId);
  framed.push_back(kEosId);
  framed.push_back(kPadId);
  CHECK(bpe.decode(framed) == "il cane");
  // A translation cut before its last word's end still shows that word.
  std::vector<int32_t> cut = bpe.encode("gatto");
  cut.push_back(bpe.token_to_id("c"));
  CHECK(bpe.decode(cut) == "gatto c");
  // [UNK] replaced by a given text (translate's unknown-word replacement).
  std::vector<std::string_view> replacements = {"zz", "", ""};
  CHECK(bpe.decode({kUnkId, bpe.token_to_id("i"), bpe.token_to_id("o</w>")}, replacements) == "zzio");
}

TEST_CASE("data: BPE training is deterministic and independent of the sentence order") {
  Tokenizer first = Tokenizer::train_bpe(kSentences, 70);
  std::vector<std::string_view> reversed(kSentences.rbegin(), kSentences.rend());
  CHECK(Tokenizer::train_bpe(kSentences, 70).to_json() == first.to_json());
  CHECK(Tokenizer::train_bpe(reversed, 70).to_json() == first.to_json());
}

TEST_CASE("data: a BPE tokenizer file round trips in Hugging Face's format") {
  Tokenizer bpe = Tokenizer::train_bpe(kSentences, 60);
  nlohmann::ordered_json json = bpe.to_json();
  CHECK(json["model"]["type"] == "BPE");
  CHECK(json["model"]["end_of_word_suffix"] == "</w>");
  CHECK(json["decoder"] == nlohmann::ordered_json{{"type", "BPEDecoder"}, {"suffix", "</w>"}});
  // Python's \w+|[^\w\s]+ as HF's Split: "₂" is a word character, as in "CO₂".
  CHECK(json["pre_tokenizer"]["type"] == "Split");
  CHECK(json["pre_tokenizer"]["pattern"]["Regex"].get<std::string>().starts_with("[\\x{30}-\\x{39}\\x{41}-\\x{5A}"));
  CHECK(json["pre_tokenizer"]["invert"] == true);
  std::vector<std::string> keys;
  for (const auto& [key, value] : json["model"].items()) keys.push_back(key);
  CHECK(keys == std::vector<std::string>{"type", "dropout", "unk_token", "continuing_subword_prefix",
                                         "end_of_word_suffix", "fuse_unk", "byte_fallback", "ignore_merges",
                                         "vocab", "merges"});

  std::string path = (std::filesystem::temp_directory_path() / ("sf_bpe_" + std::to_string(getpid()) + ".json"));
  bpe.save(path);
  Tokenizer loaded = Tokenizer::load(path);
  std::filesystem::remove(path);
  CHECK(loaded.is_bpe());
  CHECK(loaded.to_json() == json);
  std::string text = "Il gatto felice mangia, perché?";
  CHECK(loaded.encode(text) == bpe.encode(text));

  // Merges as "left right" strings (HF before 0.20) read the same.
  nlohmann::json older = json;
  for (nlohmann::json& merge : older["model"]["merges"])
    merge = merge[0].get<std::string>() + " " + merge[1].get<std::string>();
  CHECK(Tokenizer::from_json(older, "older.json").to_json() == json);
}

TEST_CASE("data: bad BPE files are one-line errors") {
  nlohmann::json good = Tokenizer::train_bpe(paper_corpus(), 34).to_json();
  auto with = [&](auto change) {
    nlohmann::json json = good;
    change(json);
    return error_of(json);
  };
  CHECK(with([](nlohmann::json& j) { j["model"]["merges"][0] = "es"; }) ==
        "t.json: merge 0 is \"es\", not \"left right\" or [left, right]");
  CHECK(with([](nlohmann::json& j) { j["model"]["merges"][1] = 7; }) ==
        "t.json: merge 1 is 7, not \"left right\" or [left, right]");
  CHECK(with([](nlohmann::json& j) { j["model"]["merges"][2] = {"l"}; }) ==
        "t.json: merge 2 is [\"l\"], not \"left right\" or [left, right]");
  CHECK(with([](nlohmann::json& j) { j["model"]["merges"] = "e s"; }) == "t.json: model.merges must be an array");
  CHECK(with([](nlohmann::json& j) { j["model"]["merges"][0] = {"e", "q"}; }) ==
        "t.json: merge 0 (\"e q\"): \"eq\" is not in the vocabulary");
  CHECK(with([](nlohmann::json& j) { j["model"]["merges"].push_back({"o", "d"}); }) ==
        "t.json: merge 10 (\"o d\"): \"od\" is not in the vocabulary");
  CHECK(with([](nlohmann::json& j) { j["model"]["type"] = "WordPiece"; }) ==
        "t.json: tokenizer model \"WordPiece\" is not supported (only WordLevel and BPE)");
  CHECK(with([](nlohmann::json& j) { j["model"]["end_of_word_suffix"] = "@@"; }) ==
        "t.json: model.end_of_word_suffix must be \"</w>\", got \"@@\"");
  CHECK(with([](nlohmann::json& j) { j["model"]["fuse_unk"] = true; }) ==
        "t.json: model.fuse_unk must be false, got true");
  CHECK(with([](nlohmann::json& j) { j["model"]["dropout"] = 0.1; }) ==
        "t.json: model.dropout must be null, got 0.1");
  CHECK(with([](nlohmann::json& j) { j["pre_tokenizer"] = {{"type", "Whitespace"}}; }) ==
        "t.json: pre_tokenizer Whitespace is not supported (only the Split of Python's \\w+|[^\\w\\s]+ that we "
        "write)");
  CHECK(with([](nlohmann::json& j) { j["decoder"] = nullptr; }) ==
        "t.json: decoder null is not supported (only {\"type\": \"BPEDecoder\", \"suffix\": \"</w>\"})");
  CHECK(with([](nlohmann::json& j) { j["model"]["vocab"]["lo"] = "x"; }).starts_with("t.json: vocabulary ids"));
}

TEST_CASE("data: a shared BPE vocabulary is learnt from both sides") {
  std::vector<Pair> pairs = {{"the black cat", "il gatto nero", "#0"}, {"the dog", "il cane", "#1"}};
  TokenizerOptions shared{.kind = "bpe", .vocab_size = 60, .shared_vocab = true};
  Tokenizer src = build_tokenizer(pairs, Side::Source, shared);
  Tokenizer tgt = build_tokenizer(pairs, Side::Target, shared);
  CHECK(src.to_json() == tgt.to_json());
  CHECK(src.encode("nero") == tgt.encode("nero"));
  TokenizerOptions separate = shared;
  separate.shared_vocab = false;
  Tokenizer en = build_tokenizer(pairs, Side::Source, separate);
  std::vector<int32_t> ids = en.encode("nero");
  CHECK(std::find(ids.begin(), ids.end(), kUnkId) != ids.end());  // no "n" in English
}
