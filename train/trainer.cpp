#include "trainer.h"

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include <sys/resource.h>

#include "autograd/kernels/thread_pool.h"
#include "base/digest.h"
#include "base/error.h"
#include "data/pipeline.h"
#include "train/metrics_log.h"
#include "train/progress.h"
#include "train/resources.h"
#include "train/run_checkpoints.h"
#include "train/training_step.h"

namespace sf::train {

namespace fs = std::filesystem;

std::atomic<bool> g_stop_requested{false};

static void request_stop(int) {
  g_stop_requested = true;
  // A second signal, of either kind (Ctrl-C, then kill), ends the process at once.
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
}

void install_stop_handlers() {
  std::signal(SIGINT, request_stop);
  std::signal(SIGTERM, request_stop);
}

static std::unique_ptr<optim::Optimizer> make_optimizer(const Config& c, const NamedTensors& params) {
  const OptimizerConfig& o = c.optimizer;
  if (o.name == "sgd")
    return std::make_unique<optim::Sgd>(params, c.lr, optim::SgdOptions{o.momentum, o.weight_decay, o.nesterov});
  return std::make_unique<optim::Adam>(
      params, c.lr, optim::AdamOptions{o.beta1, o.beta2, o.eps, o.weight_decay, o.name == "adamw"});
}

Run::Run(Config c, Communicator* given)
    : own_comm(given ? nullptr : single_process()), comm(given ? *given : *own_comm), config(std::move(c)),
      accumulation(config.grad_accum), store(config.model_folder, config.model_basename, config.keep_checkpoints) {}

Trainer::Trainer(Config c, Communicator* given) : Run(std::move(c), given) {
  kernels::set_num_threads(threads_to_use(config.threads, comm.local_size(), comm.size() > 1));
  check_outputs();
  prepare_data();
  build_model_and_optimizer();
  resumed_ = restore_checkpoint(*this);
}

// What the run needs, checked before any data is read or written: memory for
// the model, and every folder it writes to (rank 0's: no other rank writes).
void Trainer::check_outputs() {
  // The vocabularies are not known yet: without them, a lower bound.
  check_fits_in_memory(training_bytes(model_config(0, 0), config.batch_size), "training this model", config.source);
  if (comm.rank() != 0) return;
  if (config.preload && *config.preload != "latest" && !fs::is_regular_file(*config.preload))
    fail(config.source, ": key 'preload': ", *config.preload, ": no such file");
  check_writable_folder(config.model_folder, config.source, "model_folder");
  check_writable_folder(config.experiment_name, config.source, "experiment_name");
  for (const std::string& lang : {config.lang_src, config.lang_tgt}) {
    std::string folder = fs::path(config.tokenizer_path(lang)).parent_path().string();
    check_writable_folder(folder.empty() ? "." : folder, config.source, "tokenizer_file");
  }
  store.remove_unfinished();
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
  const DataConfig& d = config.data;
  data::CorpusOptions options{d.task, d.size, d.train, d.valid, d.format, config.lang_src,
                              config.lang_tgt, config.val_fraction, static_cast<uint64_t>(config.seed)};
  data::Corpus corpus = data::load_corpus(options);
  say(comm, "data: %zu training pairs, %zu validation pairs", corpus.train.size(), corpus.valid.size());
  if (corpus.blank_lines > 0) say(comm, " (%lld blank lines skipped)", static_cast<long long>(corpus.blank_lines));
  say(comm, "\n");
  if (corpus.train.empty())
    fail(d.is_task() ? config.source : d.train, ": no training pairs");
  if (!d.valid.empty() && corpus.valid.empty()) fail(d.valid, ": no validation pairs");

  auto tokenizer = [&](const std::string& lang, data::Side side) {
    std::string path = config.tokenizer_path(lang);
    data::TokenizerFile file =
        data::load_or_build_tokenizer(path, corpus.train, side, config.min_frequency, /*save=*/comm.rank() == 0);
    say(comm, "tokenizer %s: %s %s (%lld tokens)\n", lang.c_str(),
        file.loaded ? "loaded from" : "built and saved to", path.c_str(),
        static_cast<long long>(file.tokenizer.vocab_size()));
    return std::make_unique<data::Tokenizer>(std::move(file.tokenizer));
  };
  src_tokenizer = tokenizer(config.lang_src, data::Side::Source);
  tgt_tokenizer = tokenizer(config.lang_tgt, data::Side::Target);

  std::vector<data::Example> train = data::encode_pairs(corpus.train, *src_tokenizer, *tgt_tokenizer);
  std::vector<data::Example> valid = data::encode_pairs(corpus.valid, *src_tokenizer, *tgt_tokenizer);
  if (config.max_len_filter) {
    int64_t dropped = data::drop_long_examples(train, config.seq_len) +
                      data::drop_long_examples(valid, config.seq_len);
    if (dropped > 0)
      say(comm, "data: dropped %lld pairs longer than seq_len - 2 = %lld tokens\n",
          static_cast<long long>(dropped), static_cast<long long>(data::longest_source(config.seq_len)));
    if (train.empty()) fail(config.source, ": every training pair is longer than seq_len - 2 tokens");
  }
  if (comm.size() > 1) {
    Digest setup;
    setup.add(config.canonical);
    check_same_on_every_rank(setup.value(), "settings (config file and --set)", config.source, comm);
    check_same_on_every_rank(data_digest(train, valid, *src_tokenizer, *tgt_tokenizer),
                             "data (pairs or tokenizers)", config.source, comm);
  }
  data::BatchOptions batching{config.batch_size, config.seq_len, config.bucket, true,
                              static_cast<uint64_t>(config.seed)};
  train_set = std::make_unique<data::BatchedDataset>(std::move(train), batching);
  batching.shuffle = false;
  valid_set = std::make_unique<data::BatchedDataset>(std::move(valid), batching);
}

nn::TransformerConfig Trainer::model_config(int64_t src_vocab_size, int64_t tgt_vocab_size) const {
  return {.src_vocab_size = src_vocab_size, .tgt_vocab_size = tgt_vocab_size, .src_seq_len = config.seq_len,
          .tgt_seq_len = config.seq_len, .d_model = config.d_model, .N = config.N, .h = config.h, .d_ff = config.d_ff,
          .dropout = config.dropout, .activation = *nn::activation_named(config.activation)};
}

void Trainer::build_model_and_optimizer() {
  nn::TransformerConfig mc = model_config(src_tokenizer->vocab_size(), tgt_tokenizer->vocab_size());
  check_fits_in_memory(training_bytes(mc, config.batch_size), "training this model", config.source);
  Rng init(static_cast<uint64_t>(config.seed));
  model = nn::build_transformer(mc, init);
  Device& device = device_named(config.device);
  model->to(device);
  Rng& dropout = model->dropout_rng();
  dropout.set_state(rank_dropout_state(dropout.state(), comm.rank()));
  // The threads are the CPU's: they run the kernels there, and the host's work
  // (data, decoding's bookkeeping) beside an OpenCL device.
  say(comm, "model: %lld parameters on %s, %d CPU threads\n", static_cast<long long>(model->num_parameters()),
      device.description().c_str(), kernels::num_threads());
  if (std::string note = config.precision_note(); !note.empty()) say(comm, "%s\n", note.c_str());
  optimizer = make_optimizer(config, model->named_parameters());
  if (comm.size() > 1) {
    // ZeRO-1 shards the optimizer at the first step (GradientReducer).
    reducer = std::make_unique<GradientReducer>(optimizer->params(), comm, static_cast<size_t>(config.bucket_mb * 1048576.0),
                                                 config.overlap_grad_reduce, config.zero);
    say(comm,
        "data parallel: %d ranks, %lld threads each; gradients all-reduced in %zu buckets (%.1f MB per step)%s\n",
        comm.size(), static_cast<long long>(kernels::num_threads()), reducer->buckets(),
        reducer->bytes_per_step() / 1e6, config.zero ? "; optimizer state sharded (zero 1)" : "");
  }
}

void Trainer::end_of_epoch(int64_t epoch, int64_t skipped_updates) {
  // Validation decodes the whole validation set, prints samples and writes a
  // record: whatever fails there, the epoch's training is saved first (no
  // validation scores, so the best checkpoint stays as it was), then the run
  // ends with the failure, in one line that says what was kept.
  ValidationResult v;
  try {
    v = validate();
    if (!v.predictions.empty()) {
      print_validation(*this, epoch, v);
      if (!metrics_path.empty())
        append_metrics(metrics_path, ValidRecord{epoch, state.global_step, v.loss, v.scores});
    }
  } catch (const std::exception& e) {
    std::string tag = CheckpointStore::epoch_tag(epoch);
    save_epoch_checkpoint(*this, epoch, nullptr);
    rethrow_as(e, "validation after epoch ", tag, " failed (the epoch is saved as ", store.weights_path(tag),
               "; preload latest resumes after it): ", plain_message(e));
  }
  bool validated = !v.predictions.empty();
  // The checkpoint before the report: whatever fails there, the epoch's work is kept.
  save_epoch_checkpoint(*this, epoch, validated ? &v.scores : nullptr);
  if (skipped_updates > 0)
    say(comm, "epoch %02lld: %lld updates skipped so far for a non-finite loss or gradient norm\n",
        static_cast<long long>(epoch), static_cast<long long>(skipped_updates));
  if (validated && !metrics_path.empty()) write_validation_report(*this, v);
}

int Trainer::run() {
  if (comm.rank() == 0) {
    metrics_path = (fs::path(config.experiment_name) / "metrics.jsonl").string();
    fs::create_directories(config.experiment_name);
    if (int64_t dropped = restart_metrics(metrics_path, resumed_, state.global_step))
      say(comm, "%s: dropped %lld line%s that %s no complete record (a run killed while writing a line leaves it cut "
          "short)\n", metrics_path.c_str(), static_cast<long long>(dropped), dropped == 1 ? "" : "s",
          dropped == 1 ? "is" : "are");
  }
  TrainingStep step(*this);
  const TrainingStep::Status& status = step.status();
  int64_t epoch = 0, first_batch = 0;
  if (resumed_) {
    epoch = state.epoch_complete() ? state.epoch + 1 : state.epoch;
    first_batch = state.epoch_complete() ? 0 : state.batch;
    if (epoch >= config.num_epochs)
      say(comm, "nothing to train: the checkpoint has %lld epochs, num_epochs is %lld\n",
          static_cast<long long>(epoch), static_cast<long long>(config.num_epochs));
  }
  for (; epoch < config.num_epochs; ++epoch, first_batch = 0) {
    model->train();
    data::EpochBatches batches(*train_set, epoch, first_batch);
    state.epoch = epoch;
    state.batches_in_epoch = batches.size();
    std::optional<Progress> progress;
    if (comm.rank() == 0) progress.emplace(epoch, config.num_epochs, batches.size(), first_batch);
    step.start_epoch();
    int64_t epoch_tokens = 0;
    while (!batches.done()) {
      int64_t batches_left = batches.size() - batches.position();
      epoch_tokens += step.train_batch(batches.next_indices(), batches_left);
      bool last = batches.done();
      state.batch = batches.position();
      if (progress) progress->update(batches.position(), status.last_loss, optimizer->lr(), epoch_tokens);
      if (status.diverged) {
        save_checkpoint(*this, CheckpointStore::epoch_tag(epoch));
        fail(config.source, ": training diverged: ", status.nonfinite_in_a_row,
             " optimizer steps in a row had a non-finite loss or gradient norm; the last good state is saved as ",
             store.weights_path(CheckpointStore::epoch_tag(epoch)),
             " (lower lr, set clip_grad_norm, or raise max_nonfinite_steps)");
      }
      // Stop only between optimizer steps, so no accumulated gradient is
      // lost, and on every rank at the same one.
      if (status.stop_agreed && accumulation.pending() == 0 && !last) {
        save_checkpoint(*this, CheckpointStore::epoch_tag(epoch));
        say(comm, "\nstopped: saved epoch %02lld at batch %lld of %lld\n", static_cast<long long>(epoch),
            static_cast<long long>(state.batch), static_cast<long long>(batches.size()));
        return 130;
      }
    }
    if (progress)
      progress->finish(static_cast<float>(status.epoch_loss_sum / std::max<int64_t>(1, batches.size() - first_batch)));
    end_of_epoch(epoch, status.nonfinite_total);
    // A stop asked on any rank at the epoch's last batch or since: the epoch is saved.
    std::vector<int64_t> stop{g_stop_requested ? 1 : 0};
    comm.all_reduce_max(stop);
    if (stop[0] > 0) return 130;
  }
  if (reducer) report_data_parallel(status);
  return 0;
}

// What data parallelism cost this run: the communication backward did not
// hide, and each rank's memory (ZeRO-1 shrinks the optimizer state's share);
// and what each rank trained on, whose sums are the whole batches'.
void Trainer::report_data_parallel(const TrainingStep::Status& trained) {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const std::vector<int64_t> mine{trained.pairs,           trained.label_tokens,     trained.empty_shares,
                                  usage.ru_maxrss * 1024,  optimizer->state_bytes(), trained.step_bytes_sent};
  std::vector<int64_t> all(mine.size() * static_cast<size_t>(comm.size()));
  comm.all_gather(std::as_bytes(std::span(mine)), std::as_writable_bytes(std::span(all)));
  // Figure k of every rank, comma-separated.
  auto per_rank = [&](size_t k, bool mib) {
    std::string text;
    for (int r = 0; r < comm.size(); ++r) {
      char figure[32];
      int64_t value = all[r * mine.size() + k];
      if (mib)
        std::snprintf(figure, sizeof figure, "%.1f", value / 1048576.0);
      else
        std::snprintf(figure, sizeof figure, "%lld", static_cast<long long>(value));
      text.append(r > 0 ? ", " : "").append(figure);
    }
    return text;
  };
  say(comm, "data parallel: %.2f ms per step waiting for gradient all-reduces after backward (overlap %s); "
      "per rank: pairs %s, label tokens %s, empty shares %s, peak RSS %s MiB, optimizer state %s MiB, "
      "sent in the last step %s bytes\n",
      1e3 * reducer->exposed_seconds_per_step(), reducer->overlapping() ? "on" : "off", per_rank(0, false).c_str(),
      per_rank(1, false).c_str(), per_rank(2, false).c_str(), per_rank(3, true).c_str(), per_rank(4, true).c_str(),
      per_rank(5, false).c_str());
}

}  // namespace sf::train
