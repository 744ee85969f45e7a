#include "training_step.h"

#include <cmath>
#include <optional>

#include "autograd/engine.h"
#include "optim/clip.h"
#include "train/loss.h"
#include "train/metrics_log.h"
#include "train/stop.h"

namespace sf::train {

TrainingStep::TrainingStep(const Config& config, Communicator& comm, nn::Transformer& model,
                           optim::Optimizer& optimizer, GradientReducer* reducer, optim::GradAccumulation& accumulation,
                           TrainingState& state, std::string metrics_path, int64_t batches_per_epoch)
    : config_(config), comm_(comm), model_(model), optimizer_(optimizer), reducer_(reducer),
      accumulation_(accumulation), state_(state), metrics_path_(std::move(metrics_path)) {
  int64_t steps_per_epoch = (batches_per_epoch + config.grad_accum - 1) / config.grad_accum;
  schedule_ = {optim::parse_schedule(config.schedule), config.lr, config.warmup_steps,
               std::max<int64_t>(1, steps_per_epoch * config.num_epochs), config.d_model};
}

int64_t TrainingStep::train_batch(const data::BatchedDataset& set, const std::vector<size_t>& batch,
                                  int64_t batches_left) {
  std::vector<size_t> mine = rank_share(batch, comm_.rank(), comm_.size());
  std::optional<data::Batch> b;
  if (!mine.empty()) b = set.make_batch(mine);
  // The whole batch's label tokens, and whether a stop was asked anywhere:
  // the one exchange before the forward pass.
  std::vector<int64_t> exchange{b ? b->label_tokens : 0, g_stop_requested ? 1 : 0};
  comm_.all_reduce_sum(exchange);
  const int64_t batch_tokens = exchange[0];
  status_.stop_agreed = exchange[1] > 0;
  bool step_due = accumulation_.step_due(/*last_batch_of_epoch=*/batches_left == 1);
  if (b) {
    Tensor memory = model_.encode(b->encoder_input, b->encoder_mask);
    Tensor features = model_.decode(memory, b->encoder_mask, b->decoder_input, b->decoder_mask);
    Tensor loss = translation_loss(model_, features, b->label, config_.label_smoothing);
    // This rank's share of the whole batch's mean (data_parallel.h); 1 alone.
    float share = static_cast<float>(b->label_tokens) / static_cast<float>(batch_tokens);
    Tensor scaled = loss * (share * accumulation_.loss_scale(batches_left));
    BackwardHooks hooks = reducer_ && step_due ? reducer_->hooks() : BackwardHooks{};
    run_backward(scaled, Tensor::ones({}, scaled.device()), hooks);
    pending_loss_ += static_cast<double>(loss.item() * share);
  }
  pending_batches_ += 1;
  pending_tokens_ += batch_tokens;
  if (step_due) optimizer_step();
  return batch_tokens;
}

void TrainingStep::optimizer_step() {
  if (reducer_) {
    reducer_->finish();
    std::vector<double> loss{pending_loss_};
    comm_.all_reduce_sum(loss);
    pending_loss_ = loss[0];
  }
  // Every rank holds the same summed gradients, so the same norm and the same decisions.
  float norm = config_.clip_grad_norm ? optim::clip_grad_norm(optimizer_.params(), *config_.clip_grad_norm)
                                      : optim::grad_norm(optimizer_.params());
  float mean_loss = static_cast<float>(pending_loss_ / pending_batches_);
  if (std::isfinite(mean_loss) && std::isfinite(norm)) {
    status_.nonfinite_in_a_row = 0;
    state_.global_step += 1;
    float lr = optim::learning_rate(schedule_, state_.global_step);
    optimizer_.set_lr(lr);
    optimizer_.step();
    if (optimizer_.sharded()) all_gather_parameters(optimizer_, comm_);
    auto now = std::chrono::steady_clock::now();
    double seconds = std::chrono::duration<double>(now - last_step_).count();
    if (!metrics_path_.empty())
      append_metrics(metrics_path_, StepRecord{state_.epoch, state_.global_step, mean_loss, lr, norm,
                                               seconds > 0 ? pending_tokens_ / seconds : 0.0,
                                               std::chrono::duration<double>(now - start_).count()});
  } else {
    skip_nonfinite_step(mean_loss, norm);
  }
  optimizer_.zero_grad();
  last_step_ = std::chrono::steady_clock::now();
  status_.last_loss = mean_loss;
  status_.epoch_loss_sum += pending_loss_;
  pending_loss_ = 0;
  pending_batches_ = pending_tokens_ = 0;
}

void TrainingStep::skip_nonfinite_step(float loss, float grad_norm) {
  ++status_.nonfinite_in_a_row;
  ++status_.nonfinite_total;
  int64_t step = state_.global_step + 1;
  if (status_.nonfinite_total == 1)
    say(comm_, "\nstep %lld: loss %g, gradient norm %g: not finite, update skipped (further skips are counted at "
        "the end of each epoch)\n", static_cast<long long>(step), loss, grad_norm);
  if (config_.max_nonfinite_steps > 0 && status_.nonfinite_in_a_row >= config_.max_nonfinite_steps)
    status_.diverged = true;
}

}  // namespace sf::train
