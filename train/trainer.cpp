#include "trainer.h"

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "autograd/kernels/thread_pool.h"
#include "base/atomic_file.h"
#include "base/digest.h"
#include "base/error.h"
#include "data/pipeline.h"
#include "dist/data_parallel_report.h"
#include "report/metrics_log.h"
#include "report/progress.h"
#include "setup/resources.h"
#include "report/validation_report.h"

namespace sf::train {

namespace fs = std::filesystem;
using dist::say;

static std::unique_ptr<optim::Optimizer> make_optimizer(const setup::Config& c, const NamedTensors& params) {
  const setup::OptimizerConfig& o = c.optimizer;
  if (o.name == "sgd")
    return std::make_unique<optim::Sgd>(params, c.lr, optim::SgdOptions{o.momentum, o.weight_decay, o.nesterov});
  return std::make_unique<optim::Adam>(
      params, c.lr, optim::AdamOptions{o.beta1, o.beta2, o.eps, o.weight_decay, o.name == "adamw"});
}

Trainer::Trainer(setup::Config c, dist::Communicator* given)
    : own_comm_(given ? nullptr : dist::single_process()), comm_(given ? *given : *own_comm_), config_(std::move(c)),
      store_(config_.model_folder, config_.model_basename, config_.keep_checkpoints) {
  kernels::set_num_threads(setup::threads_to_use(config_.threads, comm_.local_size(), comm_.size() > 1));
  check_outputs();
  prepare_data();
  build_model_and_optimizer();
  if (std::optional<setup::TrainingState> resumed =
          restore_checkpoint(checkpoint_parts(), *train_set_)) {
    position_ = std::move(*resumed);
    resumed_ = true;
  }
}

// What the run needs, checked before any data is read or written: memory for
// the model, and every folder it writes to (the writer's: no other rank writes).
void Trainer::check_outputs() {
  // The vocabularies are not known yet: without them, a lower bound.
  setup::check_fits_in_memory(setup::training_bytes(setup::model_config(config_, 0, 0), config_.full_length_rows()),
                              "training this model", config_.source);
  if (!comm_.writes()) return;
  if (config_.preload && *config_.preload != "latest" && !fs::is_regular_file(*config_.preload))
    fail(config_.source, ": key 'preload': ", *config_.preload, ": no such file");
  setup::check_writable_folder(config_.model_folder, config_.source, "model_folder");
  setup::check_writable_folder(config_.experiment_name, config_.source, "experiment_name");
  for (const std::string& lang : {config_.lang_src, config_.lang_tgt}) {
    std::string folder = fs::path(config_.tokenizer_path(lang)).parent_path().string();
    setup::check_writable_folder(folder.empty() ? "." : folder, config_.source, "tokenizer_file");
  }
  store_.remove_unfinished();
  claim_model_folder(config_, store_, comm_);
}

// Every rank reads the config and the data itself (on several machines, its
// own copies); a digest of what each read, compared across ranks, refuses a
// run whose ranks would train on different things.
static uint64_t data_digest(const std::vector<data::Example>& train, const std::vector<data::Example>& valid,
                            const data::Tokenizer& src, const data::Tokenizer& tgt) {
  Digest d;
  for (const std::vector<data::Example>* set : {&train, &valid}) {
    d.add(std::to_string(set->size()));
    for (const data::Example& e : *set) {
      for (const std::string& text : {e.text.src, e.text.tgt, std::string("\t")}) d.add(text);
      d.add(e.src);
      d.add(e.tgt);
    }
  }
  for (const data::Tokenizer* t : {&src, &tgt}) d.add(std::to_string(t->vocab_size()));
  return d.value();
}

void Trainer::prepare_data() {
  const setup::DataConfig& d = config_.data;
  data::CorpusOptions options{d.task, d.size, d.train, d.valid, d.format, config_.lang_src,
                              config_.lang_tgt, config_.val_fraction, static_cast<uint64_t>(config_.seed)};
  data::Corpus corpus = data::load_corpus(options);
  say(comm_, "data: %zu training pairs, %zu validation pairs", corpus.train.size(), corpus.valid.size());
  if (corpus.blank_lines > 0) say(comm_, " (%lld blank lines skipped)", static_cast<long long>(corpus.blank_lines));
  say(comm_, "\n");
  if (corpus.train.empty())
    fail(d.is_task() ? config_.source : d.train, ": no training pairs");
  if (!d.valid.empty() && corpus.valid.empty()) fail(d.valid, ": no validation pairs");

  data::TokenizerOptions tokenizer_options{config_.tokenizer, config_.min_frequency, config_.vocab_size, config_.shared_vocab};
  // The writer decides whether an existing tokenizer file is this run's; the
  // other ranks take theirs as it is (the digests compared below refuse a
  // rank whose files differ).
  std::optional<setup::ModelIdentity> preloaded = comm_.writes() ? preloaded_identity(config_, store_) : std::nullopt;
  auto tokenizer = [&](const std::string& lang, data::Side side) {
    std::string path = config_.tokenizer_path(lang);
    std::string model_sha256;
    if (preloaded) model_sha256 = side == data::Side::Source ? preloaded->src_tokenizer_sha256
                                                             : preloaded->tgt_tokenizer_sha256;
    data::TokenizerReuse reuse{model_sha256, config_.overwrite, /*any_origin=*/!comm_.writes()};
    data::TokenizerFile file =
        data::load_or_build_tokenizer(path, corpus.train, side, tokenizer_options, /*save=*/comm_.writes(), reuse);
    say(comm_, "tokenizer %s: %s %s (%lld%s tokens)\n", lang.c_str(),
        file.loaded ? "loaded from" : "built and saved to", path.c_str(),
        static_cast<long long>(file.tokenizer.vocab_size()), file.tokenizer.is_bpe() ? " BPE" : "");
    return file;
  };
  data::TokenizerFile src_file = tokenizer(config_.lang_src, data::Side::Source);
  data::TokenizerFile tgt_file = tokenizer(config_.lang_tgt, data::Side::Target);
  if (config_.shared_vocab && src_file.tokenizer.to_json() != tgt_file.tokenizer.to_json())
    fail(config_.tokenizer_path(config_.lang_src), " and ", config_.tokenizer_path(config_.lang_tgt),
         ": hold different tokenizers, but shared_vocab is true (delete them to build one shared vocabulary)");
  identity_ = setup::ModelIdentity::of_run(config_, src_file, tgt_file);
  src_tokenizer_ = std::make_unique<data::Tokenizer>(std::move(src_file.tokenizer));
  tgt_tokenizer_ = std::make_unique<data::Tokenizer>(std::move(tgt_file.tokenizer));

  std::vector<data::Example> train = data::encode_pairs(corpus.train, *src_tokenizer_, *tgt_tokenizer_);
  std::vector<data::Example> valid = data::encode_pairs(corpus.valid, *src_tokenizer_, *tgt_tokenizer_);
  if (config_.max_len_filter) {
    int64_t dropped = data::drop_long_examples(train, config_.seq_len) +
                      data::drop_long_examples(valid, config_.seq_len);
    if (dropped > 0)
      say(comm_, "data: dropped %lld pairs longer than seq_len - 2 = %lld tokens\n",
          static_cast<long long>(dropped), static_cast<long long>(data::longest_source(config_.seq_len)));
    if (train.empty()) fail(config_.source, ": every training pair is longer than seq_len - 2 tokens");
  }
  Digest settings;
  settings.add(config_.canonical);
  dist::check_same_on_every_rank(settings.value(), "settings (config file and --set)", config_.source, comm_);
  dist::check_same_on_every_rank(data_digest(train, valid, *src_tokenizer_, *tgt_tokenizer_),
                                 "data (pairs or tokenizers)", config_.source, comm_);
  data::BatchOptions batching{config_.batch_size, config_.seq_len, config_.bucket, true,
                              static_cast<uint64_t>(config_.seed), config_.max_tokens};
  train_set_ = std::make_unique<data::BatchedDataset>(std::move(train), batching);
  batching.shuffle = false;
  valid_set_ = std::make_unique<data::BatchedDataset>(std::move(valid), batching);
}

void Trainer::build_model_and_optimizer() {
  const nn::TransformerConfig& mc = identity_.model;
  if (mc.tie_embeddings && mc.src_vocab_size != mc.tgt_vocab_size)
    fail(config_.source, ": key 'tie_embeddings': the source and target vocabularies differ (", mc.src_vocab_size,
         " and ", mc.tgt_vocab_size, " tokens); one matrix needs one vocabulary for both languages");
  setup::check_fits_in_memory(setup::training_bytes(mc, config_.full_length_rows()), "training this model", config_.source);
  Rng init(static_cast<uint64_t>(config_.seed));
  model_ = nn::build_transformer(mc, init);
  Device& device = device_named(config_.device);
  model_->to(device);
  Rng& dropout = model_->dropout_rng();
  dropout.set_state(dist::rank_dropout_state(dropout.state(), comm_.rank()));
  // The threads are the CPU's: they run the kernels there, and the host's work
  // (data, decoding's bookkeeping) beside an OpenCL device.
  say(comm_, "model: %lld parameters on %s, %d CPU threads\n", static_cast<long long>(model_->num_parameters()),
      device.description().c_str(), kernels::num_threads());
  if (std::string note = config_.precision_note(); !note.empty()) say(comm_, "%s\n", note.c_str());
  optimizer_ = make_optimizer(config_, model_->named_parameters());
  // The one choice between a process alone and data-parallel ranks.
  gradients_ = dist::make_gradient_sync(optimizer_->params(), comm_,
                                        static_cast<size_t>(config_.bucket_mb * 1048576.0),
                                        config_.overlap_grad_reduce, config_.zero);
  if (const dist::GradientReducer* reducer = gradients_->reducer())
    say(comm_,
        "data parallel: %d ranks, %lld threads each; gradients all-reduced in %zu buckets (%.1f MB per step)%s\n",
        comm_.size(), static_cast<long long>(kernels::num_threads()), reducer->buckets(),
        reducer->bytes_per_step() / 1e6, config_.zero ? "; optimizer state sharded (zero 1)" : "");
}

void Trainer::end_of_epoch(int64_t epoch, int64_t skipped_updates) {
  // Validation decodes the whole validation set, prints samples and writes a
  // record: whatever fails there, the epoch's training is saved first (no
  // validation scores, so the best checkpoint stays as it was), then the run
  // ends with the failure, in one line that says what was kept.
  eval::ValidationResult v;
  try {
    v = validate();
    if (!v.predictions.empty()) {
      say(comm_, "%s", eval::validation_lines(epoch, v, config_.val_examples).c_str());
      if (!metrics_path_.empty())
        report::append_metrics(metrics_path_, report::ValidRecord{epoch, position_.global_step, v.loss, v.scores});
    }
  } catch (const std::exception& e) {
    std::string tag = setup::CheckpointStore::epoch_tag(epoch);
    save_epoch_checkpoint(checkpoint_parts(), epoch, position_, /*best=*/false);
    rethrow_as(e, "validation after epoch ", tag, " failed (the epoch is saved as ", store_.weights_path(tag),
               "; preload latest resumes after it): ", plain_message(e));
  }
  bool validated = !v.predictions.empty();
  bool best = validated && v.scores.at(setup::kBestMetric) > position_.best_score;
  if (best) position_.best_score = v.scores.at(setup::kBestMetric);
  // The checkpoint before the report: whatever fails there, the epoch's work is kept.
  save_epoch_checkpoint(checkpoint_parts(), epoch, position_, best);
  if (skipped_updates > 0)
    say(comm_, "epoch %02lld: %lld updates skipped so far for a non-finite loss or gradient norm\n",
        static_cast<long long>(epoch), static_cast<long long>(skipped_updates));
  if (validated && !metrics_path_.empty())
    report::write_validation_report(config_.experiment_name, metrics_path_, v, *src_tokenizer_, *tgt_tokenizer_);
}

int Trainer::run() {
  if (comm_.writes()) {
    metrics_path_ = (fs::path(config_.experiment_name) / "metrics.jsonl").string();
    make_folders_or_fail(config_.experiment_name);
    if (int64_t dropped = report::restart_metrics(metrics_path_, resumed_, position_.global_step))
      say(comm_, "%s: dropped %lld line%s that %s no complete record (a run killed while writing a line leaves it cut "
          "short)\n", metrics_path_.c_str(), static_cast<long long>(dropped), dropped == 1 ? "" : "s",
          dropped == 1 ? "is" : "are");
  }
  TrainingStep step(step_settings(config_, *train_set_), *model_, *optimizer_, *gradients_, comm_,
                    position_.accum_pending, metrics_path_);
  const TrainingStep::Status& status = step.status();
  int64_t epoch = 0, first_batch = 0;
  if (resumed_) {
    epoch = position_.epoch_complete() ? position_.epoch + 1 : position_.epoch;
    first_batch = position_.epoch_complete() ? 0 : position_.batch;
    if (epoch >= config_.num_epochs)
      say(comm_, "nothing to train: the checkpoint has %lld epochs, num_epochs is %lld\n",
          static_cast<long long>(epoch), static_cast<long long>(config_.num_epochs));
  }
  for (; epoch < config_.num_epochs; ++epoch, first_batch = 0) {
    model_->train();
    data::EpochBatches batches(*train_set_, epoch, first_batch);
    position_.epoch = epoch;
    position_.batches_in_epoch = batches.size();
    std::optional<report::Progress> progress;
    if (comm_.writes()) progress.emplace(epoch, config_.num_epochs, batches.size(), first_batch);
    step.start_epoch();
    int64_t epoch_tokens = 0;
    while (!batches.done()) {
      int64_t batches_left = batches.size() - batches.position();
      epoch_tokens += step.train_batch(*train_set_, batches.next_indices(), batches_left, position_);
      position_.global_step += status.updated;
      position_.accum_pending = step.pending();
      bool last = batches.done();
      position_.batch = batches.position();
      if (progress) progress->update(batches.position(), status.last_loss, optimizer_->lr(), epoch_tokens);
      if (status.diverged) {
        save_checkpoint(checkpoint_parts(), setup::CheckpointStore::epoch_tag(epoch), position_);
        fail(config_.source, ": training diverged: ", status.nonfinite_in_a_row,
             " optimizer steps in a row had a non-finite loss or gradient norm; the last good state is saved as ",
             store_.weights_path(setup::CheckpointStore::epoch_tag(epoch)),
             " (lower lr, set clip_grad_norm, or raise max_nonfinite_steps)");
      }
      // Stop only between optimizer steps, so no accumulated gradient is
      // lost, and on every rank at the same one.
      bool stop = status.stop_agreed && step.pending() == 0 && !last;
      if (stop || periodic_checkpoint_due(config_, position_, status.updated))
        save_checkpoint(checkpoint_parts(), setup::CheckpointStore::epoch_tag(epoch), position_);
      if (stop) {
        say(comm_, "\nstopped: saved epoch %02lld at batch %lld of %lld\n", static_cast<long long>(epoch),
            static_cast<long long>(position_.batch), static_cast<long long>(batches.size()));
        return 130;
      }
    }
    if (progress)
      progress->finish(static_cast<float>(status.epoch_loss_sum / std::max<int64_t>(1, batches.size() - first_batch)));
    end_of_epoch(epoch, status.nonfinite_total);
    // A stop asked on any rank at the epoch's last batch or since: the epoch is saved.
    std::vector<int64_t> stop{g_stop_requested ? 1 : 0};
    comm_.all_reduce_max(stop);
    if (stop[0] > 0) return 130;
  }
  if (gradients_->reducer())
    dist::report_data_parallel(comm_, *gradients_->reducer(),
                               {status.pairs, status.label_tokens, status.empty_shares, optimizer_->state_bytes(),
                                status.step_bytes_sent, status.step_elements_squared});
  return 0;
}

}  // namespace sf::train
