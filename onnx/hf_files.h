// The JSON files beside the ONNX graphs in Hugging Face's layout, which
// transformers.js and Optimum read to run an exported encoder-decoder model:
// config.json (the architecture in the names of a MarianMT config, the
// closest of their models to ours), generation_config.json (how to decode, as
// `translate` does) and the tokenizer's tokenizer.json (ours, plus the
// framing [SOS] ... [EOS] of a source as a post-processor, so that a runtime
// encodes a sentence into the ids our encoder reads) and tokenizer_config.json.
#pragma once
#include <nlohmann/json.hpp>

#include "data/tokenizer.h"
#include "setup/config.h"

namespace sf::onnx {

nlohmann::ordered_json hf_config(const setup::Config& config, int64_t src_vocab_size, int64_t tgt_vocab_size);
nlohmann::ordered_json hf_generation_config(const setup::Config& config);
nlohmann::ordered_json hf_tokenizer(const data::Tokenizer& tokenizer);
nlohmann::ordered_json hf_tokenizer_config(const setup::Config& config);

}  // namespace sf::onnx
