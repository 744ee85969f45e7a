// What a killed run, a full disk or a diverging run leave behind: at every
// moment the last complete checkpoint loads and resumes exactly, and nothing a
// user keeps is damaged.
#include <doctest/doctest.h>

#include <fcntl.h>
#if defined(__linux__)
#include <sched.h>
#include <sys/mount.h>
#endif

#include <array>
#include <set>

#include "base/atomic_file.h"
#include "base/file_steps.h"
#include "cli_process.h"
#include "nn/checkpoint.h"
#include "optim/clip.h"
#include "report/metrics_log.h"

using namespace sf;
using namespace sf::setup;
using namespace sf::testing;

namespace {

// A model whose checkpoint (7 MB of weights, 15 MB of optimizer moments)
// dwarfs every other file of a run, trained on 12 batches an epoch.
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

// A copy of the run in `from` (a run's folder) in `to`, its config (`body`)
// pointing at `to`; returns the config's path.
std::string copy_run(const fs::path& from, const fs::path& to, const std::string& body) {
  fs::copy(from, to, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  return write_config(to, body);
}

// Two epochs straight, the reference every interrupted run must reproduce;
// trained once, for all the test cases that need it.
struct WideRuns {
  TempDir straight;
  std::string body = std::string(kWide) + R"(, "num_epochs": 2)";
  WideRuns() { REQUIRE(run({"train", "--config", write_config(straight.path, body)}, straight.path / "log") == 0); }
};

const WideRuns& wide_runs() {
  static const WideRuns runs;
  return runs;
}

}  // namespace

TEST_CASE("checkpoints: a full disk while saving leaves the previous checkpoint intact, with one clear error") {
  const WideRuns& runs = wide_runs();
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

  // With a model of d_model 8 and 8 heads, the report (its attention
  // explorer) is the run's largest file: a limit between it and the rest.
  auto narrow = [](std::string config) {
    return std::vector<std::string>{"train", "--config", config, "--set", "d_model=8", "--set", "d_ff=16",
                                    "--set", "h=8"};
  };
  TempDir sizes;
  REQUIRE(run(narrow(write_config(sizes.path, std::string(kTiny) + R"(, "data": {"task": "copy",
    "size": 300}, "lang_src": "a", "lang_tgt": "b", "num_epochs": 1)")), sizes.path / "log") == 0);
  uintmax_t report = fs::file_size(sizes.path / "run/report.html"), others = 0;
  for (const auto& entry : fs::recursive_directory_iterator(sizes.path))
    if (entry.is_regular_file() && entry.path().filename() != "report.html" && entry.path().filename() != "log")
      others = std::max(others, entry.file_size());
  REQUIRE(others < report);
  CHECK(run(narrow(config), dir.path / "log2", (others + report) / 2) == 2);
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
  REQUIRE(run({"train", "--config", config, "--set", "overwrite=true"}, dir.path / "log3") == 0);
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
    "lang_src": "a", "lang_tgt": "b", "num_epochs": 1, "max_nonfinite_steps": 5)");
  // Clipping must not hide the divergence (a NaN norm used to scale every gradient by NaN).
  std::vector<std::string> clip;
  SUBCASE("without clipping") {}
  SUBCASE("with clipping") { clip = {"--set", "clip_grad_norm=1.0"}; }
  std::vector<std::string> args = {"train", "--config", config, "--set", "lr=1e12", "--set", "schedule=constant"};
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
  CHECK(infer::Session::open(load_config(config), std::nullopt).checkpoint == store.weights_path("00"));
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
  CHECK_THROWS_WITH(train::Trainer(load_config(config)), doctest::Contains("training this model needs about"));
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
  store.save("01", *model, {}, adam.state_dict(), state);
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
  store.save("01", *model, {}, adam.state_dict(), state);
  CHECK(store.latest_epoch() == 1);
  CHECK(leftovers(dir.path).empty());
}

// Kills, stops and full disks at chosen file-system steps of a run
// (SCRATCHFORMER_FILE_STEPS, base/file_steps.h), on the tiny model: each
// run takes a fraction of a second, so a test can try every step of a save.
namespace {

// Two epochs straight (the reference) and the first epoch alone (the
// checkpoint the runs below resume from), each trained once for all the test
// cases that need them.
struct TinyRuns {
  std::string body = std::string(kTiny) + R"(, "data": {"task": "copy", "size": 200}, "lang_src": "a",
    "lang_tgt": "b", "num_epochs": 2, "threads": 1)";
  TempDir straight, first_epoch;
  TinyRuns() {
    REQUIRE(run({"train", "--config", write_config(straight.path, body)}, straight.path / "log") == 0);
    REQUIRE(run({"train", "--config", write_config(first_epoch.path, body), "--set", "num_epochs=1"},
                first_epoch.path / "log") == 0);
  }
  std::string copy_run(const fs::path& from, const fs::path& to) const { return ::copy_run(from, to, body); }
};

const TinyRuns& tiny_runs() {
  static const TinyRuns runs;
  return runs;
}

std::vector<std::string> resume_args(const std::string& config) {
  return {"train", "--config", config, "--set", "preload=latest"};
}

std::string file_steps_setting(const std::string& value) { return "SCRATCHFORMER_FILE_STEPS=" + value; }

struct FileStep {
  int64_t number = 0;
  std::string what, path;
  std::string name() const { return fs::path(path).filename().string(); }
  // The file the step is for: a temporary file's real name.
  std::string file() const { return path.ends_with(".tmp") ? path.substr(0, path.size() - 4) : path; }
};

// The file-system steps a process printed to `log` under SCRATCHFORMER_FILE_STEPS=list.
std::vector<FileStep> file_steps_in(const fs::path& log) {
  std::vector<FileStep> steps;
  std::ifstream in(log);
  const std::string prefix = "file step ";
  for (std::string line; std::getline(in, line);) {
    if (!line.starts_with(prefix)) continue;
    size_t colon = line.find(": "), space = line.find(' ', colon + 2);
    REQUIRE(space != std::string::npos);
    steps.push_back({std::stoll(line.substr(prefix.size(), colon - prefix.size())),
                     line.substr(colon + 2, space - colon - 2), line.substr(space + 1)});
  }
  return steps;
}

// The file-system steps of a run.
std::vector<FileStep> file_steps_of(const std::vector<std::string>& args, const fs::path& log) {
  REQUIRE(run(args, log, std::nullopt, {file_steps_setting("list")}) == 0);
  return file_steps_in(log);
}

// The steps of the save of checkpoint `tag`: from the first on one of its
// files to the last (the folder's fsyncs between them included).
std::vector<FileStep> steps_of_save(const std::vector<FileStep>& steps, const std::string& tag) {
  auto of_tag = [&](const FileStep& s) { return s.name().starts_with("tmodel_" + tag + "."); };
  auto first = std::find_if(steps.begin(), steps.end(), of_tag);
  auto last = std::find_if(steps.rbegin(), steps.rend(), of_tag).base();
  return first < last ? std::vector<FileStep>(first, last) : std::vector<FileStep>{};
}

// The first step that writes the file `name` (or its temporary file).
const FileStep& first_write(const std::vector<FileStep>& steps, const std::string& name) {
  auto it = std::find_if(steps.begin(), steps.end(), [&](const FileStep& s) {
    return s.what == "write" && (s.name() == name || s.name() == name + ".tmp");
  });
  REQUIRE_MESSAGE(it != steps.end(), "no step writes ", name);
  return *it;
}

// The bytes of a checkpoint's three files.
std::array<std::string, 3> contents(const CheckpointFiles& f) {
  return {read_file(f.weights), read_file(f.optimizer), read_file(f.state)};
}

CheckpointStore store_of(const fs::path& run_folder) { return {(run_folder / "weights").string(), "tmodel_", 0}; }

// What the crashes of one loop below left, counted by the checkpoint loaded.
struct Outcomes {
  int old_checkpoint = 0, new_checkpoint = 0;
  int prev_copy = 0;  // of the old ones, those loaded from the tag's ".prev" copy
};

// Where to crash a run: after each step of its save of `tag`, and for a power
// loss also after each step of the rest of the run. A kill there would show
// nothing new (the page cache keeps all that was written); a power loss shows
// whether the save's fsyncs made the new checkpoint durable before it returned.
std::vector<FileStep> crash_points(const std::vector<FileStep>& steps, const std::string& tag,
                                   const std::string& crash) {
  const std::vector<FileStep> save = steps_of_save(steps, tag);
  REQUIRE_FALSE(save.empty());
  if (crash != "POWER") return save;
  return {steps.begin() + (save.front().number - steps.front().number), steps.end()};
}

// Crashes a run resuming from a copy of `base` right after each of its
// crash_points, one run per step; `crash` is KILL (SIGKILL: the page cache
// keeps what was written) or POWER (what was not fsynced is lost first). Each
// time the folder must hold exactly the old checkpoint (the latest of `base`)
// or the new one (the straight run's `tag`), the new one once the save has
// returned, and resuming must end with the straight run's checkpoint, leaving
// nothing behind.
Outcomes crash_after_each_step_of_save(const fs::path& base, const std::string& tag, const std::string& crash) {
  const TinyRuns& runs = tiny_runs();
  REQUIRE(store_of(base).latest().has_value());
  const std::array<std::string, 3> old_files = contents(*store_of(base).latest()),
                                   new_files = contents(store_of(runs.straight.path).files(tag)),
                                   final_files = contents(*store_of(runs.straight.path).latest());
  TempDir listing;
  const std::vector<FileStep> steps =
      file_steps_of(resume_args(runs.copy_run(base, listing.path)), listing.path / "log");
  const int64_t last_of_save = steps_of_save(steps, tag).back().number;
  const std::vector<FileStep> points = crash_points(steps, tag, crash);
  MESSAGE(crash, " after each of ", points.size(), " file-system steps from the save of tag ", tag, " on");
  Outcomes outcomes;
  for (const FileStep& step : points) {
    CAPTURE(step.number);
    CAPTURE(step.what);
    std::string file = step.name();
    CAPTURE(file);
    TempDir trial;
    std::string config = runs.copy_run(base, trial.path);
    REQUIRE(run(resume_args(config), trial.path / "log", std::nullopt,
                {file_steps_setting(crash + ":" + std::to_string(step.number))}) == -SIGKILL);
    std::optional<CheckpointFiles> latest = store_of(trial.path).latest();
    REQUIRE(latest.has_value());
    std::array<std::string, 3> found = contents(*latest);
    if (step.number > last_of_save)
      CHECK_MESSAGE(found == new_files, "the save had returned, but the latest checkpoint, ", latest->weights,
                    ", is not the new one");
    else
      CHECK_MESSAGE((found == old_files || found == new_files), "the latest checkpoint, ", latest->weights,
                    ", is neither the old nor the new one");
    if (found == old_files) ++outcomes.old_checkpoint;
    if (found == new_files) ++outcomes.new_checkpoint;
    CHECK(run(resume_args(config), trial.path / "log2") == 0);
    if (latest->weights == store_of(trial.path).files(tag, ".prev").weights) {
      ++outcomes.prev_copy;
      CHECK(found == old_files);
      CHECK(read_file(trial.path / "log2").find("preload: resumed from " + latest->weights) != std::string::npos);
    }
    CHECK(contents(*store_of(trial.path).latest()) == final_files);
    CHECK(leftovers(trial.path).empty());
  }
  MESSAGE("crashes that left the old checkpoint: ", outcomes.old_checkpoint, " (", outcomes.prev_copy,
          " of them its .prev copy), the new one: ", outcomes.new_checkpoint);
  return outcomes;
}

}  // namespace

TEST_CASE("checkpoints: a crash after each file-system step of saving a new epoch leaves the old or the new checkpoint") {
  for (std::string crash : {"KILL", "POWER"}) {
    CAPTURE(crash);
    Outcomes outcomes = crash_after_each_step_of_save(tiny_runs().first_epoch.path, "01", crash);
    CHECK(outcomes.old_checkpoint > 0);
    CHECK(outcomes.new_checkpoint > 0);
    CHECK(outcomes.prev_copy == 0);  // a new tag has no ".prev" copy
  }
}

TEST_CASE("checkpoints: a crash after each file-system step of replacing a checkpoint leaves the old or the new one") {
  const TinyRuns& runs = tiny_runs();
  // Ctrl-C as the resumed run starts (it rewrites metrics.jsonl): it stops
  // after its first step, saving tag 01 mid-epoch, a checkpoint that the save
  // at the end of the epoch replaces.
  TempDir listing, base;
  std::vector<FileStep> steps =
      file_steps_of(resume_args(runs.copy_run(runs.first_epoch.path, listing.path)), listing.path / "log");
  std::string config = runs.copy_run(runs.first_epoch.path, base.path);
  REQUIRE(run(resume_args(config), base.path / "log", std::nullopt,
              {file_steps_setting("INT:" + std::to_string(first_write(steps, "metrics.jsonl").number))}) == 130);
  REQUIRE(store_of(base.path).latest_epoch() == 1);
  REQUIRE_FALSE(store_of(base.path).load_state("01").epoch_complete());
  // A kill between the renames over the tag's own files leaves them a mix of
  // two saves: the ".prev" copy is what loads. A power loss there undoes the
  // renames (the folder was not fsynced since), so the tag's own files load.
  Outcomes killed = crash_after_each_step_of_save(base.path, "01", "KILL");
  CHECK(killed.old_checkpoint > 0);
  CHECK(killed.new_checkpoint > 0);
  CHECK(killed.prev_copy == 2);  // after the weights' rename and after the optimizer's
  Outcomes power_lost = crash_after_each_step_of_save(base.path, "01", "POWER");
  CHECK(power_lost.old_checkpoint > 0);
  CHECK(power_lost.new_checkpoint > 0);
  CHECK(power_lost.prev_copy == 0);
}

TEST_CASE("checkpoints: a SCRATCHFORMER_FILE_STEPS value without its step number is refused, naming it") {
  const TinyRuns& runs = tiny_runs();
  for (const char* value : {"POWER:", "KILL:", "POWER:3x"}) {
    CAPTURE(value);
    TempDir dir;
    CHECK(run({"train", "--config", write_config(dir.path, runs.body)}, dir.path / "log", std::nullopt,
              {file_steps_setting(value)}) == 1);
    CHECK(read_file(dir.path / "log").ends_with("scratchformer: internal error: SCRATCHFORMER_FILE_STEPS: expected list, "
                                                "KILL:N, INT:N, STOP:N, ENOSPC:N or POWER:N, got '" +
                                                std::string(value) + "'\n"));
  }
}

// The simulator itself (POWER:N): what it takes must be what a power cut
// takes, or the crash loops above prove nothing. Its plan is read at a
// process's first file-system step, so the steps are made by a child
// process: this test binary again, running the child test case alone, in a
// folder the parent prepared (what a process finds there counts as synced).
namespace {

const char* const kPowerLossChild = "SF_POWER_LOSS_CHILD";  // the folder the child makes its steps in

// Appends `text` to the file `path` through file_steps, fsyncing it when `sync`.
void append_step(const fs::path& path, const std::string& text, bool sync) {
  int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  REQUIRE(fd >= 0);
  CHECK(file_steps::write(fd, text.data(), text.size(), path.string()) == std::ssize(text));
  if (sync) CHECK(file_steps::fsync(fd, path.string()) == 0);
  ::close(fd);
}

// Prepares `work` for the child, runs it there under
// SCRATCHFORMER_FILE_STEPS=`plan` (its log: `work`/../log) and returns how it ended.
int run_power_loss_child(const fs::path& work, const std::string& plan) {
  fs::create_directory(work);
  for (const char* file : {"unsynced", "synced"}) std::ofstream(work / file) << "before\n";
  for (const char* folder : {"renamed", "renamed_synced"}) {
    fs::create_directory(work / folder);
    std::ofstream(work / folder / "from") << "moved\n";
  }
  return wait_exit(spawn_program(build_path("tests"), {"-tc=file steps: the child process of the power-loss self-tests"},
                                 work.parent_path() / "log", std::nullopt,
                                 {std::string(kPowerLossChild) + "=" + work.string(), file_steps_setting(plan)}));
}

// The child's steps: the mkdir of `made`, then the fsync of its parent.
std::pair<FileStep, FileStep> steps_of_making_a_folder() {
  TempDir listing;
  REQUIRE(run_power_loss_child(listing.path / "work", "list") == 0);
  const std::vector<FileStep> steps = file_steps_in(listing.path / "log");
  auto mkdir = std::find_if(steps.begin(), steps.end(), [](const FileStep& s) { return s.what == "mkdir"; });
  REQUIRE_MESSAGE(mkdir != steps.end(), "make_folders made no mkdir step");
  REQUIRE_MESSAGE(mkdir + 1 != steps.end(), "no step follows the mkdir of ", mkdir->path, ": no fsync of its parent");
  CHECK(mkdir->name() == "made");
  CHECK(((mkdir + 1)->what == "fsync" && (mkdir + 1)->path == (listing.path / "work").string()));
  return {*mkdir, *(mkdir + 1)};
}

}  // namespace

TEST_CASE("file steps: the child process of the power-loss self-tests") {
  const char* folder = std::getenv(kPowerLossChild);
  if (!folder) return;  // run by the self-tests below, which name its folder
  const fs::path work = folder;
  append_step(work / "unsynced", "lost\n", /*sync=*/false);
  append_step(work / "synced", "kept\n", /*sync=*/true);
  CHECK(file_steps::rename((work / "renamed" / "from").string(), (work / "renamed" / "to").string()) == 0);
  CHECK(file_steps::rename((work / "renamed_synced" / "from").string(), (work / "renamed_synced" / "to").string()) == 0);
  sync_folder_of((work / "renamed_synced" / "to").string());
  CHECK_FALSE(make_folders((work / "made").string()));
}

TEST_CASE("file steps: a power loss takes the writes and renames not fsynced, and keeps those fsynced") {
  const FileStep mkdir = steps_of_making_a_folder().first;  // after every step of the writes and renames
  TempDir trial;
  const fs::path work = trial.path / "work";
  REQUIRE(run_power_loss_child(work, "POWER:" + std::to_string(mkdir.number)) == -SIGKILL);
  CHECK_MESSAGE(read_file(work / "unsynced") == "before\n", "a write never fsynced survived the power loss");
  CHECK_MESSAGE(read_file(work / "synced") == "before\nkept\n", "a write fsynced was lost");
  CHECK_MESSAGE((fs::exists(work / "renamed" / "from") && !fs::exists(work / "renamed" / "to")),
                "a rename whose folder was never fsynced survived the power loss");
  CHECK_MESSAGE((!fs::exists(work / "renamed_synced" / "from") && fs::exists(work / "renamed_synced" / "to")),
                "a rename whose folder was fsynced was undone");
}

TEST_CASE("file steps: a power loss takes a new folder until its parent is fsynced") {
  const auto [mkdir, parent_synced] = steps_of_making_a_folder();
  TempDir before_sync, after_sync;
  REQUIRE(run_power_loss_child(before_sync.path / "work", "POWER:" + std::to_string(mkdir.number)) == -SIGKILL);
  CHECK_MESSAGE(!fs::exists(before_sync.path / "work" / "made"),
                "a folder whose parent was not fsynced since its mkdir survived the power loss");
  REQUIRE(run_power_loss_child(after_sync.path / "work", "POWER:" + std::to_string(parent_synced.number)) ==
          -SIGKILL);
  CHECK_MESSAGE(fs::is_directory(after_sync.path / "work" / "made"), "a folder whose parent was fsynced was lost");
}

// A run's new folders (its model_folder, its experiment_name, its
// tokenizers' folder) reach the disk with their parent's fsync, before any
// file is saved in them: a power loss then keeps them (the self-test above).
TEST_CASE("checkpoints: a run makes each of its folders through file steps, followed by its parent's fsync") {
  TempDir listing;
  const std::vector<FileStep> steps =
      file_steps_of({"train", "--config", write_config(listing.path, tiny_runs().body), "--set", "num_epochs=1",
                     "--set", "tokenizer_file=" + (listing.path / "tokenizers/tokenizer_{0}.json").string()},
                    listing.path / "log");
  for (std::string folder : {"weights", "run", "tokenizers"}) {
    CAPTURE(folder);
    const std::string path = (listing.path / folder).string();
    auto mkdir = std::find_if(steps.begin(), steps.end(),
                              [&](const FileStep& s) { return s.what == "mkdir" && s.path == path; });
    REQUIRE_MESSAGE(mkdir != steps.end(), "no mkdir step made ", path);
    REQUIRE(mkdir + 1 != steps.end());
    CHECK((mkdir + 1)->what == "fsync");
    CHECK((mkdir + 1)->path == listing.path.string());
  }
}

namespace {

// The files in `folder` and below, as paths relative to it.
std::set<fs::path> files_under(const fs::path& folder) {
  std::set<fs::path> files;
  for (const auto& entry : fs::recursive_directory_iterator(folder))
    if (entry.is_regular_file()) files.insert(fs::relative(entry.path(), folder));
  return files;
}

// The optimizer steps (step number and loss) and the validations (step
// number) that metrics.jsonl in `run_folder` records up to `global_step`.
struct MetricsUpTo {
  std::vector<std::pair<int64_t, float>> steps;
  std::vector<int64_t> validations;
  MetricsUpTo(const fs::path& run_folder, int64_t global_step) {
    std::vector<report::StepRecord> step_records;
    std::vector<report::ValidRecord> valid_records;
    report::read_metrics((run_folder / "run/metrics.jsonl").string(), step_records, valid_records);
    for (const report::StepRecord& r : step_records)
      if (r.step <= global_step) steps.emplace_back(r.step, r.loss);
    for (const report::ValidRecord& r : valid_records)
      if (r.step <= global_step) validations.push_back(r.step);
  }
};

}  // namespace

// Once a run has made its last file-system step, a power loss takes nothing
// it wrote: its folders were fsynced into their parents as they were made,
// and metrics.jsonl's lines with its last checkpoint.
TEST_CASE("checkpoints: a power loss right after a run's last file-system step keeps every file it wrote") {
  const TinyRuns& runs = tiny_runs();
  TempDir listing, trial;
  std::vector<std::string> args = {"train", "--config", write_config(listing.path, runs.body), "--set", "num_epochs=1"};
  const int64_t last_step = file_steps_of(args, listing.path / "log").back().number;
  args[2] = write_config(trial.path, runs.body);
  REQUIRE(run(args, trial.path / "log", std::nullopt, {file_steps_setting("POWER:" + std::to_string(last_step))}) ==
          -SIGKILL);
  const fs::path& finished = runs.first_epoch.path;  // the same run, never cut off
  CHECK(files_under(trial.path) == files_under(finished));
  for (const fs::path& file : files_under(finished)) {
    CAPTURE(file);
    if (file.parent_path() == "weights" || file.filename().string().starts_with("tokenizer_"))
      CHECK(read_file(trial.path / file) == read_file(finished / file));
  }
  CHECK(fs::file_size(trial.path / "run/report.html") > 0);  // its bytes hold timings
  CHECK_MESSAGE(MetricsUpTo(trial.path, INT64_MAX).steps.size() == MetricsUpTo(finished, INT64_MAX).steps.size(),
                "metrics.jsonl lost step lines although the run's last checkpoint survived");
}

// metrics.jsonl's lines are appended without an fsync (one a step would cost
// more than the line) and fsynced before each checkpoint: a power loss after
// a checkpoint keeps the lines up to it; the resumed run writes the later
// ones again.
TEST_CASE("checkpoints: a power loss after a checkpoint keeps metrics.jsonl's lines up to it") {
  const TinyRuns& runs = tiny_runs();
  TempDir listing, trial;
  std::vector<std::string> args = {"train", "--config", write_config(listing.path, runs.body)};
  const std::vector<FileStep> steps = file_steps_of(args, listing.path / "log");
  const int64_t saved = steps_of_save(steps, "00").back().number;
  auto next_line = std::find_if(steps.begin(), steps.end(), [&](const FileStep& s) {
    return s.number > saved && s.what == "write" && s.name() == "metrics.jsonl";
  });
  REQUIRE(next_line != steps.end());
  args[2] = write_config(trial.path, runs.body);
  REQUIRE(run(args, trial.path / "log", std::nullopt,
              {file_steps_setting("POWER:" + std::to_string(next_line->number))}) == -SIGKILL);
  REQUIRE(store_of(trial.path).latest_epoch() == 0);
  const int64_t checkpoint_step = store_of(trial.path).load_state("00").global_step;
  const MetricsUpTo found(trial.path, INT64_MAX), straight(runs.straight.path, checkpoint_step);
  REQUIRE_FALSE(straight.steps.empty());
  CHECK_MESSAGE(found.steps.size() == straight.steps.size(),
                "metrics.jsonl lost step lines older than the checkpoint that survived");
  CHECK(found.steps == straight.steps);
  CHECK(found.validations == straight.validations);
}

// Validation can fail after an epoch's training (here: its metrics record
// cannot be written, as metrics.jsonl has become a folder while the run was
// stopped just before the write). The epoch is saved first, the error says so
// in one line, and the run resumed from that checkpoint ends as the straight
// run does.
TEST_CASE("checkpoints: a failure in validation saves the epoch's training first; resuming from it loses nothing") {
  const TinyRuns& runs = tiny_runs();
  TempDir listing, trial;
  const std::vector<std::string> args = {"train", "--config", write_config(listing.path, runs.body)};
  std::vector<FileStep> steps = file_steps_of(args, listing.path / "log");
  const std::vector<FileStep> save = steps_of_save(steps, "00");
  REQUIRE_FALSE(save.empty());
  const FileStep* record = nullptr;  // the last write before the save: epoch 00's validation record
  for (const FileStep& step : steps)
    if (step.number < save.front().number && step.what == "write" && step.name() == "metrics.jsonl") record = &step;
  REQUIRE(record != nullptr);
  std::string config = write_config(trial.path, runs.body);
  pid_t pid = spawn({"train", "--config", config}, trial.path / "log", std::nullopt,
                    {file_steps_setting("STOP:" + std::to_string(record->number - 1))});
  int status = 0;
  waitpid(pid, &status, WUNTRACED);
  REQUIRE(WIFSTOPPED(status));
  const fs::path metrics = trial.path / "run/metrics.jsonl", aside = trial.path / "metrics.aside";
  fs::rename(metrics, aside);
  fs::create_directory(metrics);
  kill(pid, SIGCONT);
  CHECK(wait_exit(pid) == 2);
  std::string log = read_file(trial.path / "log");
  CHECK_MESSAGE(log.ends_with("scratchformer: error: validation after epoch 00 failed (the epoch is saved as " +
                              (trial.path / "weights/tmodel_00.safetensors").string() +
                              "; preload latest resumes after it): " + metrics.string() +
                              ": cannot write (Is a directory)\n"),
                log);
  std::optional<CheckpointFiles> saved = store_of(trial.path).latest();
  REQUIRE(saved.has_value());
  CHECK(saved->load_state().epoch_complete());
  CHECK(read_file(saved->weights) == read_file(store_of(runs.straight.path).files("00").weights));
  CHECK(leftovers(trial.path).empty());

  fs::remove(metrics);
  fs::rename(aside, metrics);
  CHECK(run(resume_args(config), trial.path / "log2") == 0);
  for (auto file : {&CheckpointFiles::weights, &CheckpointFiles::optimizer})
    CHECK(read_file(store_of(trial.path).files("01").*file) == read_file(store_of(runs.straight.path).files("01").*file));
}

namespace {

// A folder on a file system that fills up at a chosen file-system step of a
// run. Where this process may mount one, it is a small tmpfs, filled to the
// last byte while the run is stopped at that step, so that the run meets the
// kernel's own ENOSPC; the tmpfs lives in a mount namespace of this
// process's own, so that it goes away with the process whatever ends it.
// Elsewhere (a container that refuses mounts, or not Linux) the write shim
// SCRATCHFORMER_FILE_STEPS=ENOSPC:N fails the writes instead.
class FillingDisk {
 public:
  FillingDisk() {
    mounted_ = mount_tmpfs();
    MESSAGE(std::string(mounted_ ? "full disk: a real one, an 8 MB tmpfs filled up"
                                 : "full disk: the write shim (no file system can be mounted here)"));
  }
  ~FillingDisk() {
    if (mounted_) unmount();
  }
  FillingDisk(const FillingDisk&) = delete;
  FillingDisk& operator=(const FillingDisk&) = delete;

  const fs::path& path() const { return folder_.path; }
  void clear() const {
    for (const auto& entry : fs::directory_iterator(folder_.path)) fs::remove_all(entry.path());
  }

  // Runs `args` with no room left from right after file-system step `step`;
  // returns its exit code. The room comes back once it has ended.
  int run_full_after(const std::vector<std::string>& args, const fs::path& log, int64_t step) const {
    std::string at = std::to_string(step);
    if (!mounted_) return run(args, log, std::nullopt, {file_steps_setting("ENOSPC:" + at)});
    pid_t pid = spawn(args, log, std::nullopt, {file_steps_setting("STOP:" + at)});
    int status = 0;
    waitpid(pid, &status, WUNTRACED);
    if (!WIFSTOPPED(status)) return exit_code(status);
    fill();
    kill(pid, SIGCONT);
    int code = wait_exit(pid);
    fs::remove(filler());
    return code;
  }

 private:
#if defined(__linux__)
  static bool private_mount_namespace() {
    static const bool done =
        ::unshare(CLONE_NEWNS) == 0 && ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0;
    return done;
  }
  bool mount_tmpfs() const {
    return private_mount_namespace() && ::mount("tmpfs", folder_.path.c_str(), "tmpfs", 0, "size=8m") == 0;
  }
  void unmount() const { ::umount2(folder_.path.c_str(), MNT_DETACH); }
#else
  bool mount_tmpfs() const { return false; }
  void unmount() const {}
#endif
  fs::path filler() const { return folder_.path / "filler"; }
  void fill() const {
    int fd = ::open(filler().c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    REQUIRE(fd >= 0);
    std::vector<char> block(1 << 16);
    while (::write(fd, block.data(), block.size()) > 0) {
    }
    ::close(fd);
  }

  TempDir folder_;
  bool mounted_ = false;
};

// A run that found the disk full while writing `step`'s file: exit code 2,
// one error line naming the file, no temporary or half-saved file anywhere,
// every line of metrics.jsonl a record.
void check_stopped_cleanly(int code, const fs::path& log, const fs::path& run_folder, const FileStep& step) {
  std::string file = step.file();
  CAPTURE(file);
  CHECK(code == 2);
  std::vector<std::string> errors;
  std::ifstream in(log);
  for (std::string line; std::getline(in, line);)
    if (line.find("error") != std::string::npos) errors.push_back(line);
  CHECK(errors == std::vector<std::string>{"scratchformer: error: " + file + ": cannot write (No space left on device)"});
  CHECK(leftovers(run_folder).empty());
  std::ifstream metrics(run_folder / "run/metrics.jsonl");
  for (std::string line; std::getline(metrics, line);)
    CHECK_MESSAGE(nlohmann::json::parse(line, nullptr, false).is_object(), "metrics.jsonl: ", line);
}

}  // namespace

TEST_CASE("checkpoints: a disk that fills up at any file of a run: one clear error, nothing half-written, the checkpoint intact") {
  const TinyRuns& runs = tiny_runs();
  FillingDisk disk;
  TempDir logs;
  const fs::path folder = disk.path() / "run-folder";
  auto fresh_copy = [&](const fs::path& from) {
    disk.clear();
    return runs.copy_run(from, folder);
  };

  SUBCASE("a fresh run: the tokenizers and the first metrics line") {
    TempDir empty;
    std::vector<std::string> args = {"train", "--config", fresh_copy(empty.path), "--set", "num_epochs=1"};
    std::vector<FileStep> steps = file_steps_of(args, logs.path / "list");
    for (const char* name : {"tokenizer_a.json", "tokenizer_b.json", "metrics.jsonl"}) {
      const FileStep& write = first_write(steps, name);
      fresh_copy(empty.path);
      check_stopped_cleanly(disk.run_full_after(args, logs.path / name, write.number - 1), logs.path / name, folder,
                            write);
      if (std::string(name) != "metrics.jsonl") CHECK_FALSE(fs::exists(write.file()));
      CHECK_FALSE(fs::exists(folder / "weights/tmodel_00.safetensors"));
    }
  }

  SUBCASE("a resumed run: metrics.jsonl, each file of the save (before and after the weights are complete), the report") {
    const std::array<std::string, 3> old_files = contents(store_of(runs.first_epoch.path).files("00")),
                                     new_files = contents(store_of(runs.straight.path).files("01"));
    std::vector<std::string> args = resume_args(fresh_copy(runs.first_epoch.path));
    std::vector<FileStep> steps = file_steps_of(args, logs.path / "list");
    for (const char* name : {"metrics.jsonl", "tmodel_01.new.safetensors", "tmodel_01.new.optim.safetensors",
                             "tmodel_01.new.state.json", "report.html"}) {
      const FileStep& write = first_write(steps, name);
      fresh_copy(runs.first_epoch.path);
      std::string metrics = read_file(folder / "run/metrics.jsonl");
      check_stopped_cleanly(disk.run_full_after(args, logs.path / name, write.number - 1), logs.path / name, folder,
                            write);
      CHECK(contents(store_of(folder).files("00")) == old_files);
      bool saved = std::string(name) == "report.html";  // the checkpoint is saved before the report
      CHECK(store_of(folder).latest_epoch() == (saved ? 1 : 0));
      if (!saved) {
        CHECK_FALSE(fs::exists(store_of(folder).files("01").weights));
        if (write.number < steps_of_save(steps, "01").front().number)
          CHECK(read_file(folder / "run/metrics.jsonl") == metrics);
      }
      // With room again, the run resumes as if nothing had happened.
      CHECK(run(args, logs.path / "again") == 0);
      CHECK(contents(store_of(folder).files("01")) == new_files);
    }
  }
}

TEST_CASE("metrics: a resumed run drops the line a killed run left cut short in metrics.jsonl, and says so") {
  const TinyRuns& runs = tiny_runs();
  TempDir dir;
  std::string config = runs.copy_run(runs.first_epoch.path, dir.path);
  // A run killed as it appended its 4th line of epoch 01: the straight run's
  // lines to there, then half of that line.
  std::vector<std::string> straight;
  std::ifstream in(runs.straight.path / "run/metrics.jsonl");
  for (std::string line; std::getline(in, line);) straight.push_back(line);
  size_t first_epoch_lines = step_losses(dir.path / "run/metrics.jsonl").size() + 1;  // its steps and validation
  REQUIRE(straight.size() > first_epoch_lines + 4);
  std::string cut;
  for (size_t i = 0; i < first_epoch_lines + 3; ++i) cut += straight[i] + "\n";
  cut += straight[first_epoch_lines + 3].substr(0, straight[first_epoch_lines + 3].size() / 2);
  std::ofstream(dir.path / "run/metrics.jsonl", std::ios::binary) << cut;

  REQUIRE(run(resume_args(config), dir.path / "log2") == 0);
  CHECK(read_file(dir.path / "log2").find("metrics.jsonl: dropped 1 line that is no complete record (a run killed "
                                          "while writing a line leaves it cut short)\n") != std::string::npos);
  std::string metrics = read_file(dir.path / "run/metrics.jsonl");
  CHECK(metrics.ends_with("\n"));
  std::istringstream lines(metrics);
  for (std::string line; std::getline(lines, line);) CHECK(nlohmann::json::parse(line, nullptr, false).is_object());
  CHECK(step_losses(dir.path / "run/metrics.jsonl") == step_losses(runs.straight.path / "run/metrics.jsonl"));
  CHECK(step_losses(dir.path / "run/metrics.jsonl", "valid") ==
        step_losses(runs.straight.path / "run/metrics.jsonl", "valid"));
}
