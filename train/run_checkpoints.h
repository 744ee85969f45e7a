// A training run's checkpoints (docs/07-training.md): the one it resumes
// from, when it saves (each epoch; the position reached when stopped or
// diverged), which it keeps (the newest keep_checkpoints epochs) and which is
// "best". The files themselves are CheckpointStore's (train/checkpoints.h).
#pragma once
#include <optional>
#include <string>

#include "optim/accumulation.h"
#include "train/checkpoints.h"
#include "train/communicator.h"
#include "train/config.h"
#include "train/metrics.h"

namespace sf::train {

class RunCheckpoints {
 public:
  // All of it is the trainer's and outlives this.
  RunCheckpoints(const Config& config, Communicator& comm, const CheckpointStore& store, nn::Transformer& model,
                 optim::Optimizer& optimizer, optim::GradAccumulation& accumulation, TrainingState& state);
  // Rank 0 reads the checkpoint `preload` names (only its machine need have
  // the files) and every rank receives what it read: the weights (also when
  // starting fresh, so that every replica starts equal), the optimizer state
  // and the position. True when the run resumes from a saved position.
  // `batches_per_epoch`: this run's, which an unfinished epoch must match.
  bool restore(int64_t batches_per_epoch);
  // Collective: every rank hands rank 0 what only it holds (its dropout
  // stream, its share of a sharded optimizer state); rank 0 writes the files.
  void save(const std::string& tag);
  // The epoch's checkpoint, older epochs beyond keep_checkpoints deleted, and
  // "best" when `scores` (null: nothing was validated) beat the best so far.
  void save_epoch(int64_t epoch, const Scores* scores);

 private:
  // Loads into this process; returns the optimizer state it read, if any.
  std::optional<optim::OptimizerState> restore_on_rank_0(int64_t batches_per_epoch, bool& resumed);

  const Config& config_;
  Communicator& comm_;
  const CheckpointStore& store_;
  nn::Transformer& model_;
  optim::Optimizer& optimizer_;
  optim::GradAccumulation& accumulation_;
  TrainingState& state_;
};

}  // namespace sf::train
