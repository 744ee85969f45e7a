#include "trainer.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include <sched.h>
#include <sys/resource.h>

#include "autograd/error.h"
#include "autograd/kernels/thread_pool.h"
#include "data/pipeline.h"
#include "train/metrics_log.h"
#include "train/progress.h"
#include "train/resources.h"

namespace sf::train {

namespace fs = std::filesystem;

static double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

static std::unique_ptr<optim::Optimizer> make_optimizer(const Config& c, const NamedTensors& params) {
  const OptimizerConfig& o = c.optimizer;
  if (o.name == "sgd")
    return std::make_unique<optim::Sgd>(params, c.lr, optim::SgdOptions{o.momentum, o.weight_decay, o.nesterov});
  return std::make_unique<optim::Adam>(
      params, c.lr, optim::AdamOptions{o.beta1, o.beta2, o.eps, o.weight_decay, o.name == "adamw"});
}

// threads 0: the cores this process may run on. That is the cores mpirun (or
// taskset) bound it to, if it is bound; else the machine's, shared out among
// the ranks on it.
static int default_threads(int ranks_on_this_machine) {
  int machine = static_cast<int>(std::thread::hardware_concurrency());
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed) == 0 && CPU_COUNT(&allowed) < machine)
    return CPU_COUNT(&allowed);
  return std::max(1, machine / ranks_on_this_machine);
}

Trainer::Trainer(Config config, Communicator* comm)
    : own_comm_(comm ? nullptr : single_process()),
      comm_(comm ? *comm : *own_comm_),
      config_(std::move(config)),
      accumulation_(config_.grad_accum),
      store_(config_.model_folder, config_.model_basename, config_.keep_checkpoints) {
  kernels::set_num_threads(config_.threads > 0 ? static_cast<int>(config_.threads)
                                                : default_threads(comm_.local_size()));
  check_outputs();
  prepare_data();
  build_model_and_optimizer();
  checkpoints_ = std::make_unique<RunCheckpoints>(config_, comm_, store_, *model_, *optimizer_, accumulation_, state_);
  resumed_ = checkpoints_->restore(train_set_->batches_per_epoch());
}

Trainer::~Trainer() = default;

// What the run needs, checked before any data is read or written: memory for
// the model, and every folder it writes to (rank 0's: no other rank writes).
void Trainer::check_outputs() {
  // The vocabularies are not known yet: without them, a lower bound.
  check_fits_in_memory(training_bytes(model_config(0, 0), config_.batch_size), "training this model", config_.source);
  if (comm_.rank() != 0) return;
  if (config_.preload && *config_.preload != "latest" && !fs::is_regular_file(*config_.preload))
    fail(config_.source, ": key 'preload': ", *config_.preload, ": no such file");
  check_writable_folder(config_.model_folder, config_.source, "model_folder");
  check_writable_folder(config_.experiment_name, config_.source, "experiment_name");
  for (const std::string& lang : {config_.lang_src, config_.lang_tgt}) {
    std::string folder = fs::path(config_.tokenizer_path(lang)).parent_path().string();
    check_writable_folder(folder.empty() ? "." : folder, config_.source, "tokenizer_file");
  }
  store_.remove_unfinished();
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
  const DataConfig& d = config_.data;
  data::CorpusOptions options{d.task, d.size, d.train, d.valid, d.format, config_.lang_src,
                              config_.lang_tgt, config_.val_fraction, static_cast<uint64_t>(config_.seed)};
  data::Corpus corpus = data::load_corpus(options);
  say(comm_, "data: %zu training pairs, %zu validation pairs", corpus.train.size(), corpus.valid.size());
  if (corpus.blank_lines > 0) say(comm_, " (%lld blank lines skipped)", static_cast<long long>(corpus.blank_lines));
  say(comm_, "\n");
  if (corpus.train.empty())
    fail(d.is_task() ? config_.source : d.train, ": no training pairs");
  if (!d.valid.empty() && corpus.valid.empty()) fail(d.valid, ": no validation pairs");

  auto tokenizer = [&](const std::string& lang, data::Side side) {
    std::string path = config_.tokenizer_path(lang);
    data::TokenizerFile file =
        data::load_or_build_tokenizer(path, corpus.train, side, config_.min_frequency, /*save=*/comm_.rank() == 0);
    say(comm_, "tokenizer %s: %s %s (%lld tokens)\n", lang.c_str(),
        file.loaded ? "loaded from" : "built and saved to", path.c_str(),
        static_cast<long long>(file.tokenizer.vocab_size()));
    return std::make_unique<data::Tokenizer>(std::move(file.tokenizer));
  };
  src_tokenizer_ = tokenizer(config_.lang_src, data::Side::Source);
  tgt_tokenizer_ = tokenizer(config_.lang_tgt, data::Side::Target);

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
  if (comm_.size() > 1) {
    Digest setup;
    setup.add(config_.canonical);
    check_same_on_every_rank(setup.value(), "settings (config file and --set)", config_.source, comm_);
    check_same_on_every_rank(data_digest(train, valid, *src_tokenizer_, *tgt_tokenizer_),
                             "data (pairs or tokenizers)", config_.source, comm_);
  }
  data::BatchOptions batching{config_.batch_size, config_.seq_len, config_.bucket, true,
                              static_cast<uint64_t>(config_.seed)};
  train_set_ = std::make_unique<data::BatchedDataset>(std::move(train), batching);
  batching.shuffle = false;
  valid_set_ = std::make_unique<data::BatchedDataset>(std::move(valid), batching);
}

nn::TransformerConfig Trainer::model_config(int64_t src_vocab_size, int64_t tgt_vocab_size) const {
  nn::TransformerConfig mc;
  mc.src_vocab_size = src_vocab_size;
  mc.tgt_vocab_size = tgt_vocab_size;
  mc.src_seq_len = mc.tgt_seq_len = config_.seq_len;
  mc.d_model = config_.d_model;
  mc.N = config_.N;
  mc.h = config_.h;
  mc.d_ff = config_.d_ff;
  mc.dropout = config_.dropout;
  return mc;
}

void Trainer::build_model_and_optimizer() {
  nn::TransformerConfig mc = model_config(src_tokenizer_->vocab_size(), tgt_tokenizer_->vocab_size());
  check_fits_in_memory(training_bytes(mc, config_.batch_size), "training this model", config_.source);
  Rng init(static_cast<uint64_t>(config_.seed));
  model_ = nn::build_transformer(mc, init);
  Device& device = device_named(config_.device);
  model_->to(device);
  Rng& dropout = model_->dropout_rng();
  dropout.set_state(rank_dropout_state(dropout.state(), comm_.rank()));
  say(comm_, "model: %lld parameters on %s\n", static_cast<long long>(model_->num_parameters()),
      device.description().c_str());
  optimizer_ = make_optimizer(config_, model_->named_parameters());
  if (comm_.size() > 1) {
    if (config_.zero) optimizer_->shard(zero_shards(optimizer_->params(), comm_.rank(), comm_.size()));
    const char* overlap = std::getenv("SCRATCHFORMER_DDP_OVERLAP");
    reducer_ = std::make_unique<GradientReducer>(optimizer_->params(), comm_,
                                                 !(overlap && std::string(overlap) == "0"));
    say(comm_,
        "data parallel: %d ranks, %lld threads each; gradients all-reduced in %zu buckets (%.1f MB per step)%s\n",
        comm_.size(), static_cast<long long>(kernels::num_threads()), reducer_->buckets(),
        reducer_->bytes_per_step() / 1e6, config_.zero ? "; optimizer state sharded (zero 1)" : "");
  }
}

ValidationResult Trainer::validate() { return train::validate(*model_, *valid_set_, config_, *tgt_tokenizer_); }

void Trainer::end_of_epoch(int64_t epoch, const TrainingStep& step) {
  ValidationResult v = validate();
  bool validated = !v.predictions.empty();
  if (validated) {
    print_validation(comm_, epoch, v, config_);
    if (!metrics_path_.empty())
      append_metrics(metrics_path_, ValidRecord{epoch, state_.global_step, v.loss, v.scores});
  }
  // The checkpoint first: whatever fails after it, the epoch's work is kept.
  checkpoints_->save_epoch(epoch, validated ? &v.scores : nullptr);
  if (int64_t skipped = step.status().nonfinite_total; skipped > 0)
    say(comm_, "epoch %02lld: %lld updates skipped so far for a non-finite loss or gradient norm\n",
        static_cast<long long>(epoch), static_cast<long long>(skipped));
  if (validated && !metrics_path_.empty())
    write_validation_report(v, config_, metrics_path_, *src_tokenizer_, *tgt_tokenizer_);
}

int Trainer::run() {
  if (comm_.rank() == 0) {
    metrics_path_ = (fs::path(config_.experiment_name) / "metrics.jsonl").string();
    fs::create_directories(config_.experiment_name);
    restart_metrics(metrics_path_, resumed_, state_.global_step);
  }
  TrainingStep step(config_, comm_, *model_, *optimizer_, reducer_.get(), accumulation_, state_, metrics_path_,
                    train_set_->batches_per_epoch());
  const TrainingStep::Status& status = step.status();
  int64_t epoch = 0, first_batch = 0;
  if (resumed_) {
    epoch = state_.epoch_complete() ? state_.epoch + 1 : state_.epoch;
    first_batch = state_.epoch_complete() ? 0 : state_.batch;
    if (epoch >= config_.num_epochs)
      say(comm_, "nothing to train: the checkpoint has %lld epochs, num_epochs is %lld\n",
          static_cast<long long>(state_.epoch_complete() ? state_.epoch + 1 : state_.epoch),
          static_cast<long long>(config_.num_epochs));
  }
  for (; epoch < config_.num_epochs; ++epoch, first_batch = 0) {
    model_->train();
    data::EpochBatches batches(*train_set_, epoch, first_batch);
    state_.epoch = epoch;
    state_.batches_in_epoch = batches.size();
    std::optional<Progress> progress;
    if (comm_.rank() == 0) progress.emplace(epoch, config_.num_epochs, batches.size(), first_batch);
    auto epoch_start = std::chrono::steady_clock::now();
    step.start_epoch();
    int64_t epoch_tokens = 0;
    while (!batches.done()) {
      int64_t batches_left = batches.size() - batches.position();
      epoch_tokens += step.train_batch(*train_set_, batches.next_indices(), batches_left);
      bool last = batches.done();
      state_.batch = batches.position();
      if (progress)
        progress->update(batches.position(), status.last_loss, optimizer_->lr(),
                         epoch_tokens / std::max(seconds_since(epoch_start), 1e-9));
      if (status.diverged) {
        checkpoints_->save(CheckpointStore::epoch_tag(epoch));
        fail(config_.source, ": training diverged: ", status.nonfinite_in_a_row,
             " optimizer steps in a row had a non-finite loss or gradient norm; the last good state is saved as ",
             store_.weights_path(CheckpointStore::epoch_tag(epoch)),
             " (lower lr, set clip_grad_norm, or raise max_nonfinite_steps)");
      }
      // Stop only between optimizer steps, so no accumulated gradient is
      // lost, and on every rank at the same one.
      if (status.stop_agreed && accumulation_.pending() == 0 && !last) {
        checkpoints_->save(CheckpointStore::epoch_tag(epoch));
        say(comm_, "\nstopped: saved epoch %02lld at batch %lld of %lld\n", static_cast<long long>(epoch),
            static_cast<long long>(state_.batch), static_cast<long long>(batches.size()));
        return 130;
      }
    }
    if (progress)
      progress->finish(static_cast<float>(status.epoch_loss_sum / std::max<int64_t>(1, batches.size() - first_batch)));
    end_of_epoch(epoch, step);
    if (stop_requested_anywhere(comm_)) return 130;
  }
  if (reducer_) report_data_parallel();
  return 0;
}

// What data parallelism cost this run: the communication backward did not
// hide, and each rank's memory (ZeRO-1 shrinks the optimizer state's share).
void Trainer::report_data_parallel() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  std::vector<int64_t> mine{usage.ru_maxrss * 1024, optimizer_->state_bytes()};
  std::vector<int64_t> all(2 * static_cast<size_t>(comm_.size()));
  comm_.all_gather(std::as_bytes(std::span(mine)), std::as_writable_bytes(std::span(all)));
  std::string rss, state;
  auto mib = [](int64_t bytes) {
    char text[32];
    std::snprintf(text, sizeof text, "%.1f", bytes / 1048576.0);
    return std::string(text);
  };
  for (int r = 0; r < comm_.size(); ++r) {
    const char* separator = r > 0 ? ", " : "";
    rss.append(separator).append(mib(all[2 * r]));
    state.append(separator).append(mib(all[2 * r + 1]));
  }
  say(comm_, "data parallel: %.2f ms per step waiting for gradient all-reduces after backward (overlap %s); "
      "per rank: peak RSS %s MiB, optimizer state %s MiB\n",
      1e3 * reducer_->exposed_seconds_per_step(), reducer_->overlapping() ? "on" : "off", rss.c_str(), state.c_str());
}

}  // namespace sf::train
