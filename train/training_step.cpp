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

StepSettings step_settings(const setup::Config& config, const data::BatchedDataset& train_set) {
  int64_t total_steps = 0;
  for (int64_t epoch = 0; epoch < config.num_epochs; ++epoch)
    total_steps += (train_set.batches_in_epoch(epoch) + config.grad_accum - 1) / config.grad_accum;
  return {config.precision_dtype(), config.label_smoothing, config.clip_grad_norm, config.grad_accum,
          config.max_nonfinite_steps,
          {optim::parse_schedule(config.schedule), config.lr, config.warmup_steps, std::max<int64_t>(1, total_steps),
           config.d_model}};
}

TrainingStep::TrainingStep(const StepSettings& settings, nn::Transformer& model, optim::Optimizer& optimizer,
                           dist::GradientSync& gradients, dist::Communicator& comm, int64_t pending,
                           std::string metrics_path)
    : settings_(settings), model_(model), optimizer_(optimizer), gradients_(gradients), comm_(comm),
      accumulation_(settings.grad_accum), metrics_path_(std::move(metrics_path)) {
  accumulation_.set_pending(pending);
}

int64_t TrainingStep::train_batch(const data::BatchedDataset& train_set, const std::vector<size_t>& batch,
                                  int64_t batches_left, const setup::TrainingState& position) {
  // The batch: this rank's share, of equal padded cost, not of equal counts
  // (the step waits for the slowest rank: dist::rank_share), and the one
  // exchange before the forward pass: the whole batch's label tokens, and
  // whether a stop was asked on any rank.
  std::vector<dist::PairWidths> widths;
  for (size_t i : batch) {
    const auto [source, target] = train_set.padded_widths(i);
    widths.push_back({source, target});
  }
  const std::vector<size_t> mine = dist::rank_share(batch, widths, comm_.rank(), comm_.size());
  std::optional<data::Batch> b;
  if (!mine.empty()) b = train_set.make_batch(mine);
  std::vector<int64_t> exchange{b ? b->label_tokens : 0, g_stop_requested ? 1 : 0};
  comm_.all_reduce_sum(exchange);
  const int64_t batch_tokens = exchange[0];
  status_.pairs += std::ssize(mine);
  status_.label_tokens += b ? b->label_tokens : 0;
  status_.empty_shares += mine.empty();
  status_.stop_agreed = exchange[1] > 0;
  status_.updated = false;
  const bool step_due = accumulation_.step_due(/*last_batch_of_epoch=*/batches_left == 1);
  if (b) {
    // Forward and loss. Mixed precision (docs/13-bf16.md): in bf16 the
    // forward's matrix products round their operands; the backward's follow
    // the forward's.
    Tensor loss;
    {
      AutocastGuard autocast(settings_.precision);
      loss = setup::batch_loss(model_, *b, settings_.label_smoothing);
    }
    // Backward, of this rank's share of the whole batch's mean
    // (data_parallel.h; 1 alone), and of the accumulated batches' mean.
    float share = static_cast<float>(b->label_tokens) / static_cast<float>(batch_tokens);
    Tensor scaled = loss * (share * accumulation_.loss_scale(batches_left));
    run_backward(scaled, Tensor::ones({}, scaled.device()), step_due ? gradients_.hooks() : BackwardHooks{});
    pending_loss_ += static_cast<double>(loss.item() * share);
  }
  pending_batches_ += 1;
  pending_tokens_ += batch_tokens;
  if (!step_due) return batch_tokens;

  // Sum across ranks: the gradients, and the squares of their elements
  // (dist::StepSquares), which with the loss the ranks add up to the squared
  // gradient norm; every rank then has the same norm and takes the same decisions.
  const dist::StepSquares squares = gradients_.finish(optimizer_);
  std::vector<double> sums{pending_loss_, squares.whole ? 0.0 : squares.sum};
  comm_.all_reduce_sum(sums);
  pending_loss_ = sums[0];
  const float norm = static_cast<float>(std::sqrt(squares.whole ? squares.sum : sums[1]));
  // Clip, update at the schedule's rate (not from a non-finite loss or norm), log.
  const float clip_scale = settings_.clip_grad_norm ? optim::clip_coefficient(norm, *settings_.clip_grad_norm) : 1.0f;
  const float mean_loss = static_cast<float>(pending_loss_ / pending_batches_);
  const int64_t step = position.global_step + 1;
  if (std::isfinite(mean_loss) && std::isfinite(norm)) {
    status_.nonfinite_in_a_row = 0;
    status_.updated = true;
    const float lr = optim::learning_rate(settings_.schedule, step);
    optimizer_.set_lr(lr);
    optimizer_.step(clip_scale);
    gradients_.after_update(optimizer_);
    const auto now = std::chrono::steady_clock::now();
    const double seconds = std::chrono::duration<double>(now - last_step_).count();
    if (!metrics_path_.empty())
      report::append_metrics(metrics_path_, report::StepRecord{position.epoch, step, mean_loss, lr, norm,
                                                               seconds > 0 ? pending_tokens_ / seconds : 0.0,
                                                               std::chrono::duration<double>(now - start_).count()});
  } else {
    skip_nonfinite_step(mean_loss, norm, step);
  }
  gradients_.zero_grad(optimizer_);
  status_.step_elements_squared = squares.elements;
  status_.step_bytes_sent = comm_.bytes_sent() - bytes_sent_before_;
  bytes_sent_before_ = comm_.bytes_sent();
  last_step_ = std::chrono::steady_clock::now();
  status_.last_loss = mean_loss;
  status_.epoch_loss_sum += pending_loss_;
  pending_loss_ = 0;
  pending_batches_ = pending_tokens_ = 0;
  return batch_tokens;
}

void TrainingStep::skip_nonfinite_step(float loss, float grad_norm, int64_t step) {
  ++status_.nonfinite_in_a_row;
  ++status_.nonfinite_total;
  if (status_.nonfinite_total == 1)
    say(comm_, "\nstep %lld: loss %g, gradient norm %g: not finite, update skipped (further skips are counted "
        "at the end of each epoch)\n", static_cast<long long>(step), loss, grad_norm);
  if (settings_.max_nonfinite_steps > 0 && status_.nonfinite_in_a_row >= settings_.max_nonfinite_steps)
    status_.diverged = true;
}

}  // namespace sf::train
