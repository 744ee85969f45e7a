// Training on the OpenCL device: the same run as on the CPU step for step,
// a toy task to the CPU's accuracy, and checkpoints that do not care where they
// were trained. Built only with OPENCL=1 (suite "opencl").
#ifdef SF_OPENCL
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>

#include "cli_process.h"
#include "opencl_helpers.h"
#include "train/inference.h"
#include "train_helpers.h"

using namespace sf;
using namespace sf::testing;

namespace {

// Step -> loss of a metrics file's step records ("step:loss" strings, as
// step_losses returns them).
std::vector<double> loss_values(const std::vector<std::string>& records) {
  std::vector<double> losses;
  for (const std::string& r : records) losses.push_back(std::stod(r.substr(r.find(':') + 1)));
  return losses;
}

// The copy task with dropout, 2 epochs of ~50 batches each.
std::string copy_task_config(const fs::path& dir) {
  return write_config(dir, std::string(R"("data": {"task": "copy", "size": 1800}, "lang_src": "a",
    "lang_tgt": "b", "num_epochs": 2, "dropout": 0.1, )") + kTiny);
}

}  // namespace

TEST_SUITE("opencl") {
  TEST_CASE("opencl training: the first 50 steps' losses match the CPU run's (dropout 0.1, same seed)") {
    SF_NEED_OPENCL();
    TempDir on_cpu, on_opencl;
    std::string cpu_config = copy_task_config(on_cpu.path), cl_config = copy_task_config(on_opencl.path);
    CHECK(train::Trainer(train::load_config(cpu_config)).run() == 0);
    CHECK(train::Trainer(train::load_config(cl_config, {"device=opencl"})).run() == 0);
    std::vector<double> cpu = loss_values(step_losses(on_cpu.path / "run/metrics.jsonl"));
    std::vector<double> cl = loss_values(step_losses(on_opencl.path / "run/metrics.jsonl"));
    REQUIRE(cpu.size() >= 50);
    REQUIRE(cl.size() == cpu.size());
    double worst = 0.0;
    for (size_t i = 0; i < 50; ++i) {
      double relative = std::fabs(cl[i] - cpu[i]) / std::fabs(cpu[i]);
      worst = std::max(worst, relative);
      CHECK_MESSAGE(relative <= 1e-3, "step ", i + 1, ": opencl ", cl[i], " vs cpu ", cpu[i]);
    }
    MESSAGE("largest relative loss difference over 50 steps: ", worst, " (loss ", cpu[0], " -> ",
            cpu[49], ")");

    // A checkpoint trained on OpenCL scores the same on the CPU and on OpenCL.
    std::vector<data::Example> examples;
    for (int i = 0; i < 12; ++i) {
      std::vector<int32_t> ids;
      for (int j = 0; j <= i % 7; ++j) ids.push_back(4 + (i * 5 + j * 3) % 10);
      examples.push_back({ids, ids, {}});
    }
    auto score_on = [&](const char* device) {
      train::Config config = train::load_config(cl_config, {std::string("device=") + device});
      train::Session session = train::Session::open(config, std::nullopt);
      return train::score_pairs(*session.model, examples, config.seq_len, 5);
    };
    std::vector<train::PairNll> cl_scores = score_on("opencl"), cpu_scores = score_on("cpu");
    REQUIRE(cl_scores.size() == cpu_scores.size());
    for (size_t i = 0; i < cl_scores.size(); ++i) {
      CHECK(cl_scores[i].tokens == cpu_scores[i].tokens);
      CHECK(std::fabs(cl_scores[i].nll - cpu_scores[i].nll) <= 1e-4 * std::fabs(cpu_scores[i].nll));
    }
  }

  TEST_CASE("opencl: SCRATCHFORMER_OPENCL_SHAPES other than cpu or gpu is an error that says so") {
    SF_NEED_OPENCL();
    TempDir dir;
    std::string config = copy_task_config(dir.path);
    fs::path log = dir.path / "log.txt";
    std::string command = "SCRATCHFORMER_OPENCL_SHAPES=fast " + scratchformer_binary() + " train --config " +
                          config + " --set device=opencl >" + log.string() + " 2>&1";
    CHECK(std::system(command.c_str()) != 0);
    std::string output = read_file(log);
    CHECK_MESSAGE(output.find("SCRATCHFORMER_OPENCL_SHAPES=fast is not a kind of launch shapes: use cpu or gpu") !=
                      std::string::npos,
                  output);
  }

  // OpenCL C 1.2 has no bf16 arithmetic: mixed precision is the CPU's.
  TEST_CASE("opencl training: precision bf16 on the OpenCL device is a config error") {
    SF_NEED_OPENCL();
    TempDir dir;
    std::string config = write_config(dir.path, R"("data": {"task": "reverse", "size": 200}, "lang_src": "words",
      "lang_tgt": "reversed")");
    CHECK_THROWS_WITH_AS(train::load_config(config, {"device=opencl", "precision=bf16"}),
                         doctest::Contains("key 'precision': \"bf16\" runs on the CPU only; device \"opencl\" "
                                           "computes in float32"),
                         Error);
  }

  TEST_CASE("opencl training: the reverse task reaches the CPU run's 90% exact match") {
    SF_NEED_OPENCL();
    CHECK(train_toy_task(R"("data": {"task": "reverse", "size": 6000}, "lang_src": "words",
      "lang_tgt": "reversed", "num_epochs": 7)", {"device=opencl"}) >= 0.90);
  }
}
#endif  // SF_OPENCL
