#include "run_checkpoints.h"

#include <filesystem>

#include "base/error.h"
#include "nn/checkpoint.h"
#include "train/trainer.h"

namespace sf::train {

namespace fs = std::filesystem;
using nlohmann::json;

// Loads into this process; returns the optimizer state it read, if any.
static std::optional<optim::OptimizerState> restore_on_rank_0(Run& run, bool& resumed) {
  const Config& config = run.config;
  if (!config.preload) return std::nullopt;
  CheckpointFiles files;
  if (*config.preload == "latest") {
    std::optional<CheckpointFiles> latest = run.store.latest();
    if (!latest) {
      // Starting fresh would write over them: say so instead.
      if (std::optional<std::string> stray = run.store.any_checkpoint_file())
        fail(config.source, ": key 'preload': no complete checkpoint in ", config.model_folder, ", but ", *stray,
             " is there (its optimizer or state file is missing or from another save); move it away to start "
             "fresh, or set preload to it to start from its weights");
      say(run.comm, "preload latest: no checkpoint in %s yet, starting fresh\n", config.model_folder.c_str());
      return std::nullopt;
    }
    files = *latest;
  } else {
    files = CheckpointFiles::beside(*config.preload);  // the trainer's check_outputs found it
  }
  nn::load_checkpoint(*run.model, files.weights);
  if (!fs::exists(files.optimizer) && !fs::exists(files.state)) {
    if (run.store.is_checkpoint_name(files.weights))
      fail(config.source, ": key 'preload': ", files.weights, " would be overwritten by this run's "
           "checkpoints (it starts again at epoch 00); copy it out of model_folder first");
    say(run.comm, "preload: weights from %s; no optimizer/state beside them, so a fresh optimizer at epoch 0\n",
        files.weights.c_str());
    return std::nullopt;
  }
  for (const std::string* file : {&files.optimizer, &files.state})
    if (!fs::exists(*file)) fail(*file, ": missing, so the checkpoint is incomplete");
  optim::OptimizerState optimizer_state = run.optimizer->read_state(files.optimizer);
  run.optimizer->load_state_dict(optimizer_state, files.optimizer);
  run.state = files.load_state();
  if (run.optimizer->steps() != run.state.global_step)
    fail(files.optimizer, ": ", run.optimizer->steps(), " steps, but ", files.state, " says ", run.state.global_step);
  if (run.state.accum_pending >= config.grad_accum)
    fail(files.state, ": ", run.state.accum_pending, " batches pending, but grad_accum is ", config.grad_accum);
  // Each file is sound on its own; now check that all three are from one save.
  if (std::string problem = files.problem(); !problem.empty()) fail(problem);
  int64_t batches = run.train_set->batches_per_epoch();
  if (run.state.batch < run.state.batches_in_epoch && run.state.batches_in_epoch != batches)
    fail(files.state, ": an epoch of ", run.state.batches_in_epoch, " batches, but this data and batch_size make ",
         batches, " (resume with the config the run was started with)");
  run.model->dropout_rng().set_state(run.state.dropout_rng);
  run.accumulation.set_pending(run.state.accum_pending);
  resumed = true;
  say(run.comm, "preload: resumed from %s (epoch %02lld, batch %lld of %lld, step %lld)\n", files.weights.c_str(),
      static_cast<long long>(run.state.epoch), static_cast<long long>(run.state.batch),
      static_cast<long long>(run.state.batches_in_epoch), static_cast<long long>(run.state.global_step));
  return optimizer_state;
}

bool restore_checkpoint(Run& run) {
  bool resumed = false;
  std::optional<optim::OptimizerState> loaded;
  if (run.comm.rank() == 0) loaded = restore_on_rank_0(run, resumed);
  if (run.comm.size() == 1) return resumed;
  broadcast_tensors(run.optimizer->params(), run.comm);
  json header = {{"resumed", resumed}, {"state", run.state.to_json()}};
  header = json::parse(broadcast_string(header.dump(), run.comm));
  if (!header["resumed"].get<bool>()) return false;
  const std::string origin = "rank 0's checkpoint";
  optim::OptimizerState state = broadcast_optimizer_state(loaded.value_or(optim::OptimizerState{}), run.comm);
  if (run.comm.rank() == 0) return true;
  run.optimizer->load_state_dict(state, origin);
  run.state = TrainingState::from_json(header["state"], origin);
  run.accumulation.set_pending(run.state.accum_pending);
  // A run resumed by more ranks than saved it starts the new ranks' streams afresh.
  size_t saved = static_cast<size_t>(run.comm.rank() - 1);
  run.model->dropout_rng().set_state(saved < run.state.rank_dropout_rngs.size()
                                         ? run.state.rank_dropout_rngs[saved]
                                         : rank_dropout_state(run.state.dropout_rng, run.comm.rank()));
  return true;
}

void save_checkpoint(Run& run, const std::string& tag) {
  std::vector<Rng::State> streams(static_cast<size_t>(run.comm.size()));
  Rng::State mine = run.model->dropout_rng().state();
  run.comm.all_gather(std::as_bytes(std::span<const Rng::State>(&mine, 1)),
                      std::as_writable_bytes(std::span(streams)));
  run.state.dropout_rng = streams[0];
  run.state.rank_dropout_rngs.assign(streams.begin() + 1, streams.end());
  run.state.accum_pending = run.accumulation.pending();
  optim::OptimizerState optimizer_state =
      run.optimizer->sharded() ? gather_optimizer_state(*run.optimizer, run.reducer->shard_runs(), run.comm) : run.optimizer->state_dict();
  if (run.comm.rank() == 0) run.store.save(tag, *run.model, optimizer_state, run.state);
}

void save_epoch_checkpoint(Run& run, int64_t epoch, const Scores* scores) {
  bool best = scores && scores->at(kBestMetric) > run.state.best_score;
  if (best) run.state.best_score = scores->at(kBestMetric);
  save_checkpoint(run, CheckpointStore::epoch_tag(epoch));
  if (run.comm.rank() == 0) run.store.prune();
  if (best) save_checkpoint(run, "best");
}

}  // namespace sf::train
