// Shared pieces of the training tests: configs in a scratch folder, the tiny
// and small toy-task models, reading metrics back.
#pragma once
#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "test_nn_helpers.h"
#include "train/trainer.h"

namespace sf::testing {

namespace fs = std::filesystem;

inline std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A config file in `dir` whose outputs all stay in `dir`.
inline std::string write_config(const fs::path& dir, const std::string& body) {
  std::string d = dir.string();
  std::string text = "{" + body + R"(, "model_folder": ")" + d + R"(/weights", "experiment_name": ")" + d +
                     R"(/run", "tokenizer_file": ")" + d + R"(/tokenizer_{0}.json", "val_examples": 0})";
  fs::path path = dir / "config.json";
  std::ofstream(path) << text;
  return path.string();
}

// A tiny model on a toy task: fast enough for the test suite.
inline const char* kTiny = R"("batch_size": 32, "lr": 0.003, "schedule": "cosine", "warmup_steps": 50, "seq_len": 16,
  "d_model": 32, "N": 2, "h": 4, "d_ff": 64, "min_frequency": 1, "bucket": true)";
// The smallest model (and schedule) that learns the accuracy tests' tasks in seconds.
inline const char* kSmall = R"("batch_size": 32, "lr": 0.005, "schedule": "cosine", "warmup_steps": 100, "seq_len": 16,
  "d_model": 64, "N": 2, "h": 4, "d_ff": 128, "dropout": 0.0, "min_frequency": 1, "bucket": true)";

// The validation exact match of the latest checkpoint (`sets`: --set overrides).
inline double exact_match(const std::string& config_path, std::vector<std::string> sets = {}) {
  sets.insert(sets.end(), {"num_epochs=0", "preload=latest"});
  train::Trainer trainer(setup::load_config(config_path, sets));
  return trainer.validate().scores.at("exact_match");
}

// The loss of every record of `kind` in a metrics file ("step", or "valid"
// for the validation after each epoch), as "step:loss".
inline std::vector<std::string> step_losses(const fs::path& metrics, const std::string& kind = "step") {
  std::vector<std::string> losses;
  std::ifstream in(metrics);
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line);
    if (j["kind"] == kind) losses.push_back(std::to_string(j["step"].get<int>()) + ":" + j["loss"].dump());
  }
  return losses;
}

// `sets` (--set overrides) and `more` after them.
inline std::vector<std::string> with(std::vector<std::string> sets, const std::vector<std::string>& more) {
  sets.insert(sets.end(), more.begin(), more.end());
  return sets;
}

// The optimizer steps a run logged: its step records that are whole lines (a
// kill may cut the last one short).
inline size_t logged_steps(const fs::path& metrics) {
  std::ifstream in(metrics);
  size_t steps = 0;
  for (std::string line; std::getline(in, line) && !in.eof();) {
    auto record = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    steps += !record.is_discarded() && record["kind"] == "step";
  }
  return steps;
}

// Trains the small model on a toy task from scratch (`sets`: --set overrides);
// returns its validation exact-match rate.
inline double train_toy_task(const std::string& data_and_languages,
                              const std::vector<std::string>& sets = {}) {
  TempDir dir;
  std::string config = write_config(dir.path, data_and_languages + ", " + kSmall);
  CHECK(train::Trainer(setup::load_config(config, sets)).run() == 0);
  return exact_match(config, sets);
}

// Whether a training test's outcome reached its bar, printed on one line
// ("reverse task: exact match 0.947 (bar 0.900)") so that every run shows
// the margin, passing or not.
inline bool reaches_bar(const std::string& outcome, double reached, double bar) {
  char line[160];
  std::snprintf(line, sizeof line, "%s %.3f (bar %.3f)", outcome.c_str(), reached, bar);
  MESSAGE(line);
  return reached >= bar;
}

// The reverse task (3 to 12 of 50 syllables, reversed) as the accuracy tests
// train it, and the bar of its validation exact match (601 sentences).
// Reached after 7 epochs: 0.947 in float32 and 0.953 in bf16 in the release
// build, 0.950 and 0.943 with SANITIZE=1 (-O1, other float rounding, another
// trajectory). The bar sits 0.04 below the lowest, where the curve stands
// after 5 of the 7 epochs (0.903 to 0.918).
inline const char* kReverseTask = R"("data": {"task": "reverse", "size": 6000}, "lang_src": "words",
  "lang_tgt": "reversed", "num_epochs": 7)";
inline constexpr double kReverseExactMatchBar = 0.90;

}  // namespace sf::testing
