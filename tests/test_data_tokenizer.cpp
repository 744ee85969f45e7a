// Pre-tokenisation as Python's re \w+|[^\w\s]+, the WordLevel tokenizer, and
// its Hugging Face tokenizers JSON (docs/10-formats.md).
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "data/pretokenizer.h"
#include "data/tokenizer.h"
#include "data/unicode.h"

using namespace sf;
using namespace sf::data;

namespace {

std::vector<std::string> words(std::string_view text) {
  std::vector<std::string> out;
  for (std::string_view word : pre_tokenize(text)) out.emplace_back(word);
  return out;
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("sf_data_" + std::to_string(getpid()) + "_" + name))
      .string();
}

// The corpus of the hand-written tokenizer below.
const std::vector<std::string_view> kFiveSentences = {
    "Il gatto è nero.", "L'uomo mangia il pane.", "Il cane è felice, perché mangia.",
    "Il gatto mangia il pane?", "Dov'è il cane?"};

}  // namespace

TEST_CASE("data: pre-tokenisation of Italian with accents, apostrophes and punctuation") {
  CHECK(words("l'uomo") == std::vector<std::string>{"l", "'", "uomo"});
  // Expected lists from Python: re.findall(r'\w+|[^\w\s]+', text).
  CHECK(words("Dell'Italia: c'è «un» caffè...perché no?!") ==
        std::vector<std::string>{"Dell", "'", "Italia", ":", "c", "'", "è", "«", "un", "»",
                                 "caffè", "...", "perché", "no", "?!"});
}

TEST_CASE("data: pre-tokenisation of German with umlauts, ß and punctuation") {
  CHECK(words("Über die Straße, bitte! Wir fahren heute nach München — oder?") ==
        std::vector<std::string>{"Über", "die", "Straße", ",", "bitte", "!", "Wir", "fahren",
                                 "heute", "nach", "München", "—", "oder", "?"});
}

TEST_CASE("data: Unicode word and space classes follow Python's re") {
  // Superscripts, fractions and Roman numerals are numeric (\w); a combining
  // accent is not (Python splits a decomposed "á"); NBSP, LINE SEPARATOR and
  // the FILE SEPARATOR control are \s; "_" is \w.
  CHECK(words("x²³ ½ Ⅻ 漢字 ٣ a\u0301b naïve_ok \u00a0y \u2028z \x1cq") ==
        std::vector<std::string>{"x²³", "½", "Ⅻ", "漢字", "٣", "a", "\u0301", "b", "naïve_ok", "y",
                                 "z", "q"});
  CHECK(words("   ").empty());
  CHECK(pre_tokenized_text("  Ciao,mondo!  ") == "Ciao , mondo !");
}

TEST_CASE("data: invalid UTF-8 is an error") {
  // Truncated, overlong, surrogate, beyond U+10FFFF, stray continuation byte.
  for (std::string bad : {"abc\xC3", "\xC0\xAF", "\xED\xA0\x80", "\xF4\x90\x80\x80", "a\x80"}) {
    CAPTURE(bad);
    CHECK(find_invalid_utf8(bad) != std::string::npos);
    CHECK_THROWS_AS(pre_tokenize(bad), InternalError);
  }
  CHECK(find_invalid_utf8("ok \xC3\xA8 \xF0\x9F\x98\x80") == std::string::npos);
  CHECK(decode_utf8("è😀") == std::u32string{0xE8, 0x1F600});
}

TEST_CASE("data: tokenizer JSON equals a hand-written Hugging Face file for 5 sentences") {
  // Counts: 3 for ".", "Il", "il", "mangia", "è"; 2 for "'", "?", "cane",
  // "gatto", "pane"; the rest once (dropped at min_frequency 2). Within a
  // count, byte order: "." < "Il" < "il" < "mangia" < "è" (0xC3...).
  nlohmann::json expected = nlohmann::json::parse(R"({
    "version": "1.0", "truncation": null, "padding": null,
    "added_tokens": [
      {"id": 0, "content": "[UNK]", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
      {"id": 1, "content": "[PAD]", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
      {"id": 2, "content": "[SOS]", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
      {"id": 3, "content": "[EOS]", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}],
    "normalizer": null, "pre_tokenizer": {"type": "Whitespace"}, "post_processor": null,
    "decoder": null,
    "model": {"type": "WordLevel",
              "vocab": {"[UNK]": 0, "[PAD]": 1, "[SOS]": 2, "[EOS]": 3,
                        ".": 4, "Il": 5, "il": 6, "mangia": 7, "è": 8,
                        "'": 9, "?": 10, "cane": 11, "gatto": 12, "pane": 13},
              "unk_token": "[UNK]"}})");
  Tokenizer tokenizer = Tokenizer::train(kFiveSentences, 2);
  CHECK(tokenizer.vocab_size() == 14);

  std::string path = temp_path("tokenizer_it.json");
  tokenizer.save(path);
  std::ifstream in(path);
  nlohmann::json saved = nlohmann::json::parse(in);
  CHECK(saved == expected);
  // The key order of the file is the one the Hugging Face tokenizers library writes.
  nlohmann::ordered_json written = tokenizer.to_json();
  std::vector<std::string> keys;
  for (const auto& [key, value] : written.items()) keys.push_back(key);
  CHECK(keys == std::vector<std::string>{"version", "truncation", "padding", "added_tokens",
                                         "normalizer", "pre_tokenizer", "post_processor",
                                         "decoder", "model"});

  // Loading gives the same tokenizer back.
  Tokenizer loaded = Tokenizer::load(path);
  CHECK(loaded.to_json() == tokenizer.to_json());
  std::filesystem::remove(path);
}

TEST_CASE("data: encode/decode round trip") {
  Tokenizer tokenizer = Tokenizer::train(kFiveSentences, 1);
  std::string text = "Il gatto mangia il pane, perché è nero.";
  std::vector<int32_t> ids = tokenizer.encode(text);
  CHECK(ids.size() == 10);
  CHECK(tokenizer.decode(ids) == pre_tokenized_text(text));
  CHECK(tokenizer.decode(ids) == "Il gatto mangia il pane , perché è nero .");

  // Unknown words become [UNK], which decode prints; [SOS], [EOS], [PAD] are dropped.
  std::vector<int32_t> unknown = tokenizer.encode("Il topo");
  CHECK(unknown == std::vector<int32_t>{tokenizer.token_to_id("Il"), kUnkId});
  std::vector<int32_t> framed = {kSosId, tokenizer.token_to_id("cane"), kUnkId, kEosId, kPadId};
  CHECK(tokenizer.decode(framed) == "cane [UNK]");
  CHECK_THROWS_AS(tokenizer.decode({999}), InternalError);
  // As in HF, special tokens written in the text are recognised as such.
  CHECK(tokenizer.encode("cane[PAD] [EOS]x") ==
        std::vector<int32_t>{tokenizer.token_to_id("cane"), kPadId, kEosId, kUnkId});
}

TEST_CASE("data: loading a foreign WordLevel file works; other models than WordLevel and BPE are an error") {
  // Written by hand, not by us: other vocabulary order, compact layout.
  nlohmann::json foreign = nlohmann::json::parse(R"({"version":"1.0","truncation":null,
    "padding":null,"added_tokens":[{"id":0,"content":"[UNK]","single_word":false,"lstrip":false,
    "rstrip":false,"normalized":false,"special":true}],"normalizer":null,
    "pre_tokenizer":{"type":"Whitespace"},"post_processor":null,"decoder":null,
    "model":{"type":"WordLevel","unk_token":"[UNK]","vocab":{"zebra":4,"[SOS]":2,"[UNK]":0,
    "[EOS]":3,"[PAD]":1,"ciao":5}}})");
  Tokenizer tokenizer = Tokenizer::from_json(foreign, "foreign.json");
  CHECK(tokenizer.vocab_size() == 6);
  CHECK(tokenizer.encode("ciao zebra!") == std::vector<int32_t>{5, 4, kUnkId});

  auto error_of = [](const nlohmann::json& json) {
    try {
      Tokenizer::from_json(json, "t.json");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  nlohmann::json unigram = foreign;
  unigram["model"]["type"] = "Unigram";
  CHECK(error_of(unigram) == "t.json: tokenizer model \"Unigram\" is not supported (only WordLevel and BPE)");
  nlohmann::json bert = foreign;
  bert["pre_tokenizer"] = {{"type", "BertPreTokenizer"}};
  CHECK(error_of(bert).starts_with("t.json: pre_tokenizer"));
  nlohmann::json lower = foreign;
  lower["normalizer"] = {{"type", "Lowercase"}};
  CHECK(error_of(lower) == "t.json: \"normalizer\" must be null");
  nlohmann::json gap = foreign;
  gap["model"]["vocab"]["ciao"] = 9;
  CHECK(error_of(gap).starts_with("t.json: vocabulary ids must be 0..5"));
  nlohmann::json swapped = foreign;
  swapped["model"]["vocab"]["[PAD]"] = 2;
  swapped["model"]["vocab"]["[SOS]"] = 1;
  CHECK(error_of(swapped) == "t.json: expected [PAD] at id 1");
  nlohmann::json wrong_type = foreign;
  wrong_type["model"]["vocab"] = 3;
  CHECK(error_of(wrong_type) == "t.json: model.vocab must be a non-empty object");

  std::string path = temp_path("not_json.json");
  std::ofstream(path) << "{\"version\": ";
  CHECK_THROWS_WITH_AS(Tokenizer::load(path), (path + ": not valid JSON").c_str(), Error);
  std::filesystem::remove(path);
}
