#include "training_step.h"

#include <cmath>
#include <optional>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "optim/clip.h"
#include "train/loss.h"
#include "train/metrics_log.h"
#include "train/trainer.h"

namespace sf::train {

TrainingStep::TrainingStep(Run& run) : run_(run) {
  const Config& config = run.config;
  int64_t steps_per_epoch = (run.train_set->batches_per_epoch() + config.grad_accum - 1) / config.grad_accum;
  schedule_ = {optim::parse_schedule(config.schedule), config.lr, config.warmup_steps,
               std::max<int64_t>(1, steps_per_epoch * config.num_epochs), config.d_model};
}

int64_t TrainingStep::train_batch(const std::vector<size_t>& batch, int64_t batches_left) {
  std::vector<size_t> mine = rank_share(batch, run_.comm.rank(), run_.comm.size());
  std::optional<data::Batch> b;
  if (!mine.empty()) b = run_.train_set->make_batch(mine);
  // The whole batch's label tokens, and whether a stop was asked anywhere:
  // the one exchange before the forward pass.
  std::vector<int64_t> exchange{b ? b->label_tokens : 0, g_stop_requested ? 1 : 0};
  run_.comm.all_reduce_sum(exchange);
  const int64_t batch_tokens = exchange[0];
  status_.pairs += static_cast<int64_t>(mine.size());
  status_.label_tokens += b ? b->label_tokens : 0;
  status_.empty_shares += mine.empty();
  status_.stop_agreed = exchange[1] > 0;
  bool step_due = run_.accumulation.step_due(/*last_batch_of_epoch=*/batches_left == 1);
  if (b) {
    Tensor loss;
    {
      // Mixed precision (docs/13-bf16.md): in bf16 the forward's matrix
      // products round their operands; the backward's follow the forward's.
      AutocastGuard autocast(run_.config.precision_dtype());
      loss = batch_loss(*run_.model, *b, run_.config.label_smoothing);
    }
    // This rank's share of the whole batch's mean (data_parallel.h); 1 alone.
    float share = static_cast<float>(b->label_tokens) / static_cast<float>(batch_tokens);
    Tensor scaled = loss * (share * run_.accumulation.loss_scale(batches_left));
    BackwardHooks hooks = run_.reducer && step_due ? run_.reducer->hooks() : BackwardHooks{};
    run_backward(scaled, Tensor::ones({}, scaled.device()), hooks);
    pending_loss_ += static_cast<double>(loss.item() * share);
  }
  pending_batches_ += 1;
  pending_tokens_ += batch_tokens;
  if (step_due) optimizer_step();
  return batch_tokens;
}

void TrainingStep::optimizer_step() {
  optim::Optimizer& optimizer = *run_.optimizer;
  TrainingState& state = run_.state;
  // The squares of a ZeRO rank's summed gradient elements, which the ranks
  // add up to the squared gradient norm.
  double squares = 0.0;
  if (run_.reducer) {
    run_.reducer->finish();
    if (run_.config.zero && !optimizer.sharded()) optimizer.shard(run_.reducer->owned(run_.comm.rank()));
    if (optimizer.sharded()) squares = optim::grad_squares(optimizer.params(), optimizer.owned());
    std::vector<double> sums{pending_loss_, squares};
    run_.comm.all_reduce_sum(sums);
    pending_loss_ = sums[0];
    squares = sums[1];
  }
  // Every rank has the same norm, so it takes the same decisions.
  const std::optional<float>& clip = run_.config.clip_grad_norm;
  float norm = 0.0f;
  if (optimizer.sharded()) {
    norm = static_cast<float>(std::sqrt(squares));
    if (clip) optim::clip_to_norm(optimizer.params(), optimizer.owned(), norm, *clip);
  } else {
    norm = clip ? optim::clip_grad_norm(optimizer.params(), *clip) : optim::grad_norm(optimizer.params());
  }
  float mean_loss = static_cast<float>(pending_loss_ / pending_batches_);
  if (std::isfinite(mean_loss) && std::isfinite(norm)) {
    status_.nonfinite_in_a_row = 0;
    state.global_step += 1;
    float lr = optim::learning_rate(schedule_, state.global_step);
    optimizer.set_lr(lr);
    optimizer.step();
    if (optimizer.sharded()) all_gather_parameters(optimizer, run_.reducer->shard_runs(), run_.comm);
    auto now = std::chrono::steady_clock::now();
    double seconds = std::chrono::duration<double>(now - last_step_).count();
    if (!run_.metrics_path.empty())
      append_metrics(run_.metrics_path, StepRecord{state.epoch, state.global_step, mean_loss, lr, norm,
                                                   seconds > 0 ? pending_tokens_ / seconds : 0.0,
                                                   std::chrono::duration<double>(now - start_).count()});
  } else {
    skip_nonfinite_step(mean_loss, norm);
  }
  if (run_.reducer)
    run_.reducer->zero_grad();
  else
    optimizer.zero_grad();
  status_.step_bytes_sent = run_.comm.bytes_sent() - bytes_sent_before_;
  bytes_sent_before_ = run_.comm.bytes_sent();
  last_step_ = std::chrono::steady_clock::now();
  status_.last_loss = mean_loss;
  status_.epoch_loss_sum += pending_loss_;
  pending_loss_ = 0;
  pending_batches_ = pending_tokens_ = 0;
}

void TrainingStep::skip_nonfinite_step(float loss, float grad_norm) {
  ++status_.nonfinite_in_a_row;
  ++status_.nonfinite_total;
  int64_t step = run_.state.global_step + 1;
  if (status_.nonfinite_total == 1)
    say(run_.comm, "\nstep %lld: loss %g, gradient norm %g: not finite, update skipped (further skips are counted at "
        "the end of each epoch)\n", static_cast<long long>(step), loss, grad_norm);
  if (run_.config.max_nonfinite_steps > 0 && status_.nonfinite_in_a_row >= run_.config.max_nonfinite_steps)
    status_.diverged = true;
}

}  // namespace sf::train
