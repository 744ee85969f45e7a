// The example programs run and do what they say.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>
#include <sys/wait.h>

#include "build_dir.h"
#include "data/toy_tasks.h"
#include "test_nn_helpers.h"

using namespace sf;
using sf::testing::build_path;
using sf::testing::scratchformer_binary;

namespace {

// Runs a command; returns its exit status and what it printed.
std::pair<int, std::string> run(const std::string& command) {
  std::string output;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buffer[256];
  while (fgets(buffer, sizeof buffer, pipe)) output += buffer;
  int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

}  // namespace

TEST_CASE("examples: xor learns XOR with every optimizer") {
  for (std::string kind : {"adam", "adamw", "sgd"}) {
    CAPTURE(kind);
    // Not structured bindings: clang before 16 cannot capture those in CAPTURE's lambda.
    int status;
    std::string output;
    std::tie(status, output) = run(build_path("examples/xor") + " " + kind);
    CAPTURE(output);
    CHECK(status == 0);
    CHECK(output.find("accuracy: 100%") != std::string::npos);
  }
  auto [status, output] = run(build_path("examples/xor") + " momentum");
  CHECK(status == 2);
  CHECK(output.find("unknown optimizer 'momentum'") != std::string::npos);
}

// train_toy's last line: its final training loss and the held-out pairs it
// reverses exactly.
struct ToyRun {
  int status = -1;
  std::string output;
  float loss = 0.0f;
  int exact = 0, total = 0;
};

ToyRun run_train_toy(const std::string& arguments) {
  ToyRun r;
  std::tie(r.status, r.output) = run(build_path("examples/train_toy") + arguments);
  size_t last = r.output.rfind("final loss ");
  if (last == std::string::npos ||
      std::sscanf(r.output.c_str() + last, "final loss %f, %d of %d held-out pairs exact", &r.loss, &r.exact,
                  &r.total) != 3)
    r.total = -1;
  return r;
}

TEST_CASE("examples: train_toy learns to reverse and decodes held-out pairs") {
  ToyRun honest = run_train_toy("");
  CAPTURE(honest.output);
  CHECK(honest.status == 0);
  CHECK(honest.total == 4);
  CHECK(honest.loss < 0.1f);  // from about 3.9 at the start (the log of the vocabulary size is 3.7)
  CHECK(honest.exact >= 1);   // greedy decoding turns the trained model into whole reversals
}

TEST_CASE("examples: train_toy without the causal mask learns to copy the next token and reverses nothing") {
  ToyRun cheat = run_train_toy(" --no-causal-mask");
  CAPTURE(cheat.output);
  CHECK(cheat.status == 0);
  CHECK(cheat.total == 4);
  // The honest run ends near 0.035: seeing the answer, the loss falls an
  // order of magnitude lower, and decoding, which cannot see it, fails.
  CHECK(cheat.loss < 0.01f);
  CHECK(cheat.exact == 0);
  CHECK(run(build_path("examples/train_toy") + " --causal").first == 2);
}

TEST_CASE("examples: custom_op's softplus passes its gradient check, a wrong backward fails it") {
  int status;
  std::string output;
  std::tie(status, output) = run(build_path("examples/custom_op"));
  CAPTURE(output);
  CHECK(status == 0);
  CHECK(output.find("softplus gradient check: max |analytic - numeric| = ") != std::string::npos);
  CHECK(output.find("(ok)") != std::string::npos);
  int wrong_status;
  std::string wrong_output;
  std::tie(wrong_status, wrong_output) = run(build_path("examples/custom_op") + " --wrong-backward");
  CAPTURE(wrong_output);
  CHECK(wrong_status == 1);
  CHECK(wrong_output.find("(FAILED)") != std::string::npos);
}

TEST_CASE("examples: translate prints what `scratchformer translate` prints for the same checkpoint") {
  testing::TempDir dir;
  std::string d = dir.path.string();
  std::ofstream(dir.path / "config.json") << R"({"data": {"task": "reverse", "size": 400}, "lang_src": "a",
    "lang_tgt": "b", "num_epochs": 3, "batch_size": 16, "lr": 0.01, "seq_len": 16, "d_model": 32, "N": 1,
    "h": 2, "d_ff": 64, "min_frequency": 1, "val_examples": 0, "model_folder": "w",
    "experiment_name": "run", "tokenizer_file": "tok_{0}.json"})";
  const std::string bin = scratchformer_binary(), cd = "cd '" + d + "' && ";
  int trained;
  std::string log;
  std::tie(trained, log) = run(cd + "'" + bin + "' train --config config.json");
  CAPTURE(log);
  REQUIRE(trained == 0);
  std::string sentences;
  for (const data::Pair& p : data::generate_toy_task("reverse", 4, 99)) sentences += " '" + p.src + "'";
  auto [cli_status, expect] = run(cd + "'" + bin + "' translate --config config.json" + sentences);
  REQUIRE(cli_status == 0);
  CHECK(std::count(expect.begin(), expect.end(), '\n') == 4);
  CHECK(expect.find("\n\n") == std::string::npos);  // every sentence gets some translation
  // The latest checkpoint, found in model_folder, and the same one named.
  for (std::string checkpoint : {"", " w/tmodel_02.safetensors"}) {
    CAPTURE(checkpoint);
    auto [status, output] = run(cd + "'" + build_path("examples/translate") + "' config.json" + checkpoint + sentences);
    CHECK(status == 0);
    CHECK(output == expect);
  }
}
