#include "run_checkpoints.h"

#include <filesystem>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "nn/checkpoint.h"
#include "dist/data_parallel.h"
#include "report/metrics_log.h"

namespace sf::train {

namespace fs = std::filesystem;
using dist::say;
using nlohmann::json;

// The weights file `preload` names, when it exists ("latest": the newest complete checkpoint's).
static std::optional<std::string> preload_weights(const setup::Config& config, const setup::CheckpointStore& store) {
  if (!config.preload) return std::nullopt;
  if (*config.preload == "latest") {
    std::optional<setup::CheckpointFiles> latest = store.latest();
    if (latest && fs::is_regular_file(latest->weights)) return latest->weights;
    return std::nullopt;
  }
  return fs::is_regular_file(*config.preload) ? config.preload : std::nullopt;
}

std::optional<setup::ModelIdentity> preloaded_identity(const setup::Config& config,
                                                        const setup::CheckpointStore& store) {
  std::optional<std::string> weights = preload_weights(config, store);
  return weights ? setup::ModelIdentity::of_file(*weights) : std::nullopt;
}

void claim_model_folder(const setup::Config& config, const setup::CheckpointStore& store, dist::Communicator& comm) {
  std::optional<std::string> existing = store.any_checkpoint_file();
  if (!existing) return;
  if (config.preload == "latest") return;  // resumes the newest (restore_on_writer names a stray file)
  if (config.preload) {
    setup::CheckpointFiles files = setup::CheckpointFiles::beside(*config.preload);
    bool resumes = fs::exists(files.optimizer) || fs::exists(files.state);
    if (!resumes && store.has_name_of_its_own(files.weights))
      fail(config.source, ": key 'preload': ", files.weights, " would be overwritten by this run's checkpoints (it "
           "starts again at epoch 00); copy it out of model_folder first");
    if (resumes && store.is_checkpoint_name(files.weights)) {
      // A resume from one of this folder's checkpoints: the epochs after it
      // are another continuation, which this one would mix with.
      int64_t epoch = files.load_state().epoch;
      std::vector<int64_t> later = store.epochs_after(epoch);
      if (later.empty()) return;
      if (!config.overwrite)
        fail(config.source, ": key 'preload': ", files.weights, " is epoch ", setup::CheckpointStore::epoch_tag(epoch),
             " of the run in ", config.model_folder, ", which went on to epoch ",
             setup::CheckpointStore::epoch_tag(later.back()), "; resume the latest (preload \"latest\"), or set "
             "overwrite to true to delete the epochs after it");
      say(comm, "overwrite: deleted %lld checkpoints after epoch %s in %s\n",
          static_cast<long long>(store.remove_epochs_after(epoch)), setup::CheckpointStore::epoch_tag(epoch).c_str(),
          config.model_folder.c_str());
      return;
    }
  }
  // A fresh run, or one that goes on from weights elsewhere: what is here is another run's.
  if (!config.overwrite) {
    std::vector<int64_t> epochs = store.epochs_after(-1);
    std::string what = *existing;
    if (!epochs.empty()) {
      what = store.weights_path(setup::CheckpointStore::epoch_tag(epochs.front()));
      if (epochs.size() > 1)
        what += " to " + fs::path(store.weights_path(setup::CheckpointStore::epoch_tag(epochs.back()))).filename().string();
    }
    fail(config.source, ": model_folder ", config.model_folder, " holds another run's checkpoints (", what,
         "); resume it with preload \"latest\", train into another model_folder, or set overwrite to true to delete "
         "them");
  }
  say(comm, "overwrite: deleted %lld checkpoint files of another run in %s\n",
      static_cast<long long>(store.remove_all()), config.model_folder.c_str());
}

// On the writer: loads into this process; returns the position and the optimizer state it
// read, if it resumes.
static std::optional<std::pair<setup::TrainingState, optim::OptimizerState>> restore_on_writer(
    const CheckpointParts& parts, const data::BatchedDataset& train_set) {
  const setup::Config& config = parts.config;
  if (!config.preload) return std::nullopt;
  setup::CheckpointFiles files;
  if (*config.preload == "latest") {
    std::optional<setup::CheckpointFiles> latest = parts.store.latest();
    if (!latest) {
      // Starting fresh would write over them: say so instead.
      if (std::optional<std::string> stray = parts.store.any_checkpoint_file())
        fail(config.source, ": key 'preload': no complete checkpoint in ", config.model_folder, ", but ", *stray,
             " is there (its optimizer or state file is missing or from another save); move it away to start "
             "fresh, or set preload to it to start from its weights");
      say(parts.comm, "preload latest: no checkpoint in %s yet, starting fresh\n", config.model_folder.c_str());
      return std::nullopt;
    }
    files = *latest;
  } else {
    files = setup::CheckpointFiles::beside(*config.preload);  // the trainer's check_outputs found it
  }
  if (std::optional<setup::ModelIdentity> identity = setup::ModelIdentity::of_file(files.weights))
    setup::check_weights_fit(files.weights, *identity, parts.identity, config);
  nn::load_checkpoint(parts.model, files.weights);
  if (!fs::exists(files.optimizer) && !fs::exists(files.state)) {  // claim_model_folder checked where it is
    say(parts.comm, "preload: weights from %s; no optimizer/state beside them, so a fresh optimizer at epoch 0\n",
        files.weights.c_str());
    return std::nullopt;
  }
  for (const std::string* file : {&files.optimizer, &files.state})
    if (!fs::exists(*file)) fail(*file, ": missing, so the checkpoint is incomplete");
  optim::OptimizerState optimizer_state = parts.optimizer.read_state(files.optimizer);
  parts.optimizer.load_state_dict(optimizer_state, files.optimizer);
  setup::TrainingState position = files.load_state();
  if (parts.optimizer.steps() != position.global_step)
    fail(files.optimizer, ": ", parts.optimizer.steps(), " steps, but ", files.state, " says ", position.global_step);
  if (position.accum_pending >= config.grad_accum)
    fail(files.state, ": ", position.accum_pending, " batches pending, but grad_accum is ", config.grad_accum);
  // Each file is sound on its own; now check that all three are from one save.
  if (std::string problem = files.problem(); !problem.empty()) fail(problem);
  if (int64_t batches = train_set.batches_in_epoch(position.epoch);
      position.batch < position.batches_in_epoch && position.batches_in_epoch != batches)
    fail(files.state, ": an epoch of ", position.batches_in_epoch, " batches, but this data and batch_size make ",
         batches, " (resume with the config the run was started with)");
  parts.model.dropout_rng().set_state(position.dropout_rng);
  say(parts.comm, "preload: resumed from %s (epoch %02lld, batch %lld of %lld, step %lld)\n", files.weights.c_str(),
      static_cast<long long>(position.epoch), static_cast<long long>(position.batch),
      static_cast<long long>(position.batches_in_epoch), static_cast<long long>(position.global_step));
  return std::pair{std::move(position), std::move(optimizer_state)};
}

std::optional<setup::TrainingState> restore_checkpoint(const CheckpointParts& parts,
                                                       const data::BatchedDataset& train_set) {
  dist::Communicator& comm = parts.comm;
  std::optional<std::pair<setup::TrainingState, optim::OptimizerState>> loaded;
  if (comm.writes()) loaded = restore_on_writer(parts, train_set);
  // Rank 0's weights, position and optimizer state to the others (alone: nothing to send).
  dist::broadcast_tensors(parts.optimizer.params(), comm);
  json header = {{"resumed", loaded.has_value()}, {"state", loaded ? loaded->first.to_json() : json()}};
  header = json::parse(dist::broadcast_string(header.dump(), comm));
  if (!header["resumed"].get<bool>()) return std::nullopt;
  optim::OptimizerState state =
      dist::broadcast_optimizer_state(loaded ? loaded->second : optim::OptimizerState{}, comm);
  if (comm.writes()) return loaded->first;
  const std::string origin = "rank 0's checkpoint";
  parts.optimizer.load_state_dict(state, origin);
  setup::TrainingState position = setup::TrainingState::from_json(header["state"], origin);
  // A run resumed by more ranks than saved it starts the new ranks' streams afresh.
  size_t saved = static_cast<size_t>(comm.rank() - 1);
  parts.model.dropout_rng().set_state(saved < position.rank_dropout_rngs.size()
                                          ? position.rank_dropout_rngs[saved]
                                          : dist::rank_dropout_state(position.dropout_rng, comm.rank()));
  return position;
}

void save_checkpoint(const CheckpointParts& parts, const std::string& tag, setup::TrainingState position) {
  std::vector<Rng::State> streams(static_cast<size_t>(parts.comm.size()));
  Rng::State mine = parts.model.dropout_rng().state();
  parts.comm.all_gather(std::as_bytes(std::span<const Rng::State>(&mine, 1)),
                        std::as_writable_bytes(std::span(streams)));
  position.dropout_rng = streams[0];
  position.rank_dropout_rngs.assign(streams.begin() + 1, streams.end());
  optim::OptimizerState optimizer_state = parts.gradients.whole_state(parts.optimizer);
  if (!parts.comm.writes()) return;
  if (!parts.metrics_path.empty()) report::sync_metrics(parts.metrics_path);
  parts.store.save(tag, parts.model, parts.identity.tokenizer_labels(), optimizer_state, position);
}

bool periodic_checkpoint_due(const setup::Config& config, const setup::TrainingState& position, bool stepped) {
  return stepped && config.checkpoint_every > 0 && position.global_step % config.checkpoint_every == 0 &&
         !position.epoch_complete();
}

void save_epoch_checkpoint(const CheckpointParts& parts, int64_t epoch, const setup::TrainingState& position,
                           bool best) {
  save_checkpoint(parts, setup::CheckpointStore::epoch_tag(epoch), position);
  if (parts.comm.writes()) parts.store.prune();
  if (best) save_checkpoint(parts, "best", position);
}

}  // namespace sf::train
