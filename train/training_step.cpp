#include "training_step.h"

#include <cmath>
#include <csignal>
#include <optional>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "base/platform.h"
#include "optim/clip.h"
#include "setup/loss.h"
#include "report/metrics_log.h"

namespace sf::train {

using dist::say;

std::atomic<bool> g_stop_requested{false};

static void request_stop(int) {
  g_stop_requested = true;
  // A second signal, of either kind (Ctrl-C, then kill), ends the process at once.
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
}

static void request_stop_of_rank(int) {
  g_stop_requested = true;
  std::signal(SIGPIPE, SIG_IGN);  // rank 0's last lines may have no reader: the save goes on
}

void install_stop_handlers(StopSignals mode) {
  void (*handler)(int) = mode == StopSignals::rank_saves_first ? request_stop_of_rank : request_stop;
  std::signal(SIGINT, handler);
  std::signal(SIGTERM, handler);
  if (mode != StopSignals::rank_saves_first) return;
  platform::signal_when_parent_ends(SIGTERM);
}

TrainingStep::TrainingStep(const Parts& parts, std::string metrics_path)
    : parts_(parts), metrics_path_(std::move(metrics_path)) {
  const setup::Config& config = parts.config;
  int64_t total_steps = 0;
  for (int64_t epoch = 0; epoch < config.num_epochs; ++epoch)
    total_steps += (parts.train_set.batches_in_epoch(epoch) + config.grad_accum - 1) / config.grad_accum;
  schedule_ = {optim::parse_schedule(config.schedule), config.lr, config.warmup_steps,
               std::max<int64_t>(1, total_steps), config.d_model};
}

int64_t TrainingStep::train_batch(const std::vector<size_t>& batch, int64_t batches_left,
                                  const setup::TrainingState& position) {
  dist::Communicator& comm = parts_.comm;
  // Shares of equal padded cost, not of equal counts: the step waits for
  // the slowest rank (dist::rank_share).
  std::vector<dist::PairWidths> widths;
  for (size_t i : batch) {
    const auto [source, target] = parts_.train_set.padded_widths(i);
    widths.push_back({source, target});
  }
  std::vector<size_t> mine = dist::rank_share(batch, widths, comm.rank(), comm.size());
  std::optional<data::Batch> b;
  if (!mine.empty()) b = parts_.train_set.make_batch(mine);
  // The whole batch's label tokens, and whether a stop was asked anywhere:
  // the one exchange before the forward pass.
  std::vector<int64_t> exchange{b ? b->label_tokens : 0, g_stop_requested ? 1 : 0};
  comm.all_reduce_sum(exchange);
  const int64_t batch_tokens = exchange[0];
  status_.pairs += static_cast<int64_t>(mine.size());
  status_.label_tokens += b ? b->label_tokens : 0;
  status_.empty_shares += mine.empty();
  status_.stop_agreed = exchange[1] > 0;
  status_.updated = false;
  bool step_due = parts_.accumulation.step_due(/*last_batch_of_epoch=*/batches_left == 1);
  if (b) {
    Tensor loss;
    {
      // Mixed precision (docs/13-bf16.md): in bf16 the forward's matrix
      // products round their operands; the backward's follow the forward's.
      AutocastGuard autocast(parts_.config.precision_dtype());
      loss = setup::batch_loss(parts_.model, *b, parts_.config.label_smoothing);
    }
    // This rank's share of the whole batch's mean (data_parallel.h); 1 alone.
    float share = static_cast<float>(b->label_tokens) / static_cast<float>(batch_tokens);
    Tensor scaled = loss * (share * parts_.accumulation.loss_scale(batches_left));
    run_backward(scaled, Tensor::ones({}, scaled.device()), step_due ? parts_.gradients.hooks() : BackwardHooks{});
    pending_loss_ += static_cast<double>(loss.item() * share);
  }
  pending_batches_ += 1;
  pending_tokens_ += batch_tokens;
  if (step_due) optimizer_step(position);
  return batch_tokens;
}

void TrainingStep::optimizer_step(const setup::TrainingState& position) {
  optim::Optimizer& optimizer = parts_.optimizer;
  // The gradients summed over the ranks, and the squares of their elements
  // (dist::StepSquares); with the loss, the ranks add up their runs'
  // squares to the squared gradient norm.
  const dist::StepSquares squares = parts_.gradients.finish(optimizer);
  std::vector<double> sums{pending_loss_, squares.whole ? 0.0 : squares.sum};
  parts_.comm.all_reduce_sum(sums);
  pending_loss_ = sums[0];
  // Every rank has the same norm, so it takes the same decisions.
  const float norm = static_cast<float>(std::sqrt(squares.whole ? squares.sum : sums[1]));
  const std::optional<float>& clip = parts_.config.clip_grad_norm;
  const float clip_scale = clip ? optim::clip_coefficient(norm, *clip) : 1.0f;
  float mean_loss = static_cast<float>(pending_loss_ / pending_batches_);
  const int64_t step = position.global_step + 1;
  if (std::isfinite(mean_loss) && std::isfinite(norm)) {
    status_.nonfinite_in_a_row = 0;
    status_.updated = true;
    float lr = optim::learning_rate(schedule_, step);
    optimizer.set_lr(lr);
    optimizer.step(clip_scale);
    parts_.gradients.after_update(optimizer);
    auto now = std::chrono::steady_clock::now();
    double seconds = std::chrono::duration<double>(now - last_step_).count();
    if (!metrics_path_.empty())
      report::append_metrics(metrics_path_, report::StepRecord{position.epoch, step, mean_loss, lr, norm,
                                                               seconds > 0 ? pending_tokens_ / seconds : 0.0,
                                                               std::chrono::duration<double>(now - start_).count()});
  } else {
    skip_nonfinite_step(mean_loss, norm, step);
  }
  parts_.gradients.zero_grad(optimizer);
  status_.step_elements_squared = squares.elements;
  status_.step_bytes_sent = parts_.comm.bytes_sent() - bytes_sent_before_;
  bytes_sent_before_ = parts_.comm.bytes_sent();
  last_step_ = std::chrono::steady_clock::now();
  status_.last_loss = mean_loss;
  status_.epoch_loss_sum += pending_loss_;
  pending_loss_ = 0;
  pending_batches_ = pending_tokens_ = 0;
}

void TrainingStep::skip_nonfinite_step(float loss, float grad_norm, int64_t step) {
  ++status_.nonfinite_in_a_row;
  ++status_.nonfinite_total;
  if (status_.nonfinite_total == 1)
    say(parts_.comm, "\nstep %lld: loss %g, gradient norm %g: not finite, update skipped (further skips are counted "
        "at the end of each epoch)\n", static_cast<long long>(step), loss, grad_norm);
  if (parts_.config.max_nonfinite_steps > 0 && status_.nonfinite_in_a_row >= parts_.config.max_nonfinite_steps)
    status_.diverged = true;
}

}  // namespace sf::train
