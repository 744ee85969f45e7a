// The training loop (docs/07-training.md): data, model, optimizer and schedule
// from the config; epochs of batches with gradient accumulation and clipping;
// a metrics record per optimizer step; per epoch a validation pass and a
// checkpoint. Resuming from a checkpoint continues exactly where it stopped:
// same batches, same dropout draws, same optimizer state.
#pragma once
#include <atomic>
#include <chrono>
#include <memory>

#include "data/batching.h"
#include "nn/transformer.h"
#include "optim/accumulation.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "train/checkpoints.h"
#include "train/config.h"
#include "train/inference.h"
#include "train/metrics.h"

namespace sf::train {

// Set by SIGINT / SIGTERM: the loop finishes its step, saves and stops.
extern std::atomic<bool> g_stop_requested;
void install_stop_handlers();

struct ValidationResult {
  double loss = 0;
  Scores scores;
  std::vector<std::string> sources, references, predictions;
  // What the model attended to while translating the first few sentences
  // (the report's heatmaps), recorded during that same decoding.
  std::vector<AttentionRecord> attention;
};

class Trainer {
 public:
  explicit Trainer(Config config);
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
  void restore();
  // One batch: forward, loss, backward; an optimizer step when one is due.
  // `batches_left`: in the epoch, this one included. Returns the batch's
  // (unscaled) loss.
  float train_batch(const data::Batch& batch, int64_t batches_left);
  void end_of_epoch(int64_t epoch);
  void write_epoch_report(const ValidationResult& v);
  void skip_nonfinite_step(float loss, float grad_norm);
  void log_step(float loss, float lr, float grad_norm, double tokens_per_second);
  void append_metrics(const std::string& line);
  void save(const std::string& tag);

  Config config_;
  std::unique_ptr<data::Tokenizer> src_tokenizer_, tgt_tokenizer_;
  std::unique_ptr<data::BatchedDataset> train_set_, valid_set_;
  std::unique_ptr<nn::Transformer> model_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  optim::ScheduleOptions schedule_;
  optim::GradAccumulation accumulation_;
  CheckpointStore store_;
  TrainingState state_;
  bool resumed_ = false;
  // Updates skipped for a non-finite loss or gradient norm: in a row, in all.
  int64_t nonfinite_in_a_row_ = 0, nonfinite_total_ = 0;
  bool diverged_ = false;
  std::string metrics_path_;
  std::chrono::steady_clock::time_point start_;
  // Since the last optimizer step: summed batch losses, batches, label tokens.
  double pending_loss_ = 0;
  int64_t pending_batches_ = 0, pending_tokens_ = 0;
  std::chrono::steady_clock::time_point last_step_;
};

}  // namespace sf::train
