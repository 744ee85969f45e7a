// `scratchformer export`: a trained model's weights in bf16 for inference.
// The file is half the float32 one, keeps its names, order and metadata, and
// translate, score and a training run's preload load it like any weights file.
#include <doctest/doctest.h>

#include <cstdio>
#include <fstream>

#include "autograd/safetensors.h"
#include "cli_process.h"
#include "data/toy_tasks.h"

using namespace sf;
using namespace sf::train;
using namespace sf::testing;

namespace {

// Runs scratchformer in `dir` with `arguments` (shell words) and `input` on stdin.
std::vector<std::string> run_in(const fs::path& dir, const std::string& arguments, const std::string& input) {
  std::ofstream(dir / "input.txt") << input;
  return capture_lines("cd '" + dir.string() + "' && '" + scratchformer_binary() + "' " + arguments + " < input.txt");
}

}  // namespace

TEST_CASE("export: a trained model in bf16 is half the file, same names, order and metadata; translate, score "
          "and preload use it") {
  TempDir dir;
  std::string config = write_config(dir.path, std::string(R"("data": {"task": "dates", "size": 2000},
    "lang_src": "en", "lang_tgt": "iso", "num_epochs": 3, )") + kSmall);
  REQUIRE(Trainer(setup::load_config(config)).run() == 0);
  const std::string fp32 = (dir.path / "weights/tmodel_02.safetensors").string();

  // The line it prints names the file, the dtype and the size.
  std::vector<std::string> said = run_in(dir.path, "export --config config.json --out model.bf16.safetensors", "");
  const fs::path bf16 = dir.path / "model.bf16.safetensors";
  REQUIRE(fs::exists(bf16));
  REQUIRE(said.size() == 1);
  CHECK(said[0] == "export: wrote model.bf16.safetensors (bf16, " + std::to_string(fs::file_size(bf16)) +
                       " bytes) from " + fp32);
  MESSAGE("float32 checkpoint ", fs::file_size(fp32), " bytes, bf16 export ", fs::file_size(bf16), " bytes");
  CHECK(fs::file_size(bf16) < fs::file_size(fp32) * 0.51);

  check_bf16_export(fp32, bf16.string());
  // --dtype fp32 writes the checkpoint's own bytes.
  run_in(dir.path, "export --config config.json --dtype fp32 --out model.fp32.safetensors", "");
  CHECK(read_file(dir.path / "model.fp32.safetensors") == read_file(fp32));

  // Translations: the same for (nearly) every sentence; the exact count is
  // printed. Scores: the total NLL within 0.1%, bf16 rounding each weight by up
  // to 2^-9 relative.
  std::string sources, pairs;
  for (const data::Pair& p : data::generate_toy_task("dates", 60, 99)) {
    sources += p.src + "\n";
    pairs += p.src + "\t" + p.tgt + "\n";
  }
  std::vector<std::string> want = run_in(dir.path, "translate --config config.json", sources),
                           got = run_in(dir.path, "translate --config config.json --checkpoint model.bf16.safetensors",
                                        sources);
  REQUIRE(want.size() == 60);
  REQUIRE(got.size() == 60);
  int same = 0;
  for (size_t i = 0; i < want.size(); ++i) same += want[i] == got[i];
  MESSAGE(same, " of 60 translations identical");
  CHECK(same >= 57);
  std::vector<std::string> nll_fp32 = run_in(dir.path, "score --config config.json", pairs),
                           nll_bf16 = run_in(dir.path, "score --config config.json --checkpoint model.bf16.safetensors",
                                             pairs);
  REQUIRE(nll_fp32.size() == 60);
  REQUIRE(nll_bf16.size() == 60);
  double total_fp32 = 0, total_bf16 = 0;
  for (size_t i = 0; i < 60; ++i) {
    total_fp32 += std::stod(nll_fp32[i]);
    total_bf16 += std::stod(nll_bf16[i]);
  }
  MESSAGE("total NLL: float32 ", total_fp32, ", bf16 ", total_bf16);
  CHECK(total_bf16 == doctest::Approx(total_fp32).epsilon(1e-3));

  // A training run preloads the export: a fresh optimizer from the rounded weights.
  Trainer trainer(
      setup::load_config(config, {"preload=" + bf16.string(), "model_folder=" + (dir.path / "w2").string()}));
  NamedTensors loaded = trainer.model().state_dict(), exported = safetensors::load(bf16.string()).tensors;
  REQUIRE(loaded.size() == exported.size());
  for (size_t i = 0; i < loaded.size(); ++i) {
    CAPTURE(loaded[i].first);
    CHECK(loaded[i].second.to_vector() == exported[i].second.to_vector());
  }
  CHECK(trainer.optimizer().steps() == 0);
}

TEST_CASE("average: each tensor the mean of the checkpoints' (--last K or listed); translate uses the file") {
  TempDir dir;
  std::string config = write_config(dir.path, std::string(R"("data": {"task": "dates", "size": 500},
    "lang_src": "en", "lang_tgt": "iso", "num_epochs": 3, )") + kSmall);
  REQUIRE(Trainer(setup::load_config(config)).run() == 0);
  auto epoch = [&](int e) { return (dir.path / ("weights/tmodel_0" + std::to_string(e) + ".safetensors")).string(); };
  // The mean in double of each element, rounded once.
  auto check_mean = [](const fs::path& average, const std::vector<std::string>& inputs) {
    NamedTensors got = safetensors::load(average.string()).tensors;
    std::vector<NamedTensors> each;
    for (const std::string& path : inputs) each.push_back(safetensors::load(path).tensors);
    REQUIRE(got.size() == each[0].size());
    int differ = 0;  // elements where the checkpoints disagree: the mean must be new
    for (size_t i = 0; i < got.size(); ++i) {
      CAPTURE(got[i].first);
      REQUIRE(got[i].first == each[0][i].first);
      std::vector<float> values = got[i].second.to_vector();
      for (size_t k = 0; k < values.size(); ++k) {
        double sum = 0;
        for (const NamedTensors& t : each) sum += t[i].second.to_vector()[k];
        REQUIRE(values[k] == static_cast<float>(sum / static_cast<double>(each.size())));
        differ += each[0][i].second.to_vector()[k] != each.back()[i].second.to_vector()[k];
      }
    }
    CHECK(differ > 0);
  };

  std::vector<std::string> said = run_in(dir.path, "average --config config.json --last 2 --out avg.safetensors", "");
  REQUIRE(said.size() == 1);
  CHECK(said[0] == "average: wrote avg.safetensors, the mean of 2 checkpoints: " + epoch(1) + " " + epoch(2));
  check_mean(dir.path / "avg.safetensors", {epoch(1), epoch(2)});
  run_in(dir.path, "average --config config.json --out avg3.safetensors " + epoch(0) + " " + epoch(1) + " " + epoch(2),
         "");
  check_mean(dir.path / "avg3.safetensors", {epoch(0), epoch(1), epoch(2)});

  std::string sources;
  for (const data::Pair& p : data::generate_toy_task("dates", 20, 99)) sources += p.src + "\n";
  CHECK(run_in(dir.path, "translate --config config.json --checkpoint avg.safetensors", sources).size() == 20);
}
