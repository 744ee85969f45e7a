// A training run's checkpoints (docs/07-training.md): the one it resumes
// from, when it saves (each epoch; the position reached when stopped or
// diverged, and every checkpoint_every steps), which it keeps (the newest keep_checkpoints epochs) and which is
// "best". The files themselves are CheckpointStore's (setup/checkpoints.h).
#pragma once
#include <optional>
#include <string>

#include "data/batching.h"
#include "dist/communicator.h"
#include "dist/gradient_sync.h"
#include "nn/transformer.h"
#include "optim/optimizer.h"
#include "setup/checkpoints.h"
#include "setup/config.h"
#include "setup/model_identity.h"

namespace sf::train {

// What saving and resuming read and write; each outlives the calls.
struct CheckpointParts {
  const setup::Config& config;
  const setup::ModelIdentity& identity;  // what the run trains: checked on preload, written with every checkpoint
  const setup::CheckpointStore& store;
  // The writer's metrics.jsonl ("" on the other ranks), fsynced before each
  // save: a checkpoint that survives a power cut keeps the lines before it.
  const std::string& metrics_path;
  nn::Transformer& model;
  optim::Optimizer& optimizer;
  dist::GradientSync& gradients;
  dist::Communicator& comm;
};

// A run owns its model_folder: the checkpoints there must be the ones it
// resumes, and none taken after them. Otherwise (a fresh run into a folder
// holding another run's checkpoints, or a resume from an older epoch than the
// folder's latest) it stops naming what to do, or, with `overwrite`, deletes
// them. The writer calls it before the run writes anything.
void claim_model_folder(const setup::Config& config, const setup::CheckpointStore& store, dist::Communicator& comm);
// What the weights `preload` names record (nullopt when there are none yet,
// or they record nothing): whose tokenizer files the run may use whatever
// data they were built from.
std::optional<setup::ModelIdentity> preloaded_identity(const setup::Config& config,
                                                        const setup::CheckpointStore& store);

// Rank 0 reads the checkpoint `preload` names (only its machine need have the
// files) and every rank receives what it read: the weights (also when
// starting fresh, so that every replica starts equal), the optimizer state
// and the position, which it returns when the run resumes from one. Weights
// of another model than the run's (architecture or tokenizers) are refused.
// `train_set`: this run's, whose batches a half-done epoch must have had.
std::optional<setup::TrainingState> restore_checkpoint(const CheckpointParts& parts,
                                                       const data::BatchedDataset& train_set);
// Collective: every rank hands the writer (Communicator::writes) what only it
// holds (its dropout stream, its share of a sharded optimizer state); the
// writer writes the files, with
// `position` as the state.
void save_checkpoint(const CheckpointParts& parts, const std::string& tag, setup::TrainingState position);
// Whether the position reached calls for a mid-epoch checkpoint: after every
// checkpoint_every-th optimizer step (`stepped`: one was just taken), counted
// from the run's first, so that a resumed run saves where the straight run
// does; not after an epoch's last, whose checkpoint follows validation.
bool periodic_checkpoint_due(const setup::Config& config, const setup::TrainingState& position, bool stepped);
// The epoch's checkpoint, older epochs beyond keep_checkpoints deleted, and
// "best" too when `best`.
void save_epoch_checkpoint(const CheckpointParts& parts, int64_t epoch, const setup::TrainingState& position,
                           bool best);

}  // namespace sf::train
