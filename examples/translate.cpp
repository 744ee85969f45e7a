// Translating with a trained model from C++, as a program embedding the
// library would: a config, a checkpoint and the tokenizers it names, then
// greedy decoding of each sentence. Prints what `scratchformer translate` does.
//
//   build/examples/translate CONFIG.json [CHECKPOINT.safetensors] SENTENCE...
//
// Without a checkpoint it loads the latest complete one in the config's
// model_folder. Paths in the config are relative to the working directory.
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "data/detokenizer.h"
#include "setup/config.h"
#include "infer/inference.h"

using namespace sf;

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: translate CONFIG.json [CHECKPOINT.safetensors] SENTENCE...\n");
    return 2;
  }
  std::vector<std::string> args(argv + 1, argv + argc);
  std::optional<std::string> checkpoint;
  size_t first = 1;  // the first sentence
  if (args[1].ends_with(".safetensors")) checkpoint = args[first++];
  std::vector<std::string> sentences(args.begin() + first, args.end());
  try {
    // The config names the tokenizers, the model folder and seq_len; Session
    // loads both tokenizers and the model, which it puts in eval mode.
    setup::Config config = setup::load_config(args[0]);
    infer::Session session = infer::Session::open(config, checkpoint);
    infer::DecodeOptions greedy = infer::DecodeOptions::from_config(config, /*beam=*/1);
    // translate_lines gives the target tokens joined by spaces, each [UNK]
    // replaced by a source word in `shown`; detokenize writes them as the
    // language does ("1989-07-14").
    for (const infer::Translation& t : infer::translate_lines(session, sentences, greedy))
      std::printf("%s\n", data::detokenize(t.shown).c_str());
  } catch (const std::exception& e) {  // sf::Error: a bad file or sentence (2); else a bug (1)
    std::fprintf(stderr, "translate: %s\n", e.what());
    return exit_status(e);
  }
  return 0;
}
