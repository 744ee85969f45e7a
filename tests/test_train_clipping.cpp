// Gradient clipping as the trainer applies it (train/training_step.cpp), not
// only as the optimizer's own tests call it: a run whose clip bites must move
// the weights by the clipped step.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <vector>

#include "cli_process.h"
#include "train_helpers.h"

using namespace sf;
using namespace sf::testing;
namespace fs = std::filesystem;

namespace {

std::vector<std::vector<float>> parameter_values(const nn::Transformer& model) {
  std::vector<std::vector<float>> values;
  for (const auto& [name, p] : model.named_parameters()) values.push_back(p.to_vector());
  return values;
}

// The Euclidean norm of after - before over every parameter.
double distance(const std::vector<std::vector<float>>& before, const std::vector<std::vector<float>>& after) {
  double squares = 0;
  for (size_t i = 0; i < before.size(); ++i)
    for (size_t j = 0; j < before[i].size(); ++j) {
      const double d = double(after[i][j]) - double(before[i][j]);
      squares += d * d;
    }
  return std::sqrt(squares);
}

// The grad_norm of each step record of a metrics file.
std::vector<double> logged_grad_norms(const fs::path& metrics) {
  std::vector<double> norms;
  std::ifstream in(metrics);
  for (std::string line; std::getline(in, line);) {
    const auto record = nlohmann::json::parse(line);
    if (record["kind"] == "step") norms.push_back(record["grad_norm"].get<double>());
  }
  return norms;
}

}  // namespace

// Plain SGD (no momentum, no weight decay) steps by -lr * s * g, where s =
// min(1, c / |g|) is the clip's factor for the gradient's norm |g|. One step
// whose |g| is above c therefore moves the weights by exactly lr * c; without
// the clip, by lr * |g|, here hundreds of times more. The run is one batch:
// one optimizer step.
TEST_CASE("train: a clip that bites moves the weights by lr times clip_grad_norm, as SGD by hand does") {
  TempDir dir;
  const float lr = 0.5f, clip = 1e-3f;
  const std::string config = write_config(dir.path, std::string(R"("data": {"task": "copy", "size": 60},
    "lang_src": "a", "lang_tgt": "b", "num_epochs": 1, "dropout": 0.0, "optimizer": {"name": "sgd"},
    "schedule": "constant", "warmup_steps": 0, "clip_grad_norm": 0.001, "lr": 0.5, "batch_size": 64, "seq_len": 16,
    "d_model": 32, "N": 1, "h": 4, "d_ff": 64, "min_frequency": 1)"));
  train::Trainer trainer(setup::load_config(config, {}));
  const auto before = parameter_values(trainer.model());
  REQUIRE(trainer.run() == 0);
  const std::vector<double> norms = logged_grad_norms(dir.path / "run/metrics.jsonl");
  REQUIRE(norms.size() == 1);  // one batch, one step
  CAPTURE(norms[0]);
  REQUIRE(norms[0] > 100 * clip);  // the clip bites, by far
  const double moved = distance(before, parameter_values(trainer.model()));
  CHECK(moved == doctest::Approx(double(lr) * clip).epsilon(1e-4));
}
