// The training loop (docs/07-training.md): data, model, optimizer and schedule
// from the config; epochs of batches with gradient accumulation and clipping;
// a metrics record per optimizer step; per epoch a validation pass and a
// checkpoint. Resuming from a checkpoint continues exactly where it stopped:
// same batches, same dropout draws, same optimizer state.
//
// With a communicator of several ranks (mpirun, train/data_parallel.h) every
// rank runs this same loop on its share of each batch and the ranks sum their
// gradients; rank 0 alone prints, writes checkpoints, metrics and the report.
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
#include "train/communicator.h"
#include "train/config.h"
#include "train/data_parallel.h"
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
  void restore();
  std::optional<optim::OptimizerState> restore_on_rank_0();
  // One batch (this rank's share of it): forward, loss, backward; an
  // optimizer step when one is due. `batches_left`: in the epoch, this one
  // included. Returns the whole batch's label tokens.
  int64_t train_batch(const std::vector<size_t>& batch, int64_t batches_left);
  void optimizer_step();
  void end_of_epoch(int64_t epoch);
  void report_data_parallel();
  // Whether any rank has been asked to stop (a collective).
  bool stop_requested_anywhere();
  // printf to stderr on rank 0; the other ranks keep quiet.
  template <class... Args>
  void say(const char* format, Args... args) const;
  void write_epoch_report(const ValidationResult& v);
  void skip_nonfinite_step(float loss, float grad_norm);
  void log_step(float loss, float lr, float grad_norm, double tokens_per_second);
  void append_metrics(const std::string& line);
  void save(const std::string& tag);

  std::unique_ptr<Communicator> own_comm_;  // a single process's, when none is given
  Communicator& comm_;
  Config config_;
  std::unique_ptr<data::Tokenizer> src_tokenizer_, tgt_tokenizer_;
  std::unique_ptr<data::BatchedDataset> train_set_, valid_set_;
  std::unique_ptr<nn::Transformer> model_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  std::unique_ptr<GradientReducer> reducer_;  // with several ranks
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
  // Since the last optimizer step: summed batch losses (this rank's part of
  // them), batches, label tokens (of the whole batches).
  double pending_loss_ = 0;
  int64_t pending_batches_ = 0, pending_tokens_ = 0;
  std::chrono::steady_clock::time_point last_step_;
  // The last step's mean loss, and the sum of every step's summed batch
  // losses in this epoch (for the progress line).
  float last_loss_ = 0;
  double epoch_loss_sum_ = 0;
  // A stop asked on some rank, as the ranks agreed at the last batch.
  bool stop_agreed_ = false;
};

}  // namespace sf::train
