// Config loading: defaults, overrides, and one clear error per kind of mistake.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "bf16_levels.h"
#include "base/error.h"
#include "base/platform.h"
#include "cli_process.h"
#include "test_nn_helpers.h"
#include "autograd/kernels/gemm.h"
#include "setup/config.h"
#include "setup/resources.h"

using namespace sf;
using namespace sf::setup;

namespace {

// Config files in one scratch folder, removed when the suite ends.
std::string write_config(const std::string& text) {
  static testing::TempDir dir;
  static int counter = 0;
  auto path = dir.path / ("config_" + std::to_string(counter++) + ".json");
  std::ofstream(path) << text;
  return path.string();
}

// The error message load_config gives for `text` with `overrides`.
std::string error_for(const std::string& text, const std::vector<std::string>& overrides = {}) {
  std::string path = write_config(text);
  try {
    load_config(path, overrides);
  } catch (const Error& e) {
    std::string message = e.what();
    CHECK(message.rfind(path, 0) == 0);  // starts with the file
    return message.substr(path.size());
  }
  FAIL("no error for ", text);
  return "";
}

}  // namespace

TEST_CASE("config: an empty object gives the documented defaults") {
  Config c = load_config(write_config("{}"));
  CHECK(c.batch_size == 8);
  CHECK(c.num_epochs == 20);
  CHECK(c.lr == doctest::Approx(1e-4));
  CHECK(c.seq_len == 350);
  CHECK(c.d_model == 512);
  CHECK(c.N == 6);
  CHECK(c.h == 8);
  CHECK(c.d_ff == 2048);
  CHECK(c.dropout == doctest::Approx(0.1));
  CHECK(c.label_smoothing == doctest::Approx(0.1));
  CHECK(c.seed == 42);
  CHECK(c.lang_src == "en");
  CHECK(c.lang_tgt == "it");
  CHECK(c.data.task == kDefaultTask);
  CHECK(c.data.size == 20000);
  CHECK(c.model_folder == "weights");
  CHECK(c.model_basename == "tmodel_");
  CHECK(c.keep_checkpoints == 5);
  CHECK(c.checkpoint_every == 0);
  CHECK_FALSE(c.preload.has_value());
  CHECK(c.tokenizer_path("de") == "tokenizer_de.json");
  CHECK(c.experiment_name == "runs/tmodel");
  CHECK(c.optimizer.name == "adam");
  CHECK(c.optimizer.beta2 == doctest::Approx(0.999));
  CHECK(c.optimizer.eps == doctest::Approx(1e-9));
  CHECK(c.schedule == "constant");
  CHECK(c.warmup_steps == 4000);
  CHECK_FALSE(c.clip_grad_norm.has_value());
  CHECK(c.grad_accum == 1);
  CHECK(c.device == "cpu");
  CHECK(c.activation == "relu");
  CHECK(c.precision == DType::F32);
  CHECK(c.precision_dtype() == DType::F32);
  CHECK(c.val_examples == 2);
  CHECK(c.beam == 1);
  CHECK(c.length_penalty == doctest::Approx(0.6));
}

TEST_CASE("config: values, nested objects, integers as numbers, and --set overrides") {
  std::string path = write_config(R"({"lr": 1, "d_model": 64, "h": 4, "data": {"task": "reverse", "size": 500},
    "optimizer": {"name": "sgd", "momentum": 0.9, "nesterov": true}, "preload": "latest",
    "clip_grad_norm": 1})");
  Config c = load_config(path, {"batch_size=32", "optimizer.name=adamw", "lang_tgt=rev",
                                "data.size=700", "clip_grad_norm=null", "schedule=noam"});
  CHECK(c.lr == 1.0f);
  CHECK(c.batch_size == 32);
  CHECK(c.optimizer.name == "adamw");
  CHECK(c.optimizer.momentum == doctest::Approx(0.9));
  CHECK(c.lang_tgt == "rev");
  CHECK(c.data.task == "reverse");
  CHECK(c.data.size == 700);
  CHECK(c.preload == "latest");
  CHECK_FALSE(c.clip_grad_norm.has_value());
  CHECK(c.schedule == "noam");
  Config files = load_config(write_config(R"({"data": {"train": "a.tsv", "format": "jsonl"}})"));
  CHECK(files.data.train == "a.tsv");
  CHECK(files.data.format == "jsonl");
  CHECK_FALSE(files.data.is_task());
}

TEST_CASE("config: malformed JSON names the line") {
  CHECK(error_for("{\n  \"lr\": 1,\n  \"seed\": ,\n}") .find(":3: malformed JSON") == 0);
  CHECK(error_for("").find(":1: malformed JSON") == 0);
}

TEST_CASE("config: a key given twice in one object names it and its line") {
  CHECK(error_for("{\n  \"lr\": 0.1,\n  \"seed\": 1,\n  \"lr\": 0.2\n}") ==
        ":4: key 'lr' appears twice (only the last value would count)");
  CHECK(error_for("{\"data\": {\"size\": 10, \"task\": \"copy\",\n \"size\": 20}}") ==
        ":2: key 'data.size' appears twice (only the last value would count)");
  // The same name in different objects, or as a value, is no repetition.
  Config c = load_config(write_config(R"({"optimizer": {"name": "adam"}, "schedule": "noam",
                                          "data": {"task": "copy", "size": 100}, "experiment_name": "size"})"));
  CHECK(c.data.size == 100);
  // A repetition after a same-named key of another object is found on its own line.
  CHECK(error_for("{\"data\": {\"size\": 1},\n \"optimizer\": {\"name\": \"adam\",\n \"name\": \"sgd\"}}") ==
        ":3: key 'optimizer.name' appears twice (only the last value would count)");
}

TEST_CASE("config: unknown keys, top-level and nested") {
  CHECK(error_for(R"({"learning_rate": 0.1})") == ": key 'learning_rate': unknown key");
  CHECK(error_for(R"({"optimizer": {"beta": 0.9}})") == ": key 'optimizer.beta': unknown key");
  CHECK(error_for(R"({"data": {"task": "copy", "train": "x"}})").find("exactly one of") != std::string::npos);
  CHECK(error_for("{}", {"nosuch=1"}) == ": key 'nosuch': unknown key");
}

TEST_CASE("config: wrong types") {
  CHECK(error_for(R"({"batch_size": 8.5})") == ": key 'batch_size': expected an integer, got number 8.5");
  CHECK(error_for(R"({"batch_size": "8"})") == ": key 'batch_size': expected an integer, got string \"8\"");
  CHECK(error_for(R"({"lr": "fast"})") == ": key 'lr': expected a number, got string \"fast\"");
  CHECK(error_for(R"({"bucket": 1})") == ": key 'bucket': expected true or false, got number 1");
  CHECK(error_for(R"({"seq_len": 64, "max_tokens": 63})") ==
        ": key 'max_tokens': must be 0 (off) or at least seq_len (64), so that the longest pair fits a batch, got 63");
  CHECK(error_for(R"({"lang_src": 3})") == ": key 'lang_src': expected a string, got number 3");
  CHECK(error_for(R"({"checkpoint_every": 0.5})") == ": key 'checkpoint_every': expected an integer, got number 0.5");
  CHECK(error_for(R"({"optimizer": {"betas": [0.9]}})").find("'optimizer.betas': expected an array of two") != std::string::npos);
  CHECK(error_for(R"({"preload": 5})").find("'preload': expected null") != std::string::npos);
  CHECK(error_for(R"([1, 2])") == ": must be a JSON object");
}

TEST_CASE("config: out-of-range values") {
  CHECK(error_for(R"({"d_model": 30, "h": 4})") == ": key 'd_model': must be divisible by h (30 % 4 != 0)");
  CHECK(error_for(R"({"seq_len": 2})") == ": key 'seq_len': must be >= 3, got 2");
  CHECK(error_for(R"({"lr": 0})") == ": key 'lr': must be > 0, got 0");
  CHECK(error_for(R"({"lr": -1e-3})") == ": key 'lr': must be > 0, got -0.001");
  CHECK(error_for(R"({"lang_tgt": "en"})") == ": key 'lang_tgt': must differ from lang_src (\"en\")");
  CHECK(error_for(R"({"dropout": 1})") == ": key 'dropout': must be in [0, 1), got 1");
  CHECK(error_for(R"({"schedule": "linear"})") ==
        ": key 'schedule': must be one of \"constant\", \"noam\", \"cosine\", got \"linear\"");
  CHECK(error_for(R"({"activation": "swish"})") == ": key 'activation': must be one of \"relu\", \"gelu\", got \"swish\"");
  CHECK(error_for(R"({"data": {"task": "sorting"}})").find("'data.task': must be one of") != std::string::npos);
  CHECK(error_for(R"({"optimizer": {"name": "sgd", "nesterov": true}})") == ": key 'optimizer.nesterov': needs momentum > 0");
  CHECK(error_for(R"({"clip_grad_norm": 0})").find("'clip_grad_norm': expected null or a number > 0") != std::string::npos);
  CHECK(error_for(R"({"grad_accum": 0})") == ": key 'grad_accum': must be >= 1, got 0");
  CHECK(error_for(R"({"val_examples": -1})") == ": key 'val_examples': must be >= 0, got -1");
  CHECK(error_for(R"({"checkpoint_every": -100})") == ": key 'checkpoint_every': must be >= 0, got -100");
}

TEST_CASE("config: absurd sizes are refused before anything is allocated") {
  CHECK(error_for(R"({"seed": 18446744073709551615})") ==
        ": key 'seed': must be <= 9223372036854775807, got 18446744073709551615");
  CHECK(error_for(R"({"seq_len": 99999999999999999999})") ==
        ": key 'seq_len': expected an integer, got number 1e+20");
  CHECK(error_for(R"({"d_ff": 1099511627776})") == ": key 'd_ff': must be <= 1048576, got 1099511627776");
  CHECK(error_for(R"({"seq_len": 1099511627776})") == ": key 'seq_len': must be <= 65536, got 1099511627776");
  CHECK(error_for(R"({"N": 1000000})") == ": key 'N': must be <= 1024, got 1000000");
  CHECK(error_for(R"({"threads": 100000})") == ": key 'threads': must be <= 1024, got 100000");
  CHECK(error_for(R"({"beam": 1000000000})") == ": key 'beam': must be <= 1024, got 1000000000");
  CHECK(error_for(R"({"lr": 1e39})") == ": key 'lr': is beyond the range of a float, got 1e+39");
  CHECK(error_for(R"({"max_nonfinite_steps": -1})") == ": key 'max_nonfinite_steps': must be >= 0, got -1");
  CHECK(error_for(R"({"tokenizer_file": "tok.json"})") ==
        ": key 'tokenizer_file': must contain {0} (replaced by the language: one file per language), got \"tok.json\"");
}

TEST_CASE("config: a device this build or machine lacks") {
#ifndef SF_OPENCL
  CHECK(error_for(R"({"device": "opencl"})") ==
        ": key 'device': device \"opencl\": this build has no OpenCL backend (make OPENCL=1 builds "
        "one: build/opencl/scratchformer)");
#endif
  CHECK(error_for(R"({"device": "cuda"})").find("must be one of \"cpu\", \"opencl\"") != std::string::npos);
}

TEST_CASE("config: precision is fp32, bf16 or auto (bf16 where this CPU multiplies bf16 faster)") {
  CHECK(load_config(write_config("{}"), {"precision=bf16"}).precision_dtype() == DType::BF16);
  const Config automatic = load_config(write_config("{}"), {"precision=auto"});
  testing::at_each_bf16_gemm([&](kernels::Bf16Gemm level) {
    const bool faster = level != kernels::Bf16Gemm::kPortable;
    CHECK(automatic.precision_dtype() == (faster ? DType::BF16 : DType::F32));
    CHECK(automatic.precision_note().rfind(faster ? "precision auto: bf16" : "precision auto: fp32: ", 0) == 0);
    const std::string bf16_note = load_config(write_config("{}"), {"precision=bf16"}).precision_note();
    CHECK(bf16_note.find(faster ? "float32 accumulation" : "no speed-up") != std::string::npos);
  });
  CHECK(load_config(write_config("{}")).precision_note().empty());
  CHECK(error_for(R"({"precision": "fp16"})") ==
        ": key 'precision': must be one of \"fp32\", \"bf16\", \"auto\", got \"fp16\"");
  CHECK(error_for(R"({"precision": 16})") == ": key 'precision': expected a string, got number 16");
}

TEST_CASE("config: a missing file and a bad --set") {
  CHECK_THROWS_WITH_AS(load_config("/nonexistent/c.json"),
                       "/nonexistent/c.json: cannot open the config file", Error);
  CHECK(error_for("{}", {"batch_size"}) == ": --set 'batch_size': expected key=value");
  CHECK(error_for(R"({"lr": 1})", {"lr.x=1"}) == ": --set lr.x: 'lr.' is not an object");
}

TEST_CASE("config: the threads key sets the kernels' thread count, and the log says it") {
  CHECK(setup::threads_to_use(3) == 3);
  CHECK(setup::threads_to_use(1) == 1);
  // 0: the cores this process may run on, shared among the ranks on the machine.
  const int machine = static_cast<int>(std::thread::hardware_concurrency()), allowed = platform::cores_allowed();
  const int cores = allowed > 0 ? std::min(allowed, machine) : machine;
  CHECK(setup::threads_to_use(0) == cores);
  CHECK(setup::threads_to_use(0, 2) == std::max(1, cores / 2));
  // Data parallelism leaves one core to the ranks' communication threads.
  CHECK(setup::threads_to_use(0, 2, true) == std::max(1, (cores - 1) / 2));
  CHECK(setup::threads_to_use(0, 1, true) == std::max(1, cores - 1));

  testing::TempDir dir;
  std::string config = testing::write_config(dir.path, R"("data": {"task": "copy", "size": 100}, "num_epochs": 0)" +
                                                           std::string(", ") + testing::kTiny);
  // The log's count is the pool's own (kernels::num_threads()).
  for (std::string threads : {"1", "3"}) {
    CHECK(testing::run({"train", "--config", config, "--set", "threads=" + threads}, dir.path / "log") == 0);
    std::string log = testing::read_file(dir.path / "log");
    CHECK_MESSAGE(log.find("parameters on cpu, " + threads + " CPU threads") != std::string::npos, log);
  }
}

// The configs the repository ships are what users start from: each must load,
// and no two may write into the same folders, or training one would overwrite
// another's checkpoints, tokenizers or metrics.
TEST_CASE("config: every file in configs/ loads, and each writes into folders of its own") {
  std::map<std::string, std::string> owner;  // folder -> the config that writes there
  int configs = 0;
  for (const auto& entry : std::filesystem::directory_iterator("configs")) {
    if (entry.path().extension() != ".json") continue;
    const std::string name = entry.path().string();
    CAPTURE(name);
    Config c = load_config(name);
    ++configs;
    for (const std::string& folder :
         {c.model_folder, c.experiment_name, std::filesystem::path(c.tokenizer_path(c.lang_src)).parent_path().string()}) {
      CAPTURE(folder);
      const std::string& writer = owner.emplace(folder, name).first->second;  // the first to claim it
      CHECK_MESSAGE(writer == name, "also written by ", writer);
    }
  }
  CHECK(configs >= 10);
}
