// A trained model that writes [UNK]: the reverse task with a made-up name in
// a third of the pairs, each name used once, so that the vocabularies
// (min_frequency 2) have none and the model learns to write [UNK] where the
// source has one, attending to it. Trained once per test process for the
// tests of unknown words and of every decoding path.
#pragma once
#include <fstream>
#include <string>
#include <vector>

#include "data/pretokenizer.h"
#include "data/toy_tasks.h"
#include "train_helpers.h"

namespace sf::testing {

// Each pair of `pairs` as a TSV line, a third of them with one word of the
// source replaced by prefix + its index (in the target, reversed, too).
inline std::string reverse_pairs_with_names(const std::vector<data::Pair>& pairs, const std::string& prefix) {
  std::string tsv;
  for (size_t i = 0; i < pairs.size(); ++i) {
    std::vector<std::string_view> src = data::pre_tokenize(pairs[i].src);
    std::vector<std::string> words(src.begin(), src.end());
    if (i % 3 == 0) words[i % words.size()] = prefix + std::to_string(i);
    std::string source = words[0], target = words.back();
    for (size_t k = 1; k < words.size(); ++k) {
      source += ' ' + words[k];
      target += ' ' + words[words.size() - 1 - k];
    }
    tsv += source + '\t' + target + '\n';
  }
  return tsv;
}

struct NamesModel {
  TempDir dir;
  fs::path valid = dir.path / "valid.tsv";  // 60 held-out pairs, 20 with a name (Quill...) never seen
  std::string config;                       // dir/config.json; its checkpoints are in dir/weights
  // The --set words every command on this model takes: the config file says
  // min_frequency 1 (kSmall's), the tokenizers were built with 2.
  std::vector<std::string> sets = {"min_frequency=2"};

  NamesModel() {
    std::ofstream(dir.path / "train.tsv") << reverse_pairs_with_names(data::generate_toy_task("reverse", 6000, 1), "Zorb");
    std::ofstream(valid) << reverse_pairs_with_names(data::generate_toy_task("reverse", 60, 2), "Quill");
    config = write_config(dir.path, R"("data": {"train": ")" + (dir.path / "train.tsv").string() + R"(", "valid": ")" +
                                        valid.string() + R"(", "format": "tsv"}, "lang_src": "words",
      "lang_tgt": "reversed", "num_epochs": 7, )" + kSmall);
    REQUIRE(train::Trainer(setup::load_config(config, sets)).run() == 0);
  }
};

inline const NamesModel& names_model() {
  static const NamesModel model;
  return model;
}

}  // namespace sf::testing
