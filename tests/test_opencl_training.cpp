// Training on the OpenCL device: the same run as on the CPU step for step,
// a toy task to the CPU run's accuracy, and checkpoints that translate,
// evaluate and score the same on either device. Built only with OPENCL=1
// (suite "opencl").
#ifdef SF_OPENCL
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli_process.h"
#include "data/toy_tasks.h"
#include "opencl_helpers.h"
#include "train_helpers.h"

using namespace sf;
using namespace sf::testing;

namespace {

// How closely a run on OpenCL follows the CPU's losses, relative: the bound
// docs/11-devices.md states.
constexpr double kLossTolerance = 1e-5;

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

// The standard output of `scratchformer ARGS --set device=DEVICE <input`,
// which must succeed.
std::string run_on(const std::string& device, const std::string& args, const fs::path& input) {
  fs::path out = input.parent_path() / "stdout.txt", err = input.parent_path() / "stderr.txt";
  std::string command = scratchformer_binary() + " " + args + " --set device=" + device + " <" + input.string() +
                        " >" + out.string() + " 2>" + err.string();
  CHECK_MESSAGE(std::system(command.c_str()) == 0, command, "\n", read_file(err));
  return read_file(out);
}

// The latest checkpoint of `config`'s run, on the CPU and on OpenCL, on 24
// pairs of `task`: translate (greedy and beam search) and eval give the same
// lines and metrics on both devices, and score NLLs within kLossTolerance.
void check_inference_matches_cpu(const std::string& config, const std::string& task, const fs::path& dir) {
  fs::path sources = dir / "sources.txt", pairs = dir / "pairs.tsv";
  {
    std::ofstream sources_out(sources), pairs_out(pairs);
    for (const data::Pair& pair : data::generate_toy_task(task, 24, 7)) {
      sources_out << pair.src << "\n";
      pairs_out << pair.src << "\t" << pair.tgt << "\n";
    }
  }
  const std::string with_config = " --config " + config;
  for (const std::string args : {"translate", "translate --beam 4"}) {
    CAPTURE(args);
    std::string cpu = run_on("cpu", args + with_config, sources), cl = run_on("opencl", args + with_config, sources);
    CHECK(std::count(cpu.begin(), cpu.end(), '\n') == 24);
    CHECK(cl == cpu);
  }

  auto metrics_on = [&](const char* device) {
    auto metrics = nlohmann::json::parse(run_on(device, "eval --beam 4 --data " + pairs.string() + with_config, pairs));
    metrics.erase("seconds");
    return metrics;
  };
  nlohmann::json cpu_metrics = metrics_on("cpu"), cl_metrics = metrics_on("opencl");
  CHECK(cpu_metrics["sentences"] == 24);
  // The same translations, so the same metrics; the references' loss is a
  // sum of floats in another order, equal to the NLLs' tolerance.
  const double cpu_loss = cpu_metrics["loss"], cl_loss = cl_metrics["loss"];
  CHECK_MESSAGE(std::fabs(cl_loss - cpu_loss) <= kLossTolerance * std::fabs(cpu_loss), "opencl loss ", cl_loss,
                " vs cpu ", cpu_loss);
  cpu_metrics.erase("loss");
  cl_metrics.erase("loss");
  CHECK_MESSAGE(cl_metrics == cpu_metrics, "opencl ", cl_metrics.dump(), "\ncpu    ", cpu_metrics.dump());

  // "NLL<TAB>T" per pair.
  std::istringstream cpu_scores(run_on("cpu", "score" + with_config, pairs)),
      cl_scores(run_on("opencl", "score" + with_config, pairs));
  int lines = 0;
  for (double cpu_nll, cl_nll; cpu_scores >> cpu_nll && cl_scores >> cl_nll; ++lines) {
    int cpu_tokens = 0, cl_tokens = 0;
    cpu_scores >> cpu_tokens;
    cl_scores >> cl_tokens;
    CHECK(cl_tokens == cpu_tokens);
    CHECK_MESSAGE(std::fabs(cl_nll - cpu_nll) <= kLossTolerance * std::fabs(cpu_nll), "pair ", lines + 1,
                  ": opencl NLL ", cl_nll, " vs cpu ", cpu_nll);
  }
  CHECK(lines == 24);
}

}  // namespace

TEST_SUITE("opencl") {
  TEST_CASE("opencl training: the first 50 steps' losses match the CPU run's (dropout 0.1, same seed)") {
    SF_NEED_OPENCL();
    TempDir on_cpu, on_opencl;
    std::string cpu_config = copy_task_config(on_cpu.path), cl_config = copy_task_config(on_opencl.path);
    CHECK(train::Trainer(setup::load_config(cpu_config)).run() == 0);
    CHECK(train::Trainer(setup::load_config(cl_config, {"device=opencl"})).run() == 0);
    std::vector<double> cpu = loss_values(step_losses(on_cpu.path / "run/metrics.jsonl"));
    std::vector<double> cl = loss_values(step_losses(on_opencl.path / "run/metrics.jsonl"));
    REQUIRE(cpu.size() >= 50);
    REQUIRE(cl.size() == cpu.size());
    double worst = 0.0;
    for (size_t i = 0; i < 50; ++i) {
      double relative = std::fabs(cl[i] - cpu[i]) / std::fabs(cpu[i]);
      worst = std::max(worst, relative);
      CHECK_MESSAGE(relative <= kLossTolerance, "step ", i + 1, ": opencl ", cl[i], " vs cpu ", cpu[i]);
    }
    MESSAGE("largest relative loss difference over 50 steps: ", worst, " (loss ", cpu[0], " -> ",
            cpu[49], ")");

    // The checkpoint trained on OpenCL, used on either device.
    check_inference_matches_cpu(cl_config, "copy", on_opencl.path);
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
    CHECK_THROWS_WITH_AS(setup::load_config(config, {"device=opencl", "precision=bf16"}),
                         doctest::Contains("key 'precision': \"bf16\" runs on the CPU only; device \"opencl\" "
                                           "computes in float32"),
                         Error);
  }

  // The two runs part ways after a few dozen steps (rounding differences grow
  // as in any two runs that sum in different orders), so they are compared
  // where both have learnt the task: ten epochs, 97.3% on OpenCL and 96.7% on
  // the CPU (seven epochs ended 1.7 points apart, 93.0% and 94.7%). The model
  // then translates with confidence, as one in use does.
  TEST_CASE("opencl training: the reverse task reaches the CPU run's exact match (97%, within 0.02), and its "
            "checkpoint translates, evaluates and scores as on the CPU") {
    SF_NEED_OPENCL();
    const std::string task = R"("data": {"task": "reverse", "size": 6000}, "lang_src": "words",
      "lang_tgt": "reversed", "num_epochs": 10, )";
    auto exact_match_on = [](const std::string& config, const std::string& device) {
      CHECK(train::Trainer(setup::load_config(config, {"device=" + device})).run() == 0);
      return exact_match(config, {"device=" + device});
    };
    TempDir on_cpu, on_opencl;
    const std::string cl_config = write_config(on_opencl.path, task + kSmall);
    const double cpu = exact_match_on(write_config(on_cpu.path, task + kSmall), "cpu"),
                 cl = exact_match_on(cl_config, "opencl");
    MESSAGE("exact match: opencl ", 100 * cl, "%, cpu ", 100 * cpu, "%");
    CHECK(std::fabs(cl - cpu) <= 0.02);
    CHECK(cl >= 0.95);

    check_inference_matches_cpu(cl_config, "reverse", on_opencl.path);
  }
}
#endif  // SF_OPENCL
