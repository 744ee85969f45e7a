#include "translate_page.h"

namespace sf::onnx {

namespace {

// Placeholders: {{SOURCE}}, {{TARGET}} (the languages), {{FILES}} (kRuntimeFiles).
const char* kPage = R"PAGE(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<title>Scratchformer: translate {{SOURCE}} to {{TARGET}}</title>
<style>
  body { font-family: system-ui, sans-serif; max-width: 42em; margin: 2em auto; padding: 0 1em; line-height: 1.5; }
  textarea { width: 100%; box-sizing: border-box; font: inherit; padding: 0.4em; }
  button { font: inherit; margin-top: 0.5em; padding: 0.3em 1.2em; }
  output { display: block; white-space: pre-wrap; margin-top: 1em; min-height: 3em; padding: 0.5em; background: #f3f3f3; }
  #status { color: #555; }
</style>
</head>
<body>
<h1>Translate {{SOURCE}} &rarr; {{TARGET}}</h1>
<p id="status">Loading the model&hellip;</p>
<form id="form">
  <label for="source">Sentences, one per line:</label>
  <textarea id="source" rows="4"></textarea>
  <button id="translate" type="submit" disabled>Translate</button>
</form>
<output id="target" for="source" aria-live="polite"></output>
<script type="module">
// The model is this folder (config.json, onnx/*.onnx, tokenizer.json) and
// transformers.js runs it on ONNX Runtime Web's WebAssembly build, whose
// files lie here too ({{FILES}}): nothing is fetched from elsewhere.
import { pipeline, env } from './transformers.min.js';
const here = new URL('./', location.href);
env.allowRemoteModels = false;
env.allowLocalModels = true;
// A path, not a URL: transformers.js looks for optional files (the
// tokenizer's) only under a local path.
env.localModelPath = new URL('../', here).pathname;
env.backends.onnx.wasm.wasmPaths = here.href;
const folder = decodeURIComponent(here.pathname.split('/').at(-2));
const status = document.getElementById('status'), button = document.getElementById('translate');
try {
  const translator = await pipeline('translation', folder, { dtype: 'fp32', device: 'wasm' });
  status.textContent = 'Ready.';
  button.disabled = false;
  document.getElementById('form').addEventListener('submit', async (event) => {
    event.preventDefault();
    const lines = document.getElementById('source').value.split('\n').filter((line) => line.trim() !== '');
    button.disabled = true;
    status.textContent = 'Translating\u2026';
    // Greedy decoding, as `scratchformer translate --beam 1`, over at most the
    // positions the model has (the pipeline's default would run past them);
    // one line at a time, since in a batch transformers.js keeps writing
    // after a sentence's [EOS] until every sentence has ended.
    const options = { num_beams: 1, do_sample: false, max_new_tokens: translator.model.generation_config.max_length - 1 };
    const out = [];
    for (const line of lines) out.push((await translator(line, options))[0].translation_text);
    document.getElementById('target').textContent = out.join('\n');
    status.textContent = 'Done.';
    button.disabled = false;
  });
} catch (error) {
  status.textContent = 'The model could not be loaded: ' + error.message;
  throw error;
}
</script>
</body>
</html>
)PAGE";

void replace_all(std::string& text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
}

// The few characters that HTML gives a meaning.
std::string escaped(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '&') out += "&amp;";
    else if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else out += c;
  }
  return out;
}

}  // namespace

std::string translate_page(const setup::Config& config) {
  std::string page = kPage, files;
  for (const char* file : kRuntimeFiles) {
    if (!files.empty()) files += ", ";
    files += file;
  }
  replace_all(page, "{{SOURCE}}", escaped(config.lang_src));
  replace_all(page, "{{TARGET}}", escaped(config.lang_tgt));
  replace_all(page, "{{FILES}}", files);
  return page;
}

}  // namespace sf::onnx
