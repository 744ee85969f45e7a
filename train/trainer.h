// The training loop (docs/07-training.md): data, model, optimizer and schedule
// from the config; epochs of batches with gradient accumulation and clipping;
// a metrics record per optimizer step; per epoch a validation pass and a
// checkpoint. Resuming from a checkpoint continues exactly where it stopped:
// same batches, same dropout draws, same optimizer state.
//
// The trainer sets the run up and drives it; its parts each have a file:
// the step and divergence (training_step.h), validation and the report
// (validation.h), when to save, keep and resume (run_checkpoints.h), the
// metrics.jsonl records (metrics_log.h). Each part takes the Run, the pieces
// they all share.
//
// With a communicator of several ranks (mpirun, train/data_parallel.h) every
// rank runs this same loop on its share of each batch and the ranks sum their
// gradients; rank 0 alone prints, writes checkpoints, metrics and the report.
#pragma once
#include <atomic>
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
#include "train/training_step.h"
#include "train/validation.h"

namespace sf::train {

// What the parts of a run share; the trainer sets it up and drives it.
struct Run {
  // `comm`: the ranks training together (null: this process alone).
  Run(Config config, Communicator* comm);
  std::unique_ptr<Communicator> own_comm;  // a single process's, when none is given
  Communicator& comm;
  Config config;
  std::unique_ptr<data::Tokenizer> src_tokenizer, tgt_tokenizer;
  std::unique_ptr<data::BatchedDataset> train_set, valid_set;
  std::unique_ptr<nn::Transformer> model;
  std::unique_ptr<optim::Optimizer> optimizer;
  std::unique_ptr<GradientReducer> reducer;  // with several ranks
  optim::GradAccumulation accumulation;
  CheckpointStore store;
  TrainingState state;
  std::string metrics_path;  // rank 0's (the others write none), set by run()
};

class Trainer : public Run {
 public:
  explicit Trainer(Config config, Communicator* comm = nullptr);
  // Trains up to num_epochs. Returns 0 when done, 130 when a stop was
  // requested (after saving a checkpoint of the position reached).
  int run();
  ValidationResult validate() { return train::validate(*this); }

 private:
  nn::TransformerConfig model_config(int64_t src_vocab_size, int64_t tgt_vocab_size) const;
  void check_outputs();
  void prepare_data();
  void build_model_and_optimizer();
  void end_of_epoch(int64_t epoch, int64_t skipped_updates);
  void report_data_parallel(const TrainingStep::Status& trained);

  bool resumed_ = false;
};

// Stopping on SIGINT / SIGTERM: a signal only sets the flag; the loop
// finishes its step, saves the position reached and exits 130. A second
// signal ends the process at once.
extern std::atomic<bool> g_stop_requested;
void install_stop_handlers();

}  // namespace sf::train
