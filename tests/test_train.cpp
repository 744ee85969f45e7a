// Training for real, kept small: toy tasks to a target accuracy, exact resume
// (also after SIGINT), recovery after SIGKILL, and the command's errors.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "autograd/engine.h"
#include "nn/checkpoint.h"
#include "train_helpers.h"

using namespace sf;
using namespace sf::train;
using namespace sf::testing;
namespace fs = std::filesystem;

namespace {

std::string binary() { return fs::absolute(std::string(SF_BUILD_DIR) + "/scratchformer").string(); }

// Starts the command with `args` in the background, output to `log`.
pid_t spawn(const std::vector<std::string>& args, const fs::path& log) {
  pid_t pid = fork();
  if (pid == 0) {
    FILE* out = std::fopen(log.c_str(), "w");
    dup2(fileno(out), STDOUT_FILENO);
    dup2(fileno(out), STDERR_FILENO);
    std::vector<char*> argv;
    std::string bin = binary();
    argv.push_back(bin.data());
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(bin.c_str(), argv.data());
    _exit(127);
  }
  return pid;
}

int wait_exit(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int run(const std::vector<std::string>& args, const fs::path& log) { return wait_exit(spawn(args, log)); }

// Waits until `path` has at least `lines` lines (or the process ended).
void wait_for_lines(const fs::path& path, size_t lines, pid_t pid) {
  for (int i = 0; i < 6000; ++i) {
    std::string text = read_file(path);
    if (static_cast<size_t>(std::count(text.begin(), text.end(), '\n')) >= lines) return;
    if (waitpid(pid, nullptr, WNOHANG) != 0) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace

TEST_CASE("train: the reverse task reaches 90% exact match with a tiny model") {
  CHECK(train_toy_task(R"("data": {"task": "reverse", "size": 6000}, "lang_src": "words",
    "lang_tgt": "reversed", "num_epochs": 7)") >= 0.90);
}

TEST_CASE("train: the dates task reaches 90% exact match with a tiny model") {
  CHECK(train_toy_task(R"("data": {"task": "dates", "size": 4000}, "lang_src": "en", "lang_tgt": "iso",
    "num_epochs": 3)") >= 0.90);
}

TEST_CASE("train: 4 epochs equal 2 epochs then a resumed run to 4, bit for bit") {
  testing::TempDir straight, resumed;
  std::string body = std::string(R"("data": {"task": "copy", "size": 400}, "lang_src": "a", "lang_tgt": "b",
    "dropout": 0.1, "grad_accum": 2, "optimizer": {"name": "adamw", "weight_decay": 0.01}, )") + kTiny;
  std::string a = write_config(straight.path, body), b = write_config(resumed.path, body);
  CHECK(Trainer(load_config(a, {"num_epochs=4"})).run() == 0);
  CHECK(Trainer(load_config(b, {"num_epochs=2"})).run() == 0);
  CHECK(Trainer(load_config(b, {"num_epochs=4", "preload=latest"})).run() == 0);
  std::vector<std::string> losses = step_losses(straight.path / "run/metrics.jsonl");
  CHECK(losses.size() > 20);
  CHECK(step_losses(resumed.path / "run/metrics.jsonl") == losses);
  CHECK(read_file(straight.path / "weights/tmodel_03.safetensors") ==
        read_file(resumed.path / "weights/tmodel_03.safetensors"));
  CHECK(read_file(straight.path / "weights/tmodel_03.optim.safetensors") ==
        read_file(resumed.path / "weights/tmodel_03.optim.safetensors"));
}

// Two runs of the same 2-epoch config (85 steps an epoch): `straight`, trained
// here without interruption, and `cut`, for the test to interrupt and resume.
struct InterruptedRun {
  testing::TempDir straight, cut;
  std::string cut_config;
  InterruptedRun() {
    std::string body = std::string(R"("data": {"task": "copy", "size": 3000}, "lang_src": "a",
      "lang_tgt": "b", "num_epochs": 2, )") + kTiny;
    CHECK(run({"train", "--config", write_config(straight.path, body)}, straight.path / "log") == 0);
    cut_config = write_config(cut.path, body);
  }
  int resume() { return run({"train", "--config", cut_config, "--set", "preload=latest"}, cut.path / "log2"); }
  bool same_final_weights() {
    return read_file(cut.path / "weights/tmodel_01.safetensors") ==
           read_file(straight.path / "weights/tmodel_01.safetensors");
  }
};

TEST_CASE("train: SIGINT saves the position mid-epoch and exits 130; resuming matches the straight run") {
  InterruptedRun runs;
  const fs::path& stopped = runs.cut.path;
  pid_t pid = spawn({"train", "--config", runs.cut_config}, stopped / "log");
  wait_for_lines(stopped / "run/metrics.jsonl", 30, pid);  // mid-epoch 0
  kill(pid, SIGINT);
  CHECK(wait_exit(pid) == 130);
  CheckpointStore store((stopped / "weights").string(), "tmodel_", 5);
  REQUIRE(store.latest_epoch() == 0);
  TrainingState state = store.load_state("00");
  CHECK(state.batch >= 30);
  CHECK(state.batch < state.batches_in_epoch);

  CHECK(runs.resume() == 0);
  CHECK(step_losses(stopped / "run/metrics.jsonl") == step_losses(runs.straight.path / "run/metrics.jsonl"));
  CHECK(runs.same_final_weights());
}

TEST_CASE("train: after SIGKILL mid-epoch the last checkpoint loads and training resumes from it") {
  InterruptedRun runs;
  const fs::path& killed = runs.cut.path;
  pid_t pid = spawn({"train", "--config", runs.cut_config}, killed / "log");
  wait_for_lines(killed / "run/metrics.jsonl", 85 + 1 + 20, pid);  // into epoch 1
  kill(pid, SIGKILL);
  wait_exit(pid);
  CheckpointStore store((killed / "weights").string(), "tmodel_", 5);
  REQUIRE(store.latest_epoch() == 0);
  // The checkpoint left behind loads (no temporary or partial file is taken for one).
  Session session = Session::open(load_config(runs.cut_config), std::nullopt);
  CHECK(session.checkpoint == store.weights_path("00"));

  CHECK(runs.resume() == 0);
  CHECK(runs.same_final_weights());
  // The steps the killed run logged after its checkpoint are not logged twice.
  CHECK(step_losses(killed / "run/metrics.jsonl") == step_losses(runs.straight.path / "run/metrics.jsonl"));
}

TEST_CASE("train: config and data errors exit 2 with one line naming the key or file") {
  testing::TempDir dir;
  auto error_line = [&](const std::string& body, std::vector<std::string> extra = {}) {
    std::string config = write_config(dir.path, body);
    std::vector<std::string> args = {"train", "--config", config};
    args.insert(args.end(), extra.begin(), extra.end());
    int status = run(args, dir.path / "log");
    std::string log = read_file(dir.path / "log");
    CHECK(status == 2);
    CHECK(std::count(log.begin(), log.end(), '\n') == 1);
    return log;
  };
  CHECK(error_line(R"("d_model": 30, "h": 4)").find("key 'd_model': must be divisible by h") != std::string::npos);
  CHECK(error_line(R"("seq_len": 2)").find("key 'seq_len': must be >= 3") != std::string::npos);
  CHECK(error_line(R"("lr": -1)").find("key 'lr': must be > 0") != std::string::npos);
  CHECK(error_line(R"("lang_tgt": "en")").find("key 'lang_tgt': must differ") != std::string::npos);
  CHECK(error_line(R"("batchsize": 4)").find("key 'batchsize': unknown key") != std::string::npos);
  CHECK(error_line(R"("data": {"train": "/nonexistent/train.tsv"})").find("/nonexistent/train.tsv") !=
        std::string::npos);
  CHECK(error_line(R"("num_epochs": 1)", {"--set", "optimizer.name=rmsprop"}).find("'optimizer.name'") !=
        std::string::npos);
  std::string log = error_line(R"("num_epochs": 1)", {"--bogus", "1"});
  CHECK(log.rfind("scratchformer: error: ", 0) == 0);
}

TEST_CASE("score: prints the unsmoothed teacher-forced NLL and the target length + 1") {
  testing::TempDir dir;
  std::string config = write_config(dir.path, std::string(R"("data": {"task": "copy", "size": 300},
    "lang_src": "a", "lang_tgt": "b", "num_epochs": 1, "label_smoothing": 0.1, )") + kTiny);
  REQUIRE(Trainer(load_config(config)).run() == 0);
  Session session = Session::open(load_config(config), std::nullopt);
  std::vector<std::pair<std::string, std::string>> pairs = {{"ka lo", "ka lo"}, {"mi", "lo ka mi"}};
  // The expected NLL, by hand: teacher forcing on [SOS] tgt -> tgt [EOS].
  std::vector<double> expect;
  for (auto& [src, tgt] : pairs) {
    NoGradGuard no_grad;
    std::vector<int32_t> s = session.src_tokenizer.encode(src), t = session.tgt_tokenizer.encode(tgt);
    std::vector<int32_t> enc = {2}, dec = {2};
    enc.insert(enc.end(), s.begin(), s.end());
    enc.push_back(3);
    dec.insert(dec.end(), t.begin(), t.end());
    Tensor e = Tensor::from_ints(enc, {1, int64_t(enc.size())}), d = Tensor::from_ints(dec, {1, int64_t(dec.size())});
    Tensor lp = testing::log_probs(*session.model, e, d);
    double nll = 0;
    t.push_back(3);
    for (size_t i = 0; i < t.size(); ++i) nll -= lp.data()[i * lp.size(-1) + t[i]];
    expect.push_back(nll);
  }
  std::ofstream(dir.path / "pairs.tsv") << "ka lo\tka lo\nmi\tlo ka mi\n";
  std::string command = "cd '" + dir.path.string() + "' && '" + binary() + "' score --config config.json < pairs.tsv";
  FILE* pipe = popen(command.c_str(), "r");
  REQUIRE(pipe);
  char buffer[256];
  std::vector<std::string> lines;
  while (fgets(buffer, sizeof buffer, pipe)) lines.push_back(buffer);
  CHECK(pclose(pipe) == 0);
  REQUIRE(lines.size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    double nll = 0;
    long long count = 0;
    CHECK(std::sscanf(lines[i].c_str(), "%lf\t%lld", &nll, &count) == 2);
    CHECK(nll == doctest::Approx(expect[i]).epsilon(1e-5));
    CHECK(count == int64_t(session.tgt_tokenizer.encode(pairs[i].second).size()) + 1);
  }
}

TEST_CASE("train: keep_checkpoints prunes old epochs; the best by BLEU is kept apart; preload of a bare weights file") {
  testing::TempDir dir;
  std::string config = write_config(dir.path, std::string(R"("data": {"task": "dates", "size": 600},
    "lang_src": "en", "lang_tgt": "iso", "num_epochs": 3, "keep_checkpoints": 2, )") + kTiny);
  REQUIRE(Trainer(load_config(config)).run() == 0);
  fs::path weights = dir.path / "weights";
  CHECK_FALSE(fs::exists(weights / "tmodel_00.safetensors"));
  CHECK_FALSE(fs::exists(weights / "tmodel_00.state.json"));
  for (std::string tag : {"01", "02", "best"}) {
    CAPTURE(tag);
    CHECK(fs::exists(weights / ("tmodel_" + tag + ".safetensors")));
    CHECK(fs::exists(weights / ("tmodel_" + tag + ".optim.safetensors")));
    CHECK(fs::exists(weights / ("tmodel_" + tag + ".state.json")));
  }
  CheckpointStore store(weights.string(), "tmodel_", 2);
  CHECK(store.latest_epoch() == 2);
  // "best" holds the epoch with the highest validation BLEU seen.
  double best = -1;
  std::ifstream metrics(dir.path / "run/metrics.jsonl");
  for (std::string line; std::getline(metrics, line);) {
    auto r = nlohmann::json::parse(line);
    if (r["kind"] == "valid") best = std::max(best, r["bleu"].get<double>());
  }
  CHECK(store.load_state("best").best_bleu == doctest::Approx(best));

  // A weights file alone (as exported from PyTorch) starts a fresh optimizer at
  // epoch 0 from those weights.
  fs::create_directories(dir.path / "export");
  fs::copy_file(weights / "tmodel_02.safetensors", dir.path / "export/model.safetensors");
  Trainer trainer(load_config(config, {"preload=" + (dir.path / "export/model.safetensors").string(),
                                        "num_epochs=1", "model_folder=" + (dir.path / "w2").string()}));
  Session reference = Session::open(load_config(config), weights.string() + "/tmodel_02.safetensors");
  CHECK(trainer.model().state_dict()[0].second.to_vector() == reference.model->state_dict()[0].second.to_vector());
  CHECK(trainer.run() == 0);
  CheckpointStore fresh((dir.path / "w2").string(), "tmodel_", 2);
  CHECK(fresh.latest_epoch() == 0);  // trained epoch 0, not a continuation of epoch 2
  CHECK(fresh.load_state("00").global_step * 2 == store.load_state("01").global_step);
}
