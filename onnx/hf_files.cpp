#include "hf_files.h"

#include <cstdio>
#include <cstdlib>

#include "data/framing.h"

namespace sf::onnx {

using nlohmann::ordered_json;

namespace {

// A float as the double of its shortest decimal form (0.6f as 0.6, not
// 0.6000000238418579): the number the config holds, as JSON writes doubles.
double shortest(float value) {
  for (int digits = 1;; ++digits) {
    char text[32];
    std::snprintf(text, sizeof text, "%.*g", digits, value);
    if (std::strtof(text, nullptr) == value || digits == 9) return std::strtod(text, nullptr);
  }
}

}  // namespace

ordered_json hf_config(const setup::Config& c, int64_t src_vocab_size, int64_t tgt_vocab_size) {
  ordered_json j;
  j["architectures"] = {"MarianMTModel"};
  j["model_type"] = "marian";
  j["is_encoder_decoder"] = true;
  j["d_model"] = c.d_model;
  j["encoder_layers"] = c.N;
  j["decoder_layers"] = c.N;
  j["encoder_attention_heads"] = c.h;
  j["decoder_attention_heads"] = c.h;
  j["encoder_ffn_dim"] = c.d_ff;
  j["decoder_ffn_dim"] = c.d_ff;
  // GELU in its tanh form is what Hugging Face calls gelu_new.
  j["activation_function"] = c.activation == "gelu" ? "gelu_new" : "relu";
  j["vocab_size"] = tgt_vocab_size;
  j["decoder_vocab_size"] = tgt_vocab_size;
  j["max_position_embeddings"] = c.seq_len;
  j["scale_embedding"] = true;
  j["share_encoder_decoder_embeddings"] = c.shared_vocab;
  j["tie_word_embeddings"] = c.tie_embeddings;
  j["pad_token_id"] = data::kPadId;
  j["bos_token_id"] = data::kSosId;
  j["eos_token_id"] = data::kEosId;
  j["decoder_start_token_id"] = data::kSosId;
  j["forced_eos_token_id"] = nullptr;
  j["use_cache"] = true;
  // What a MarianMT config cannot say: where the norms sit, the source
  // vocabulary when it is the target's no more, the languages.
  j["scratchformer"] = {{"norm", c.norm},
                        {"src_vocab_size", src_vocab_size},
                        {"tokenizer", c.tokenizer},
                        {"lang_src", c.lang_src},
                        {"lang_tgt", c.lang_tgt}};
  return j;
}

ordered_json hf_generation_config(const setup::Config& c) {
  ordered_json j;
  j["decoder_start_token_id"] = data::kSosId;
  j["bos_token_id"] = data::kSosId;
  j["eos_token_id"] = data::kEosId;
  j["pad_token_id"] = data::kPadId;
  // The sequence with its start token: [SOS] and at most seq_len - 1 tokens, as translate.
  j["max_length"] = c.seq_len;
  j["num_beams"] = c.beam;
  j["length_penalty"] = shortest(c.length_penalty);
  return j;
}

ordered_json hf_tokenizer(const data::Tokenizer& tokenizer) {
  ordered_json j = tokenizer.to_json();
  auto special = [](std::string_view token) {
    return ordered_json{{"SpecialToken", {{"id", token}, {"type_id", 0}}}};
  };
  auto sequence = [](const char* id) { return ordered_json{{"Sequence", {{"id", id}, {"type_id", 0}}}}; };
  std::string_view sos = data::kSpecialTokens[data::kSosId], eos = data::kSpecialTokens[data::kEosId];
  ordered_json special_tokens;
  for (std::string_view token : {sos, eos})
    special_tokens[std::string(token)] = {
        {"id", token}, {"ids", {tokenizer.token_to_id(token)}}, {"tokens", {token}}};
  // A source as our encoder reads it: [SOS] words [EOS] (data/framing.h).
  j["post_processor"] = {{"type", "TemplateProcessing"},
                         {"single", {special(sos), sequence("A"), special(eos)}},
                         {"pair", {special(sos), sequence("A"), sequence("B"), special(eos)}},
                         {"special_tokens", special_tokens}};
  return j;
}

ordered_json hf_tokenizer_config(const setup::Config& c) {
  ordered_json j;
  j["tokenizer_class"] = "PreTrainedTokenizer";
  j["model_max_length"] = c.seq_len;
  j["unk_token"] = data::kSpecialTokens[data::kUnkId];
  j["pad_token"] = data::kSpecialTokens[data::kPadId];
  j["bos_token"] = data::kSpecialTokens[data::kSosId];
  j["eos_token"] = data::kSpecialTokens[data::kEosId];
  j["clean_up_tokenization_spaces"] = false;
  return j;
}

}  // namespace sf::onnx
