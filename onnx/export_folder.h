// `scratchformer export --format onnx --out DIR`: a trained model as a folder
// in the layout Hugging Face's exporters write for encoder-decoder models,
// which ONNX Runtime and transformers.js load:
//   DIR/onnx/encoder_model.onnx, DIR/onnx/decoder_model_merged.onnx
//     (transformer_graph.h; opset 17, float32: bf16 weights widened)
//   DIR/config.json, DIR/generation_config.json, DIR/tokenizer_config.json
//   DIR/tokenizer.json and DIR/translate.html (one shared vocabulary:
//     translate_page.h), or with two vocabularies
//     DIR/source_tokenizer.json and DIR/target_tokenizer.json, which runtimes
//     expecting one tokenizer.json do not read.
// All of it is written into a temporary folder beside DIR, renamed to DIR at
// the end: a failure (a full disk) leaves no DIR, and no temporary folder.
// DIR must not exist, or be an empty folder.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "infer/inference.h"

namespace sf::onnx {

struct WrittenFile {
  std::string name;  // relative to the folder
  uintmax_t bytes = 0;
};

std::vector<WrittenFile> export_folder(const infer::Session& session, const std::string& folder);

}  // namespace sf::onnx
