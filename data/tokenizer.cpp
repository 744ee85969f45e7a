#include "tokenizer.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "base/atomic_file.h"
#include "base/error.h"
#include "base/sha256.h"
#include "pretokenizer.h"

namespace sf::data {

Tokenizer::Tokenizer(std::vector<std::string> tokens, std::shared_ptr<const BpeModel> bpe)
    : tokens_(std::move(tokens)), bpe_(std::move(bpe)) {
  for (size_t id = 0; id < tokens_.size(); ++id) ids_.emplace(tokens_[id], static_cast<int32_t>(id));
}

namespace {

// The pre-tokenised words of `texts` with their counts, as views into them.
std::unordered_map<std::string_view, int64_t> count_words(const std::vector<std::string_view>& texts) {
  std::unordered_map<std::string_view, int64_t> counts;
  for (std::string_view text : texts)
    for (std::string_view word : pre_tokenize(text)) ++counts[word];
  return counts;
}

}  // namespace

Tokenizer Tokenizer::train(const std::vector<std::string_view>& texts, int64_t min_frequency) {
  std::vector<std::pair<std::string_view, int64_t>> kept;
  for (const auto& [word, count] : count_words(texts))
    if (count >= min_frequency) kept.emplace_back(word, count);
  std::sort(kept.begin(), kept.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });

  std::vector<std::string> tokens(kSpecialTokens.begin(), kSpecialTokens.end());
  for (const auto& [word, count] : kept)
    // The pre-tokeniser never yields "[PAD]" (brackets split off), so a word
    // cannot collide with a special token.
    tokens.emplace_back(word);
  return Tokenizer(std::move(tokens));
}

Tokenizer Tokenizer::train_bpe(const std::vector<std::string_view>& texts, int64_t vocab_size) {
  std::unordered_map<std::string_view, int64_t> counts = count_words(texts);
  // train_bpe's result depends on the counts only, not on this order.
  std::vector<std::pair<std::string_view, int64_t>> words(counts.begin(), counts.end());
  BpeVocabulary vocab =
      data::train_bpe(words, std::vector<std::string>(kSpecialTokens.begin(), kSpecialTokens.end()), vocab_size);
  auto model = std::make_shared<const BpeModel>(vocab.tokens, std::move(vocab.merges), kUnkId, "train_bpe");
  return Tokenizer(std::move(vocab.tokens), std::move(model));
}

namespace {

// The merges of a BPE file: "left right" strings (HF before 0.20) or
// [left, right] arrays (since), by rank.
std::vector<std::pair<std::string, std::string>> read_merges(const nlohmann::json& merges, const std::string& source) {
  if (!merges.is_array()) fail(source, ": model.merges must be an array");
  std::vector<std::pair<std::string, std::string>> out;
  for (const nlohmann::json& merge : merges) {
    if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
      out.emplace_back(merge[0].get<std::string>(), merge[1].get<std::string>());
      continue;
    }
    std::string text = merge.is_string() ? merge.get<std::string>() : "";
    size_t space = text.find(' ');
    if (space == std::string::npos || space == 0 || space + 1 == text.size() ||
        text.find(' ', space + 1) != std::string::npos)
      fail(source, ": merge ", out.size(), " is ", merge.dump(), ", not \"left right\" or [left, right]");
    out.emplace_back(text.substr(0, space), text.substr(space + 1));
  }
  return out;
}

// A BPE file's pre-tokenizer: ours as HF's Split (pretokenizer.h says why not
// its Whitespace). `invert`: the matches are the words, the rest is dropped.
nlohmann::ordered_json bpe_pre_tokenizer() {
  return {{"type", "Split"}, {"pattern", {{"Regex", pre_tokenizer_regex()}}}, {"behavior", "Removed"}, {"invert", true}};
}

// The BPE model settings we write; a file with any other would encode differently.
void check_bpe_settings(const nlohmann::json& json, const nlohmann::json& model, const std::string& source) {
  const nlohmann::json expected = {{"dropout", nullptr},          {"continuing_subword_prefix", nullptr},
                                   {"end_of_word_suffix", kEndOfWordSuffix}, {"fuse_unk", false},
                                   {"byte_fallback", false},      {"ignore_merges", false}};
  for (const auto& [key, value] : expected.items())
    if (model.contains(key) && model[key] != value)
      fail(source, ": model.", key, " must be ", value.dump(), ", got ", model[key].dump());
  if (!model.contains("end_of_word_suffix")) fail(source, ": model.end_of_word_suffix must be \"</w>\"");
  nlohmann::json decoder = json.value("decoder", nlohmann::json());
  if (decoder != nlohmann::json{{"type", "BPEDecoder"}, {"suffix", kEndOfWordSuffix}})
    fail(source, ": decoder ", decoder.dump(), " is not supported (only {\"type\": \"BPEDecoder\", \"suffix\": \"</w>\"})");
}

}  // namespace

// A function-try-block: a field of the wrong JSON type anywhere below becomes
// the same one-line error as the explicit checks.
Tokenizer Tokenizer::from_json(const nlohmann::json& json, const std::string& source) try {
  auto bad = [&](const auto&... what) { fail(source, ": ", what...); };
  if (!json.is_object()) bad("not a tokenizer (expected a JSON object)");
  const nlohmann::json& model = json.value("model", nlohmann::json());
  std::string type = model.is_object() ? model.value("type", "") : "";
  if (type != "WordLevel" && type != "BPE")
    bad("tokenizer model \"", type, "\" is not supported (only WordLevel and BPE)");
  nlohmann::json pre = json.value("pre_tokenizer", nlohmann::json());
  if (type == "WordLevel" && (!pre.is_object() || pre.value("type", "") != "Whitespace"))
    bad("pre_tokenizer ", pre.dump(), " is not supported (only {\"type\": \"Whitespace\"})");
  if (type == "BPE" && pre != nlohmann::json(bpe_pre_tokenizer()))
    bad("pre_tokenizer ", pre.is_object() ? pre.value("type", "") : pre.dump(),
        " is not supported (only the Split of Python's \\w+|[^\\w\\s]+ that we write)");
  // Anything else that would change the ids or the text is not implemented.
  for (const char* key : {"normalizer", "post_processor", "truncation", "padding"})
    if (json.contains(key) && !json[key].is_null()) bad("\"", key, "\" must be null");
  if (type == "BPE") check_bpe_settings(json, model, source);
  else if (json.contains("decoder") && !json["decoder"].is_null()) bad("\"decoder\" must be null");

  const nlohmann::json& vocab = model.value("vocab", nlohmann::json());
  if (!vocab.is_object() || vocab.empty()) bad("model.vocab must be a non-empty object");
  std::vector<std::string> tokens(vocab.size());
  std::vector<bool> seen(vocab.size(), false);
  for (const auto& [token, id] : vocab.items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
        id.get<int64_t>() >= static_cast<int64_t>(vocab.size()) || seen[id.get<size_t>()])
      bad("vocabulary ids must be 0..", vocab.size() - 1, " each once; \"", token, "\" has ",
          id.dump());
    seen[id.get<size_t>()] = true;
    tokens[id.get<size_t>()] = token;
  }
  if (model.value("unk_token", "") != kSpecialTokens[kUnkId])
    bad("model.unk_token must be \"[UNK]\"");
  // The model code relies on these ids ([PAD] = 1 in the masks and the loss).
  for (int32_t id = 0; id < static_cast<int32_t>(kSpecialTokens.size()); ++id)
    if (tokens.size() <= static_cast<size_t>(id) || tokens[id] != kSpecialTokens[id])
      bad("expected ", kSpecialTokens[id], " at id ", id);
  // encode() recognises exactly the four special tokens in raw text.
  for (const nlohmann::json& added : json.value("added_tokens", nlohmann::json::array())) {
    std::string content = added.value("content", "");
    // Only a JSON integer is an id (as an int32, 2.5 would read as 2 and 2^32 as 0).
    int64_t id = -1;
    if (added.contains("id") && added.at("id").is_number_integer()) id = added.at("id").get<int64_t>();
    if (id < 0 || id >= static_cast<int64_t>(kSpecialTokens.size()) || kSpecialTokens[id] != content)
      bad("added token \"", content, "\" (id ", id, ") is not supported (only the four specials)");
  }
  std::optional<Origin> origin;
  if (model.contains("built_from")) {
    const nlohmann::json& from = model["built_from"];
    if (!from.is_object() || !from.value("pairs", nlohmann::json()).is_number_unsigned() ||
        !from.value("settings", nlohmann::json()).is_string() || !from.value("digest", nlohmann::json()).is_string())
      bad("model.built_from must be {\"pairs\": N, \"settings\": \"...\", \"digest\": \"...\"}, got ", from.dump());
    origin = Origin{from["pairs"].get<int64_t>(), from["settings"], from["digest"]};
  }
  std::shared_ptr<const BpeModel> bpe;
  if (type == "BPE")
    bpe = std::make_shared<const BpeModel>(tokens, read_merges(model.value("merges", nlohmann::json()), source), kUnkId,
                                           source);
  Tokenizer tokenizer(std::move(tokens), std::move(bpe));
  tokenizer.origin_ = std::move(origin);
  return tokenizer;
} catch (const nlohmann::json::exception& e) {
  fail(source, ": not a WordLevel or BPE tokenizer: ", plain_message(e));
}

Tokenizer Tokenizer::load(const std::string& path, std::string* sha256) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) fail(path, ": is a folder, not a tokenizer file");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, ": cannot open tokenizer file");
  std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (in.bad()) fail(path, ": cannot read tokenizer file");
  if (sha256) *sha256 = sha256_hex(text);
  nlohmann::json json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) fail(path, ": not valid JSON");
  return from_json(json, path);
}

nlohmann::ordered_json Tokenizer::to_json() const {
  using ojson = nlohmann::ordered_json;
  ojson added = ojson::array();
  for (int32_t id = 0; id < static_cast<int32_t>(kSpecialTokens.size()); ++id)
    added.push_back({{"id", id},
                     {"content", kSpecialTokens[id]},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});
  ojson vocab = ojson::object();
  for (size_t id = 0; id < tokens_.size(); ++id) vocab[tokens_[id]] = id;
  ojson model = {{"type", "WordLevel"}, {"vocab", vocab}, {"unk_token", kSpecialTokens[kUnkId]}};
  ojson decoder = nullptr;
  ojson pre_tokenizer = {{"type", "Whitespace"}};
  if (bpe_) {
    // The fields and their order as HF 0.20+ writes a BPE model.
    ojson merges = ojson::array();
    for (const auto& [left, right] : bpe_->merges()) merges.push_back({left, right});
    model = {{"type", "BPE"},
             {"dropout", nullptr},
             {"unk_token", kSpecialTokens[kUnkId]},
             {"continuing_subword_prefix", nullptr},
             {"end_of_word_suffix", kEndOfWordSuffix},
             {"fuse_unk", false},
             {"byte_fallback", false},
             {"ignore_merges", false},
             {"vocab", vocab},
             {"merges", merges}};
    decoder = {{"type", "BPEDecoder"}, {"suffix", kEndOfWordSuffix}};
    pre_tokenizer = bpe_pre_tokenizer();
  }
  if (origin_)
    model["built_from"] = {{"pairs", origin_->pairs}, {"settings", origin_->settings}, {"digest", origin_->digest}};
  return {{"version", "1.0"},
          {"truncation", nullptr},
          {"padding", nullptr},
          {"added_tokens", added},
          {"normalizer", nullptr},
          {"pre_tokenizer", pre_tokenizer},
          {"post_processor", nullptr},
          {"decoder", decoder},
          {"model", model}};
}

std::string Tokenizer::file_text() const { return to_json().dump(2) + "\n"; }

std::string Tokenizer::save(const std::string& path) const {
  std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) make_folders_or_fail(parent.string());
  std::string text = file_text();
  write_file_atomically(path, text);
  return text;
}

std::vector<std::string_view> split_words(std::string_view text) {
  // HF splits the raw text on the added (special) tokens first, taking the
  // leftmost match, then pre-tokenises the pieces between them.
  std::vector<std::string_view> words;
  auto append_pre_tokenized = [&](std::string_view piece) {
    for (std::string_view word : pre_tokenize(piece)) words.push_back(word);
  };
  size_t done = 0;
  for (size_t pos = text.find('['); pos != std::string_view::npos; pos = text.find('[', pos)) {
    auto special = std::find_if(kSpecialTokens.begin(), kSpecialTokens.end(),
                                [&](std::string_view s) { return text.substr(pos).starts_with(s); });
    if (special == kSpecialTokens.end()) {
      ++pos;
      continue;
    }
    append_pre_tokenized(text.substr(done, pos - done));
    words.push_back(text.substr(pos, special->size()));
    pos += special->size();
    done = pos;
  }
  append_pre_tokenized(text.substr(done));
  return words;
}

// Calls add(id, text) for each id of `text`, with the part of it the id stands for.
template <class Add>
static void for_each_token(const Tokenizer& tokenizer, const BpeModel* bpe, std::string_view text, const Add& add) {
  for (std::string_view word : split_words(text)) {
    int32_t id = tokenizer.token_to_id(word);  // the special tokens have theirs
    bool special = id >= 0 && id < static_cast<int32_t>(kSpecialTokens.size());
    if (!bpe || special) {
      add(id < 0 ? kUnkId : id, word);
      continue;
    }
    size_t offset = 0;
    for (const BpePiece& piece : bpe->encode_word(word)) {
      add(piece.id, word.substr(offset, piece.bytes));
      offset += piece.bytes;
    }
  }
}

std::vector<int32_t> Tokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  for_each_token(*this, bpe_.get(), text, [&](int32_t id, std::string_view) { ids.push_back(id); });
  return ids;
}

std::vector<std::string_view> Tokenizer::token_texts(std::string_view text) const {
  std::vector<std::string_view> texts;
  for_each_token(*this, bpe_.get(), text, [&](int32_t, std::string_view part) { texts.push_back(part); });
  return texts;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, std::span<const std::string_view> unknown_as) const {
  std::string out;
  bool word_ended = true;  // the next token starts a word
  for (size_t j = 0; j < ids.size(); ++j) {
    int32_t id = ids[j];
    if (id == kPadId || id == kSosId || id == kEosId) continue;
    std::string_view token = id_to_token(id);
    if (id == kUnkId && j < unknown_as.size() && !unknown_as[j].empty()) token = unknown_as[j];
    if (word_ended && !out.empty()) out += ' ';
    // As HF's BPEDecoder: a unit ending in the suffix ends its word.
    word_ended = !bpe_ || token.ends_with(kEndOfWordSuffix);
    if (bpe_ && word_ended) token.remove_suffix(kEndOfWordSuffix.size());
    out += token;
  }
  return out;
}

const std::string& Tokenizer::id_to_token(int32_t id) const {
  if (id < 0 || id >= vocab_size()) internal_fail("token id ", id, " outside the vocabulary of ", vocab_size());
  return tokens_[id];
}

int32_t Tokenizer::token_to_id(std::string_view token) const {
  auto it = ids_.find(token);  // heterogeneous lookup: no string copy per word
  return it == ids_.end() ? -1 : it->second;
}

}  // namespace sf::data
