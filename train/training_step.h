// One batch of training and the optimizer step it may complete
// (docs/07-training.md): this rank's share of the batch forward, the loss,
// backward; when a step is due, the gradients summed over the ranks, their
// norm (clipped when clip_grad_norm is set), the update at the schedule's
// rate, and the step's record in metrics.jsonl.
//
// Divergence policy: an update from a NaN or infinite loss or gradient would
// poison every weight, so it is skipped (weights and optimizer state stay as
// they were; the schedule does not advance). The first skip is reported with
// its step; after max_nonfinite_steps skips in a row the run has diverged,
// and the trainer saves its last good state and stops.
#pragma once
#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "data/batching.h"
#include "dist/communicator.h"
#include "dist/gradient_sync.h"
#include "nn/transformer.h"
#include "optim/accumulation.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "setup/checkpoints.h"
#include "setup/config.h"

namespace sf::train {

// What a step takes from the config, read once: values, not the config.
struct StepSettings {
  DType precision;
  float label_smoothing;
  std::optional<float> clip_grad_norm;
  int64_t grad_accum, max_nonfinite_steps;
  optim::ScheduleOptions schedule;  // its length: the optimizer steps of every epoch of `train_set`
};
StepSettings step_settings(const setup::Config& config, const data::BatchedDataset& train_set);

class TrainingStep {
 public:
  // The step updates `model` (its weights and gradients, its dropout stream),
  // `optimizer` and `gradients`, and exchanges over `comm`; each outlives it.
  // `pending`: batches already accumulated toward the next optimizer step (a
  // resumed position's); `metrics_path`: where each update's record goes (""
  // for none: the ranks but 0).
  TrainingStep(const StepSettings& settings, nn::Transformer& model, optim::Optimizer& optimizer,
               dist::GradientSync& gradients, dist::Communicator& comm, int64_t pending, std::string metrics_path);
  // One batch of `train_set` (this rank's share of it); `batches_left`: in
  // the epoch, this one included; `position`: where training stands, which
  // the trainer alone advances (by one optimizer step when status().updated).
  // Returns the whole batch's label tokens.
  int64_t train_batch(const data::BatchedDataset& train_set, const std::vector<size_t>& batch, int64_t batches_left,
                      const setup::TrainingState& position);

  struct Status {
    bool updated = false;       // the last batch ended with an optimizer update
    float last_loss = 0;        // the last step's mean loss
    double epoch_loss_sum = 0;  // every step's summed batch losses this epoch
    bool stop_agreed = false;   // a stop asked on some rank, as the ranks agreed at the last batch
    bool diverged = false;
    // Updates skipped for a non-finite loss or gradient norm: in a row, in all.
    int64_t nonfinite_in_a_row = 0, nonfinite_total = 0;
    // What this rank trained on in this process: pairs and label tokens of its
    // shares, and the batches in which its share was empty.
    int64_t pairs = 0, label_tokens = 0, empty_shares = 0;
    // The bytes the communicator sent for the last optimizer step, and the
    // gradient elements whose squares this rank took for its norm.
    int64_t step_bytes_sent = 0, step_elements_squared = 0;
  };
  const Status& status() const { return status_; }
  // Batches accumulated since the last optimizer step.
  int64_t pending() const { return accumulation_.pending(); }
  void start_epoch() { status_.epoch_loss_sum = 0; }

 private:
  void skip_nonfinite_step(float loss, float grad_norm, int64_t step);

  StepSettings settings_;
  nn::Transformer& model_;
  optim::Optimizer& optimizer_;
  dist::GradientSync& gradients_;
  dist::Communicator& comm_;
  optim::GradAccumulation accumulation_;
  std::string metrics_path_;
  Status status_;
  int64_t bytes_sent_before_ = 0;  // the communicator's count at the end of the previous step
  // Since the last optimizer step: summed batch losses (this rank's part of
  // them), batches, label tokens (of the whole batches).
  double pending_loss_ = 0;
  int64_t pending_batches_ = 0, pending_tokens_ = 0;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_step_ = start_;
};

// Stopping on SIGINT / SIGTERM: a signal only sets the flag; the loop
// finishes its step, saves the position reached and exits 130.
extern std::atomic<bool> g_stop_requested;
// Who may end a stopping process before it has saved. A process alone: its
// user, with a second signal, which ends it at once. A rank of a job: only
// a SIGKILL (mpirun's, a second after its SIGTERM, or the user's), so that
// no further SIGINT or SIGTERM, from mpirun or a user signalling the ranks,
// skips the save the first one began; SIGPIPE is ignored too (a gone mpirun
// takes the ranks' stderr with it). And the rank takes the end of its parent,
// mpirun, for a SIGTERM: on a second Ctrl-C mpirun aborts at once, telling
// the ranks nothing, and they would train on as orphans.
enum class StopSignals { second_ends_process, rank_saves_first };
void install_stop_handlers(StopSignals mode);

}  // namespace sf::train
