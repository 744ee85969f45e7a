// What a killed run, a full disk or a diverging run leave behind: at every
// moment the last complete checkpoint loads and resumes exactly, and nothing a
// user keeps is damaged.
#include <doctest/doctest.h>

#include <chrono>
#include <thread>

#include "autograd/atomic_file.h"
#include "cli_process.h"
#include "nn/checkpoint.h"
#include "optim/clip.h"

using namespace sf;
using namespace sf::train;
using namespace sf::testing;

namespace {

// A model wide enough that saving it takes tens of milliseconds (7 MB of
// weights, 15 MB of optimizer moments), trained on 12 batches an epoch.
const char* kWide = R"("data": {"task": "copy", "size": 420}, "lang_src": "a", "lang_tgt": "b",
  "batch_size": 32, "lr": 0.001, "seq_len": 16, "d_model": 256, "N": 1, "h": 4, "d_ff": 1024,
  "min_frequency": 1, "val_fraction": 0.1, "keep_checkpoints": 0)";

std::string weights_of(const fs::path& dir, const std::string& tag) {
  return read_file(dir / "weights" / ("tmodel_" + tag + ".safetensors"));
}

// Files a save or write in progress leaves: ".new", ".prev" and ".tmp".
std::vector<std::string> leftovers(const fs::path& folder) {
  std::vector<std::string> found;
  for (const auto& entry : fs::recursive_directory_iterator(folder)) {
    std::string name = entry.path().filename().string();
    if (name.find(".new.") != std::string::npos || name.find(".prev.") != std::string::npos ||
        name.ends_with(".tmp"))
      found.push_back(name);
  }
  return found;
}

// Two epochs straight, the reference every interrupted run must reproduce.
struct WideRuns {
  TempDir straight;
  std::string body = std::string(kWide) + R"(, "num_epochs": 2)";
  WideRuns() { REQUIRE(run({"train", "--config", write_config(straight.path, body)}, straight.path / "log") == 0); }

  // A copy of `from` (a run's folder) in `to`, its config pointing at `to`.
  std::string copy_run(const fs::path& from, const fs::path& to) {
    fs::copy(from, to, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
    return write_config(to, body);
  }
};

// Kills `args`'s run at `delay` after its save of `tag` began (its first
// ".new" file appeared); returns false if the run ended before that.
bool kill_during_save(const std::vector<std::string>& args, const fs::path& dir, const std::string& tag,
                      std::chrono::microseconds delay) {
  pid_t pid = spawn(args, dir / "log");
  fs::path marker = dir / "weights" / ("tmodel_" + tag + ".new.safetensors.tmp");
  for (;;) {
    if (fs::exists(marker)) break;
    if (waitpid(pid, nullptr, WNOHANG) != 0) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  std::this_thread::sleep_for(delay);
  kill(pid, SIGKILL);
  wait_exit(pid);
  return true;
}

// How long a save of `tag` takes, from its first file to the end of the run.
std::chrono::microseconds save_duration(const std::vector<std::string>& args, const fs::path& dir,
                                        const std::string& tag) {
  pid_t pid = spawn(args, dir / "log");
  fs::path marker = dir / "weights" / ("tmodel_" + tag + ".new.safetensors.tmp");
  while (!fs::exists(marker) && waitpid(pid, nullptr, WNOHANG) == 0)
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  auto start = std::chrono::steady_clock::now();
  wait_exit(pid);
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start);
}

// Kills the resumed run `trials` times at moments spread over its save of
// tag 01; each time the latest checkpoint must be one of `valid` (weights
// bytes) and resuming from it must end with the straight run's weights.
void kill_trials(WideRuns& runs, const fs::path& base, int trials, const std::vector<std::string>& valid) {
  TempDir calibration;
  std::string config = runs.copy_run(base, calibration.path);
  std::vector<std::string> resume = {"train", "--config", config, "--set", "preload=latest"};
  auto window = save_duration(resume, calibration.path, "01");
  MESSAGE("saving tag 01 to the end of the run: ", window.count() / 1000.0, " ms");
  Rng rng(7);
  int outcomes[2] = {0, 0};
  for (int k = 0; k < trials; ++k) {
    TempDir trial;
    std::string trial_config = runs.copy_run(base, trial.path);
    resume[2] = trial_config;
    // Stratified: trial k falls in the k-th slice of the window (10% past its end).
    auto delay = std::chrono::microseconds(
        static_cast<int64_t>((k + rng.uniform()) / trials * 1.1 * static_cast<double>(window.count())));
    REQUIRE(kill_during_save(resume, trial.path, "01", delay));
    CheckpointStore store((trial.path / "weights").string(), "tmodel_", 0);
    std::optional<CheckpointFiles> latest = store.latest();
    REQUIRE(latest.has_value());
    std::string weights = read_file(latest->weights);
    auto which = std::find(valid.begin(), valid.end(), weights);
    CHECK_MESSAGE(which != valid.end(), "trial ", k, ": the latest checkpoint is neither the old nor the new one");
    if (which != valid.end()) ++outcomes[which == valid.begin() ? 0 : 1];
    CHECK(run(resume, trial.path / "log2") == 0);
    CHECK(weights_of(trial.path, "01") == weights_of(runs.straight.path, "01"));
    CHECK(leftovers(trial.path / "weights").empty());
  }
  MESSAGE(trials, " kills: ", outcomes[0], " left the previous checkpoint, ", outcomes[1], " the new one");
}

}  // namespace

TEST_CASE("checkpoints: SIGKILL at any moment of saving a new epoch leaves a checkpoint that resumes exactly") {
  WideRuns runs;
  TempDir base;  // epoch 00 complete: the straight run's first epoch
  REQUIRE(run({"train", "--config", write_config(base.path, runs.body), "--set", "num_epochs=1"}, base.path / "log") == 0);
  REQUIRE(weights_of(base.path, "00") == weights_of(runs.straight.path, "00"));
  kill_trials(runs, base.path, 10, {weights_of(base.path, "00"), weights_of(runs.straight.path, "01")});
}

TEST_CASE("checkpoints: SIGKILL while a stopped epoch's checkpoint is replaced keeps the old one loadable") {
  WideRuns runs;
  TempDir base;  // stopped by SIGINT inside epoch 01: tag 01 holds a mid-epoch checkpoint
  std::string config = write_config(base.path, runs.body);
  REQUIRE(run({"train", "--config", config, "--set", "num_epochs=1"}, base.path / "log") == 0);
  pid_t pid = spawn({"train", "--config", config, "--set", "preload=latest"}, base.path / "log");
  wait_for_lines(base.path / "run/metrics.jsonl", 12 + 1 + 4, pid);
  kill(pid, SIGINT);
  REQUIRE(wait_exit(pid) == 130);
  CheckpointStore store((base.path / "weights").string(), "tmodel_", 0);
  REQUIRE(store.latest_epoch() == 1);
  REQUIRE_FALSE(store.load_state("01").epoch_complete());
  kill_trials(runs, base.path, 10, {weights_of(base.path, "01"), weights_of(runs.straight.path, "01")});
}

TEST_CASE("checkpoints: a full disk while saving leaves the previous checkpoint intact, with one clear error") {
  WideRuns runs;
  TempDir dir;
  std::string config = write_config(dir.path, runs.body);
  REQUIRE(run({"train", "--config", config, "--set", "num_epochs=1"}, dir.path / "log") == 0);
  std::string weights = weights_of(dir.path, "00"), state = read_file(dir.path / "weights/tmodel_00.state.json"),
              moments = read_file(dir.path / "weights/tmodel_00.optim.safetensors");
  // 1 MB: room for the tokenizers, metrics and report, not for the 7 MB weights.
  CHECK(run({"train", "--config", config, "--set", "preload=latest"}, dir.path / "log2", 1 << 20) == 2);
  std::string log = read_file(dir.path / "log2");
  CHECK(log.find("scratchformer: error: " + (dir.path / "weights/tmodel_01.new.safetensors").string() +
                 ": cannot write (File too large)\n") != std::string::npos);
  CHECK(weights_of(dir.path, "00") == weights);
  CHECK(read_file(dir.path / "weights/tmodel_00.state.json") == state);
  CHECK(read_file(dir.path / "weights/tmodel_00.optim.safetensors") == moments);
  CHECK(leftovers(dir.path).empty());
  CHECK_FALSE(fs::exists(dir.path / "weights/tmodel_01.safetensors"));
  // With room again, the run resumes from epoch 00 as if nothing had happened.
  CHECK(run({"train", "--config", config, "--set", "preload=latest"}, dir.path / "log3") == 0);
  CHECK(weights_of(dir.path, "01") == weights_of(runs.straight.path, "01"));
}

TEST_CASE("checkpoints: a full disk while writing a tokenizer or the report: one clear error, nothing half-written") {
  TempDir dir;
  std::string config = write_config(dir.path, std::string(kTiny) + R"(, "data": {"task": "copy", "size": 300},
    "lang_src": "a", "lang_tgt": "b", "num_epochs": 1)");
  CHECK(run({"train", "--config", config}, dir.path / "log", 200) == 2);
  CHECK(read_file(dir.path / "log") .find("tokenizer_a.json: cannot write (File too large)\n") != std::string::npos);
  CHECK_FALSE(fs::exists(dir.path / "tokenizer_a.json"));
  CHECK(leftovers(dir.path).empty());

  // The report is this run's largest file: a limit between it and the rest.
  TempDir sizes;
  REQUIRE(run({"train", "--config", write_config(sizes.path, std::string(kTiny) + R"(, "data": {"task": "copy",
    "size": 300}, "lang_src": "a", "lang_tgt": "b", "num_epochs": 1)")}, sizes.path / "log") == 0);
  uintmax_t report = fs::file_size(sizes.path / "run/report.html"), others = 0;
  for (const auto& entry : fs::recursive_directory_iterator(sizes.path))
    if (entry.is_regular_file() && entry.path().filename() != "report.html" && entry.path().filename() != "log")
      others = std::max(others, entry.file_size());
  REQUIRE(others < report);
  CHECK(run({"train", "--config", config}, dir.path / "log2", (others + report) / 2) == 2);
  CHECK(read_file(dir.path / "log2").find("report.html: cannot write (File too large)\n") != std::string::npos);
  CHECK_FALSE(fs::exists(dir.path / "run/report.html"));
  CHECK(leftovers(dir.path).empty());
  // The epoch's checkpoint was saved before the report.
  CheckpointStore store((dir.path / "weights").string(), "tmodel_", 5);
  CHECK(store.latest_epoch() == 0);
}

TEST_CASE("checkpoints: preload latest never starts fresh over a checkpoint it cannot load") {
  TempDir dir;
  std::string config = write_config(dir.path, std::string(kTiny) + R"(, "data": {"task": "copy", "size": 300},
    "lang_src": "a", "lang_tgt": "b", "num_epochs": 1)");
  REQUIRE(run({"train", "--config", config}, dir.path / "log") == 0);
  std::string weights = weights_of(dir.path, "00");
  fs::remove(dir.path / "weights/tmodel_00.optim.safetensors");
  CHECK(run({"train", "--config", config, "--set", "preload=latest", "--set", "num_epochs=2"}, dir.path / "log2") == 2);
  CHECK(read_file(dir.path / "log2").find("tmodel_00.optim.safetensors: missing, so the checkpoint is incomplete") !=
        std::string::npos);
  CHECK(weights_of(dir.path, "00") == weights);
  fs::remove(dir.path / "weights/tmodel_00.state.json");  // no state file either: still not a fresh start
  CHECK(run({"train", "--config", config, "--set", "preload=latest", "--set", "num_epochs=2"}, dir.path / "log2") == 2);
  CHECK(read_file(dir.path / "log2").find("key 'preload': no complete checkpoint in") != std::string::npos);
  CHECK(weights_of(dir.path, "00") == weights);
  // Weights alone start a fresh optimizer at epoch 00, whose checkpoint would replace them.
  std::string alone = (dir.path / "weights/tmodel_00.safetensors").string();
  CHECK(run({"train", "--config", config, "--set", "preload=" + alone}, dir.path / "log2") == 2);
  CHECK(read_file(dir.path / "log2").find("would be overwritten by this run's checkpoints") != std::string::npos);
  CHECK(weights_of(dir.path, "00") == weights);

  // Weights changed since the save: they load, but not as this checkpoint.
  REQUIRE(run({"train", "--config", config}, dir.path / "log3") == 0);
  CheckpointStore store((dir.path / "weights").string(), "tmodel_", 5);
  REQUIRE(store.latest_epoch() == 0);
  std::string bytes = weights_of(dir.path, "00");
  bytes[bytes.size() - 1] ^= 1;  // one bit of the last weight
  std::ofstream(dir.path / "weights/tmodel_00.safetensors", std::ios::binary) << bytes;
  CHECK_FALSE(store.complete("00").has_value());
  CHECK(run({"train", "--config", config, "--set", "preload=latest", "--set", "num_epochs=2"}, dir.path / "log4") == 2);
  CHECK(read_file(dir.path / "log4").find("tmodel_00.safetensors: changed since it was saved") != std::string::npos);
}

TEST_CASE("training: non-finite updates are skipped and reported once; a diverged run stops after saving") {
  TempDir dir;
  std::string config = write_config(dir.path, std::string(kTiny) + R"(, "data": {"task": "copy", "size": 3000},
    "lang_src": "a", "lang_tgt": "b", "num_epochs": 1, "lr": 1e12, "schedule": "constant", "max_nonfinite_steps": 5)");
  // Clipping must not hide the divergence (a NaN norm used to scale every gradient by NaN).
  std::vector<std::string> clip;
  SUBCASE("without clipping") {}
  SUBCASE("with clipping") { clip = {"--set", "clip_grad_norm=1.0"}; }
  std::vector<std::string> args = {"train", "--config", config};
  args.insert(args.end(), clip.begin(), clip.end());
  CHECK(run(args, dir.path / "log") == 2);
  std::string log = read_file(dir.path / "log");
  size_t first = log.find("update skipped");
  CHECK(first != std::string::npos);
  CHECK(log.find("update skipped", first + 1) == std::string::npos);
  CHECK(log.find("training diverged: 5 optimizer steps in a row") != std::string::npos);
  // Every logged step was a real update with a finite loss; the saved state loads.
  std::ifstream metrics(dir.path / "run/metrics.jsonl");
  int steps = 0;
  for (std::string line; std::getline(metrics, line); ++steps) CHECK(nlohmann::json::parse(line)["loss"].is_number());
  CheckpointStore store((dir.path / "weights").string(), "tmodel_", 5);
  REQUIRE(store.latest_epoch() == 0);
  CHECK(store.load_state("00").global_step == steps);
  CHECK(Session::open(load_config(config), std::nullopt).checkpoint == store.weights_path("00"));
}

TEST_CASE("clip_grad_norm leaves gradients alone when their norm is not finite") {
  Tensor p = Tensor::from({1.0f, 2.0f}, {2});
  p.set_requires_grad();
  sum(p * Tensor::from({NAN, 3.0f}, {2})).backward();
  float norm = optim::clip_grad_norm({{"p", p}}, 1.0f);
  CHECK(std::isnan(norm));
  std::vector<float> g = p.grad().to_vector();
  CHECK(std::isnan(g[0]));
  CHECK(g[1] == 3.0f);  // not scaled by NaN
}

TEST_CASE("checkpoints: non-finite weights and a model larger than the file are refused at load") {
  TempDir dir;
  Rng init(1);
  auto model = nn::build_transformer({20, 20, 8, 8, 16, 1, 2, 32, 0.0f}, init);
  CHECK(nn::parameter_count(model->config()) == static_cast<double>(model->num_parameters()));
  double floats = 0;
  for (const auto& [name, t] : model->state_dict()) floats += static_cast<double>(t.numel());
  CHECK(nn::state_dict_floats(model->config()) == floats);
  model->named_parameters()[3].second.data()[5] = INFINITY;
  std::string path = dir.file("bad.safetensors");
  nn::save_checkpoint(*model, path);
  CHECK_THROWS_WITH(nn::load_checkpoint(*model, path),
                    (path + ": tensor '" + model->named_parameters()[3].first + "' holds NaN or infinite values").c_str());

  safetensors::Metadata huge = nn::checkpoint_metadata(model->config());
  huge["N"] = "1000000";
  safetensors::save(path, {{"x", Tensor::zeros({4})}}, huge);
  CHECK_THROWS_WITH(nn::read_checkpoint_config(path), doctest::Contains("__metadata__ describes a model of"));
}

TEST_CASE("training: a model too large for the machine's memory is refused before it is built") {
  TempDir dir;
  std::string config = write_config(dir.path, R"("data": {"task": "copy", "size": 100}, "lang_src": "a",
    "lang_tgt": "b", "d_model": 65536, "h": 1, "N": 1024, "d_ff": 65536)");
  CHECK_THROWS_WITH(Trainer(load_config(config)), doctest::Contains("training this model needs about"));
}

TEST_CASE("checkpoints: a tag caught between renames loads its .prev copy, never a mix of two saves") {
  TempDir dir;
  Rng init(1);
  auto model = nn::build_transformer({20, 20, 8, 8, 16, 1, 2, 32, 0.0f}, init);
  optim::Adam adam(model->named_parameters(), 1e-3f);
  CheckpointStore store(dir.path.string(), "tmodel_", 0);
  TrainingState state;
  state.batches_in_epoch = 10;
  state.batch = 4;
  state.dropout_rng = {1, 2, 3, 4};
  store.save("01", *model, adam.state_dict(), state);
  const CheckpointFiles live = store.files("01"), prev = store.files("01", ".prev");
  std::string old_weights = read_file(live.weights);
  for (auto m : {&CheckpointFiles::weights, &CheckpointFiles::optimizer, &CheckpointFiles::state})
    fs::copy_file(live.*m, prev.*m);
  // What a kill between steps 3 and 4 of a second save leaves: new weights, old rest.
  model->named_parameters()[0].second.data()[0] += 1.0f;
  nn::save_checkpoint(*model, live.weights);
  REQUIRE(read_file(live.weights) != old_weights);
  std::optional<CheckpointFiles> found = store.complete("01");
  REQUIRE(found.has_value());
  CHECK(found->weights == prev.weights);
  CHECK(store.load_state("01").batch == 4);
  // Without the copy, the tag is incomplete rather than mixed.
  for (auto m : {&CheckpointFiles::weights, &CheckpointFiles::optimizer, &CheckpointFiles::state})
    fs::remove(prev.*m);
  CHECK_FALSE(store.complete("01").has_value());
  CHECK(store.latest()->weights == live.weights);
  CHECK(live.problem().find("tmodel_01.safetensors: changed since it was saved") != std::string::npos);
  // The next save repairs the tag and leaves no copy behind.
  store.save("01", *model, adam.state_dict(), state);
  CHECK(store.latest_epoch() == 1);
  CHECK(leftovers(dir.path).empty());
}
