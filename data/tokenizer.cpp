#include "tokenizer.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "base/atomic_file.h"
#include "base/error.h"
#include "pretokenizer.h"

namespace sf::data {

Tokenizer::Tokenizer(std::vector<std::string> tokens) : tokens_(std::move(tokens)) {
  for (size_t id = 0; id < tokens_.size(); ++id) ids_.emplace(tokens_[id], static_cast<int32_t>(id));
}

Tokenizer Tokenizer::train(const std::vector<std::string_view>& texts, int64_t min_frequency) {
  std::unordered_map<std::string_view, int64_t> counts;  // views into `texts`
  for (std::string_view text : texts)
    for (std::string_view word : pre_tokenize(text)) ++counts[word];

  std::vector<std::pair<std::string_view, int64_t>> kept;
  for (const auto& [word, count] : counts)
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

// A function-try-block: a field of the wrong JSON type anywhere below becomes
// the same one-line error as the explicit checks.
Tokenizer Tokenizer::from_json(const nlohmann::json& json, const std::string& source) try {
  auto bad = [&](const auto&... what) { fail(source, ": ", what...); };
  if (!json.is_object()) bad("not a tokenizer (expected a JSON object)");
  const nlohmann::json& model = json.value("model", nlohmann::json());
  std::string type = model.is_object() ? model.value("type", "") : "";
  if (type != "WordLevel")
    bad("tokenizer model \"", type, "\" is not supported (only WordLevel)");
  nlohmann::json pre = json.value("pre_tokenizer", nlohmann::json());
  if (!pre.is_object() || pre.value("type", "") != "Whitespace")
    bad("pre_tokenizer ", pre.dump(), " is not supported (only {\"type\": \"Whitespace\"})");
  // Anything else that would change the ids or the text is not implemented.
  for (const char* key : {"normalizer", "post_processor", "decoder", "truncation", "padding"})
    if (json.contains(key) && !json[key].is_null()) bad("\"", key, "\" must be null");

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
  return Tokenizer(std::move(tokens));
} catch (const nlohmann::json::exception& e) {
  fail(source, ": not a WordLevel tokenizer: ", plain_message(e));
}

Tokenizer Tokenizer::load(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) fail(path, ": is a folder, not a tokenizer file");
  std::ifstream in(path);
  if (!in) fail(path, ": cannot open tokenizer file");
  nlohmann::json json = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
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
  return {{"version", "1.0"},
          {"truncation", nullptr},
          {"padding", nullptr},
          {"added_tokens", added},
          {"normalizer", nullptr},
          {"pre_tokenizer", {{"type", "Whitespace"}}},
          {"post_processor", nullptr},
          {"decoder", nullptr},
          {"model", {{"type", "WordLevel"}, {"vocab", vocab}, {"unk_token", kSpecialTokens[kUnkId]}}}};
}

void Tokenizer::save(const std::string& path) const {
  std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent);
  write_file_atomically(path, to_json().dump(2) + "\n");
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

std::vector<int32_t> Tokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  for (std::string_view word : split_words(text)) {
    int32_t id = token_to_id(word);  // the special tokens have theirs
    ids.push_back(id < 0 ? kUnkId : id);
  }
  return ids;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  for (int32_t id : ids) {
    if (id == kPadId || id == kSosId || id == kEosId) continue;
    if (!out.empty()) out += ' ';
    out += id_to_token(id);
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
