// A training run's checkpoints (docs/07-training.md): the one it resumes
// from, when it saves (each epoch; the position reached when stopped or
// diverged), which it keeps (the newest keep_checkpoints epochs) and which is
// "best". The files themselves are CheckpointStore's (train/checkpoints.h).
#pragma once
#include <string>

#include "train/metrics.h"

namespace sf::train {

struct Run;  // train/trainer.h

// Rank 0 reads the checkpoint `preload` names (only its machine need have the
// files) and every rank receives what it read: the weights (also when
// starting fresh, so that every replica starts equal), the optimizer state
// and the position. True when the run resumes from a saved position.
bool restore_checkpoint(Run& run);
// Collective: every rank hands rank 0 what only it holds (its dropout stream,
// its share of a sharded optimizer state); rank 0 writes the files.
void save_checkpoint(Run& run, const std::string& tag);
// The epoch's checkpoint, older epochs beyond keep_checkpoints deleted, and
// "best" when `scores` (null: nothing was validated) beat the best so far.
void save_epoch_checkpoint(Run& run, int64_t epoch, const Scores* scores);

}  // namespace sf::train
