// DIR/translate.html: a page that translates what is typed into it with the
// exported model, in the browser, through transformers.js on ONNX Runtime
// Web's WebAssembly backend. Everything it loads is in its own folder: the
// model files of the export, and the runtime's three files, which the user
// copies beside it from the npm packages (kRuntimeFiles; docs/14-onnx.md
// shows how); the page fetches nothing from elsewhere.
// It writes the translation as transformers.js decodes it, which is what
// `translate --tokens` prints (the words spaced; no detokenisation, [UNK] kept).
#pragma once
#include <array>
#include <string>

#include "setup/config.h"

namespace sf::onnx {

// What the page loads beside itself: transformers.js as one ES module, and
// the WebAssembly build of ONNX Runtime with its loader.
inline constexpr std::array<const char*, 3> kRuntimeFiles = {
    "transformers.min.js", "ort-wasm-simd-threaded.asyncify.mjs", "ort-wasm-simd-threaded.asyncify.wasm"};

std::string translate_page(const setup::Config& config);

}  // namespace sf::onnx
