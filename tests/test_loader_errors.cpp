// Files a run resumes from, altered by hand or by a disk: each bad value is an
// sf::Error naming the file and the field, never read as something else.
#include <doctest/doctest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/parse_int.h"
#include "data/corpus.h"
#include "data/tokenizer.h"
#include "optim/optimizer.h"
#include "test_nn_helpers.h"
#include "setup/checkpoints.h"

using namespace sf;
using sf::testing::TempDir;

TEST_CASE("parse_int64 takes a whole base-10 integer that fits, nothing else") {
  CHECK(parse_int64("5") == 5);
  CHECK(parse_int64("-12") == -12);
  CHECK(parse_int64("9223372036854775807") == INT64_MAX);
  for (const char* bad : {"", "5abc", " 5", "5 ", "+5", "0x10", "1e3", "9223372036854775808", "-"})
    CHECK_MESSAGE(!parse_int64(bad), bad);
}

TEST_CASE("optimizer state: a step count that is not a whole integer >= 0 is an error") {
  TempDir dir;
  Tensor x = Tensor::ones({2}).set_requires_grad();
  std::string path = dir.file("o.optim.safetensors");
  for (const char* bad : {"5abc", "", "-1", "99999999999999999999", "5.0"}) {
    safetensors::save(path, {}, {{"optimizer", "adam"}, {"step", bad}});
    optim::Adam adam({{"x", x}}, 0.1f);
    CHECK_THROWS_WITH_AS(adam.load(path), doctest::Contains((path + ": __metadata__ 'step' is \"" + bad + "\"").c_str()),
                         Error);
  }
  safetensors::save(path, {}, {{"optimizer", "adam"}, {"step", "5"}});
  optim::Adam adam({{"x", x}}, 0.1f);
  adam.load(path);
  CHECK(adam.steps() == 5);
}

TEST_CASE("optimizer state: moments that would make the weights NaN are an error") {
  TempDir dir;
  Tensor x = Tensor::ones({2}).set_requires_grad();
  std::string path = dir.file("o.optim.safetensors");
  auto save = [&](float m, float v) {
    safetensors::save(path, {{"exp_avg.x", Tensor::from({m, 0}, {2})}, {"exp_avg_sq.x", Tensor::from({v, 0}, {2})}},
                      {{"optimizer", "adam"}, {"step", "3"}});
  };
  optim::Adam adam({{"x", x}}, 0.1f);
  save(NAN, 1);
  CHECK_THROWS_WITH_AS(adam.load(path), doctest::Contains("exp_avg.x holds NaN or infinite values"), Error);
  save(0, INFINITY);
  CHECK_THROWS_WITH_AS(adam.load(path), doctest::Contains("exp_avg_sq.x holds NaN or infinite values"), Error);
  save(0, -1);
  CHECK_THROWS_WITH_AS(adam.load(path), doctest::Contains("exp_avg_sq.x holds negative values"), Error);
  save(-1, 1);  // a mean of gradients may be negative
  adam.load(path);
  CHECK(adam.steps() == 3);
}

TEST_CASE("training state: each impossible field is an error naming the file and the field") {
  TempDir dir;
  setup::CheckpointStore store(dir.path.string(), "m", 0);
  std::string path = store.files("00").state;
  const nlohmann::json good = {{"epoch", 1},         {"global_step", 40},          {"batch", 7},
                               {"batches_in_epoch", 10}, {"accum_pending", 1},      {"best_bleu", 12.5},
                               {"dropout_rng", {1, 2, 3, 4}}};
  auto load = [&](const nlohmann::json& json) {
    std::ofstream(path) << json.dump();
    return store.load_state("00");
  };
  setup::TrainingState s = load(good);
  CHECK(s.batch == 7);
  CHECK(s.accum_pending == 1);
  CHECK(s.dropout_rng == Rng::State{1, 2, 3, 4});

  struct Case {
    const char *key, *value;
  };
  for (Case c : {Case{"epoch", "-1"}, {"epoch", "\"5abc\""}, {"epoch", "2.5"}, {"global_step", "18446744073709551615"},
                 {"batch", "11"}, {"accum_pending", "-1"}, {"accum_pending", "8"}, {"best_bleu", "101"},
                 {"dropout_rng", "[0, 0, 0, 0]"}, {"dropout_rng", "[1, 2, 3]"}, {"dropout_rng", "[1, 2, 3, -4]"}}) {
    INFO(c.key, " = ", c.value);
    nlohmann::json bad = good;
    bad[c.key] = nlohmann::json::parse(c.value);
    CHECK_THROWS_WITH_AS(load(bad), doctest::Contains((path + ": training state field '" + c.key + "'").c_str()), Error);
  }
  // A complete epoch has stepped on its last batch: nothing is pending.
  nlohmann::json complete = good;
  complete["batch"] = 10;
  CHECK_THROWS_WITH_AS(load(complete), doctest::Contains("field 'accum_pending' must be 0"), Error);
  nlohmann::json missing = good;
  missing.erase("best_bleu");
  CHECK_THROWS_WITH_AS(load(missing), doctest::Contains((path + ": training state has no field 'best_bleu'").c_str()), Error);
}

TEST_CASE("tokenizer: an added token's id that only wraps round to a special one is an error") {
  TempDir dir;
  data::Tokenizer t = data::Tokenizer::train({"a b"}, 1);
  nlohmann::json json = t.to_json();
  json["added_tokens"][0]["id"] = int64_t{1} << 32;  // 0 as an int32
  CHECK_THROWS_WITH_AS(data::Tokenizer::from_json(json, "t.json"), doctest::Contains("(id 4294967296)"), Error);
}

TEST_CASE("corpus: a folder given as a corpus file is an error, not an empty corpus") {
  TempDir dir;
  CHECK_THROWS_WITH_AS(data::read_tsv(dir.path.string()), doctest::Contains("is a folder, not a file"), Error);
}
