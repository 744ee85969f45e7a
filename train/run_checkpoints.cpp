#include "run_checkpoints.h"

#include <filesystem>

#include "autograd/error.h"
#include "nn/checkpoint.h"
#include "train/data_parallel.h"

namespace sf::train {

namespace fs = std::filesystem;
using nlohmann::json;

RunCheckpoints::RunCheckpoints(const Config& config, Communicator& comm, const CheckpointStore& store,
                               nn::Transformer& model, optim::Optimizer& optimizer,
                               optim::GradAccumulation& accumulation, TrainingState& state)
    : config_(config), comm_(comm), store_(store), model_(model), optimizer_(optimizer), accumulation_(accumulation),
      state_(state) {}

bool RunCheckpoints::restore(int64_t batches_per_epoch) {
  bool resumed = false;
  std::optional<optim::OptimizerState> loaded;
  if (comm_.rank() == 0) loaded = restore_on_rank_0(batches_per_epoch, resumed);
  if (comm_.size() == 1) return resumed;
  broadcast_tensors(optimizer_.params(), comm_);
  json header = {{"resumed", resumed}, {"state", state_.to_json()}};
  header = json::parse(broadcast_string(header.dump(), comm_));
  if (!header["resumed"].get<bool>()) return false;
  const std::string origin = "rank 0's checkpoint";
  optim::OptimizerState state = broadcast_optimizer_state(loaded.value_or(optim::OptimizerState{}), comm_);
  if (comm_.rank() == 0) return true;
  optimizer_.load_state_dict(state, origin);
  state_ = TrainingState::from_json(header["state"], origin);
  accumulation_.set_pending(state_.accum_pending);
  // A run resumed by more ranks than saved it starts the new ranks' streams afresh.
  size_t saved = static_cast<size_t>(comm_.rank() - 1);
  model_.dropout_rng().set_state(saved < state_.rank_dropout_rngs.size()
                                     ? state_.rank_dropout_rngs[saved]
                                     : rank_dropout_state(state_.dropout_rng, comm_.rank()));
  return true;
}

std::optional<optim::OptimizerState> RunCheckpoints::restore_on_rank_0(int64_t batches_per_epoch, bool& resumed) {
  if (!config_.preload) return std::nullopt;
  CheckpointFiles files;
  if (*config_.preload == "latest") {
    std::optional<CheckpointFiles> latest = store_.latest();
    if (!latest) {
      // Starting fresh would write over them: say so instead.
      if (std::optional<std::string> stray = store_.any_checkpoint_file())
        fail(config_.source, ": key 'preload': no complete checkpoint in ", config_.model_folder, ", but ", *stray,
             " is there (its optimizer or state file is missing or from another save); move it away to start "
             "fresh, or set preload to it to start from its weights");
      say(comm_, "preload latest: no checkpoint in %s yet, starting fresh\n", config_.model_folder.c_str());
      return std::nullopt;
    }
    files = *latest;
  } else {
    if (!fs::is_regular_file(*config_.preload))
      fail(config_.source, ": key 'preload': ", *config_.preload, ": no such file");
    files = CheckpointFiles::beside(*config_.preload);
  }
  nn::load_checkpoint(model_, files.weights);
  if (!fs::exists(files.optimizer) && !fs::exists(files.state)) {
    if (store_.is_checkpoint_name(files.weights))
      fail(config_.source, ": key 'preload': ", files.weights, " would be overwritten by this run's "
           "checkpoints (it starts again at epoch 00); copy it out of model_folder first");
    say(comm_, "preload: weights from %s; no optimizer/state beside them, so a fresh optimizer at epoch 0\n",
        files.weights.c_str());
    return std::nullopt;
  }
  for (const std::string* file : {&files.optimizer, &files.state})
    if (!fs::exists(*file)) fail(*file, ": missing, so the checkpoint is incomplete");
  optim::OptimizerState optimizer_state = optimizer_.read_state(files.optimizer);
  optimizer_.load_state_dict(optimizer_state, files.optimizer);
  state_ = files.load_state();
  if (optimizer_.steps() != state_.global_step)
    fail(files.optimizer, ": ", optimizer_.steps(), " steps, but ", files.state, " says ", state_.global_step);
  if (state_.accum_pending >= config_.grad_accum)
    fail(files.state, ": ", state_.accum_pending, " batches pending, but grad_accum is ", config_.grad_accum);
  // Each file is sound on its own; now check that all three are from one save.
  if (std::string problem = files.problem(); !problem.empty()) fail(problem);
  if (state_.batch < state_.batches_in_epoch && state_.batches_in_epoch != batches_per_epoch)
    fail(files.state, ": an epoch of ", state_.batches_in_epoch, " batches, but this data and batch_size make ",
         batches_per_epoch, " (resume with the config the run was started with)");
  model_.dropout_rng().set_state(state_.dropout_rng);
  accumulation_.set_pending(state_.accum_pending);
  resumed = true;
  say(comm_, "preload: resumed from %s (epoch %02lld, batch %lld of %lld, step %lld)\n", files.weights.c_str(),
      static_cast<long long>(state_.epoch), static_cast<long long>(state_.batch),
      static_cast<long long>(state_.batches_in_epoch), static_cast<long long>(state_.global_step));
  return optimizer_state;
}

void RunCheckpoints::save(const std::string& tag) {
  std::vector<Rng::State> streams(static_cast<size_t>(comm_.size()));
  Rng::State mine = model_.dropout_rng().state();
  comm_.all_gather(std::as_bytes(std::span<const Rng::State>(&mine, 1)), std::as_writable_bytes(std::span(streams)));
  state_.dropout_rng = streams[0];
  state_.rank_dropout_rngs.assign(streams.begin() + 1, streams.end());
  state_.accum_pending = accumulation_.pending();
  optim::OptimizerState optimizer_state =
      optimizer_.sharded() ? gather_optimizer_state(optimizer_, comm_) : optimizer_.state_dict();
  if (comm_.rank() == 0) store_.save(tag, model_, optimizer_state, state_);
}

void RunCheckpoints::save_epoch(int64_t epoch, const Scores* scores) {
  bool best = scores && scores->at(kBestMetric) > state_.best_score;
  if (best) state_.best_score = scores->at(kBestMetric);
  save(CheckpointStore::epoch_tag(epoch));
  if (comm_.rank() == 0) store_.prune();
  if (best) save("best");
}

}  // namespace sf::train
