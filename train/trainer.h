// The training loop (docs/07-training.md): data, model, optimizer and schedule
// from the config; epochs of batches with gradient accumulation and clipping;
// a metrics record per optimizer step; per epoch a validation pass and a
// checkpoint. Resuming from a checkpoint continues exactly where it stopped:
// same batches, same dropout draws, same optimizer state.
//
// The trainer sets the run up, owns its parts and drives them; each part has
// a file and takes only what it works on: the step and divergence
// (training_step.h), when to save, keep and resume (run_checkpoints.h),
// validation (eval/validation.h) and its report (report/). The trainer alone
// changes the training position (epoch, batch, optimizer steps).
//
// With a communicator of several ranks (mpirun, dist/data_parallel.h) every
// rank runs this same loop on its share of each batch and the ranks sum their
// gradients (dist/gradient_sync.h); the writer (Communicator::writes, rank 0)
// alone prints, writes checkpoints, metrics and the report.
#pragma once
#include <memory>
#include <string>

#include "data/batching.h"
#include "dist/communicator.h"
#include "dist/gradient_sync.h"
#include "eval/validation.h"
#include "nn/transformer.h"
#include "optim/optimizer.h"
#include "setup/checkpoints.h"
#include "setup/config.h"
#include "setup/model_identity.h"
#include "train/run_checkpoints.h"
#include "train/training_step.h"

namespace sf::train {

class Trainer {
 public:
  // `comm`: the ranks training together (null: this process alone).
  explicit Trainer(setup::Config config, dist::Communicator* comm = nullptr);
  // Trains up to num_epochs. Returns 0 when done, 130 when a stop was
  // requested (after saving a checkpoint of the position reached).
  int run();
  eval::ValidationResult validate() {
    return eval::validate(*model_, *valid_set_, *src_tokenizer_, *tgt_tokenizer_, config_);
  }

  const nn::Transformer& model() const { return *model_; }
  const optim::Optimizer& optimizer() const { return *optimizer_; }

 private:
  void check_outputs();
  void prepare_data();
  void build_model_and_optimizer();
  void end_of_epoch(int64_t epoch, int64_t skipped_updates);
  CheckpointParts checkpoint_parts() {
    return {config_, identity_, store_, metrics_path_, *model_, *optimizer_, *gradients_, comm_};
  }

  std::unique_ptr<dist::Communicator> own_comm_;  // a single process's, when none is given
  dist::Communicator& comm_;
  setup::Config config_;
  std::unique_ptr<data::Tokenizer> src_tokenizer_, tgt_tokenizer_;
  setup::ModelIdentity identity_;  // the model and tokenizers this run trains, written with every checkpoint
  std::unique_ptr<data::BatchedDataset> train_set_, valid_set_;
  std::unique_ptr<nn::Transformer> model_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  std::unique_ptr<dist::GradientSync> gradients_;
  setup::CheckpointStore store_;
  setup::TrainingState position_;  // where training stands
  bool resumed_ = false;     // from a saved position
  std::string metrics_path_;  // the writer's metrics.jsonl (the others write none), set by run()
};

}  // namespace sf::train
