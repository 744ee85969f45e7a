// The training loop (docs/07-training.md): data, model, optimizer and schedule
// from the config; epochs of batches with gradient accumulation and clipping;
// a metrics record per optimizer step; per epoch a validation pass and a
// checkpoint. Resuming from a checkpoint continues exactly where it stopped:
// same batches, same dropout draws, same optimizer state.
//
// The trainer sets the run up and drives it; its parts each have a file:
// the step and divergence (training_step.h), validation and the report
// (validation.h), when to save, keep and resume (run_checkpoints.h), the
// metrics.jsonl records (metrics_log.h), stopping on a signal (stop.h).
//
// With a communicator of several ranks (mpirun, train/data_parallel.h) every
// rank runs this same loop on its share of each batch and the ranks sum their
// gradients; rank 0 alone prints, writes checkpoints, metrics and the report.
#pragma once
#include <memory>
#include <string>

#include "data/batching.h"
#include "nn/transformer.h"
#include "optim/accumulation.h"
#include "optim/optimizer.h"
#include "train/checkpoints.h"
#include "train/communicator.h"
#include "train/config.h"
#include "train/data_parallel.h"
#include "train/run_checkpoints.h"
#include "train/stop.h"
#include "train/training_step.h"
#include "train/validation.h"

namespace sf::train {

class Trainer {
 public:
  // `comm`: the ranks training together (null: this process alone).
  explicit Trainer(Config config, Communicator* comm = nullptr);
  ~Trainer();
  // Trains up to num_epochs. Returns 0 when done, 130 when a stop was
  // requested (after saving a checkpoint of the position reached).
  int run();

  nn::Transformer& model() { return *model_; }
  const data::Tokenizer& src_tokenizer() const { return *src_tokenizer_; }
  const data::Tokenizer& tgt_tokenizer() const { return *tgt_tokenizer_; }
  ValidationResult validate();

 private:
  nn::TransformerConfig model_config(int64_t src_vocab_size, int64_t tgt_vocab_size) const;
  void check_outputs();
  void prepare_data();
  void build_model_and_optimizer();
  void end_of_epoch(int64_t epoch, const TrainingStep& step);
  void report_data_parallel();

  std::unique_ptr<Communicator> own_comm_;  // a single process's, when none is given
  Communicator& comm_;
  Config config_;
  std::unique_ptr<data::Tokenizer> src_tokenizer_, tgt_tokenizer_;
  std::unique_ptr<data::BatchedDataset> train_set_, valid_set_;
  std::unique_ptr<nn::Transformer> model_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  std::unique_ptr<GradientReducer> reducer_;  // with several ranks
  optim::GradAccumulation accumulation_;
  CheckpointStore store_;
  TrainingState state_;
  std::unique_ptr<RunCheckpoints> checkpoints_;
  bool resumed_ = false;
  std::string metrics_path_;  // rank 0's (the others write none), set by run()
};

}  // namespace sf::train
