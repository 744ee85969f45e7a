#include "trainer.h"

#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

#include <sched.h>
#include <sys/resource.h>

#include "autograd/atomic_file.h"
#include "autograd/engine.h"
#include "autograd/error.h"
#include "autograd/kernels/thread_pool.h"
#include "data/pipeline.h"
#include "nn/checkpoint.h"
#include "optim/clip.h"
#include "train/loss.h"
#include "train/progress.h"
#include "train/report.h"
#include "train/resources.h"

namespace sf::train {

namespace fs = std::filesystem;

// Validation sentences whose attention the report draws, the first ones.
constexpr size_t kHeatmapSentences = 2;
using nlohmann::json;

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
  restore();
}

template <class... Args>
void Trainer::say(const char* format, Args... args) const {
  if (comm_.rank() == 0) std::fprintf(stderr, format, args...);
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
  say("data: %zu training pairs, %zu validation pairs", corpus.train.size(), corpus.valid.size());
  if (corpus.blank_lines > 0) say(" (%lld blank lines skipped)", static_cast<long long>(corpus.blank_lines));
  say("\n");
  if (corpus.train.empty())
    fail(d.is_task() ? config_.source : d.train, ": no training pairs");
  if (!d.valid.empty() && corpus.valid.empty()) fail(d.valid, ": no validation pairs");

  auto tokenizer = [&](const std::string& lang, data::Side side) {
    std::string path = config_.tokenizer_path(lang);
    data::TokenizerFile file =
        data::load_or_build_tokenizer(path, corpus.train, side, config_.min_frequency, /*save=*/comm_.rank() == 0);
    say("tokenizer %s: %s %s (%lld tokens)\n", lang.c_str(), file.loaded ? "loaded from" : "built and saved to",
        path.c_str(), static_cast<long long>(file.tokenizer.vocab_size()));
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
      say("data: dropped %lld pairs longer than seq_len - 2 = %lld tokens\n", static_cast<long long>(dropped),
          static_cast<long long>(data::longest_source(config_.seq_len)));
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

// Rank r > 0 draws its dropout masks from a stream of its own (seeded from
// rank 0's and r), so that the ranks' shares of a batch are not dropped alike.
static Rng::State rank_dropout_state(const Rng::State& rank0, int rank) {
  if (rank == 0) return rank0;
  return Rng(rank0[0] ^ (0x9E3779B97F4A7C15ULL * static_cast<uint64_t>(rank))).state();
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
  say("model: %lld parameters on %s\n", static_cast<long long>(model_->num_parameters()),
      device.description().c_str());
  optimizer_ = make_optimizer(config_, model_->named_parameters());
  if (comm_.size() > 1) {
    if (config_.zero) optimizer_->shard(zero_shards(optimizer_->params(), comm_.rank(), comm_.size()));
    const char* overlap = std::getenv("SCRATCHFORMER_DDP_OVERLAP");
    reducer_ = std::make_unique<GradientReducer>(optimizer_->params(), comm_,
                                                 !(overlap && std::string(overlap) == "0"));
    say("data parallel: %d ranks, %lld threads each; gradients all-reduced in %zu buckets (%.1f MB per step)%s\n",
        comm_.size(), static_cast<long long>(kernels::num_threads()), reducer_->buckets(),
        reducer_->bytes_per_step() / 1e6, config_.zero ? "; optimizer state sharded (zero 1)" : "");
  }

  int64_t steps_per_epoch = (train_set_->batches_per_epoch() + config_.grad_accum - 1) / config_.grad_accum;
  schedule_ = {optim::parse_schedule(config_.schedule), config_.lr, config_.warmup_steps,
               std::max<int64_t>(1, steps_per_epoch * config_.num_epochs), config_.d_model};
}

// Rank 0 reads the checkpoint (only its machine need have the files) and
// every rank receives what it read: the weights (also when starting fresh, so
// that every replica starts equal), the optimizer state and the position.
void Trainer::restore() {
  std::optional<optim::OptimizerState> loaded;
  if (comm_.rank() == 0) loaded = restore_on_rank_0();
  if (comm_.size() == 1) return;
  broadcast_tensors(optimizer_->params(), comm_);
  json header = {{"resumed", resumed_}, {"state", state_.to_json()}};
  header = json::parse(broadcast_string(header.dump(), comm_));
  if (!header["resumed"].get<bool>()) return;
  const std::string origin = "rank 0's checkpoint";
  optim::OptimizerState state = broadcast_optimizer_state(loaded.value_or(optim::OptimizerState{}), comm_);
  if (comm_.rank() == 0) return;
  optimizer_->load_state_dict(state, origin);
  state_ = TrainingState::from_json(header["state"], origin);
  accumulation_.set_pending(state_.accum_pending);
  resumed_ = true;
  // A run resumed by more ranks than saved it starts the new ranks' streams afresh.
  size_t saved = static_cast<size_t>(comm_.rank() - 1);
  model_->dropout_rng().set_state(saved < state_.rank_dropout_rngs.size()
                                      ? state_.rank_dropout_rngs[saved]
                                      : rank_dropout_state(state_.dropout_rng, comm_.rank()));
}

// Loads the weights, optimizer state and position of the checkpoint `preload`
// names into this process; returns the optimizer state it read, if any.
std::optional<optim::OptimizerState> Trainer::restore_on_rank_0() {
  if (!config_.preload) return std::nullopt;
  CheckpointFiles files;
  if (*config_.preload == "latest") {
    std::optional<CheckpointFiles> latest = store_.latest();
    if (!latest) {
      // Starting fresh would write over them: say so instead.
      if (std::optional<std::string> stray = store_.any_checkpoint_file())
        fail(config_.source, ": key 'preload': no complete checkpoint in ", config_.model_folder, ", but ", *stray,
             " is there (its optimizer or state file is missing or from another save); move it away to start "
             "fresh, or set preload to it to start from its weights");
      say("preload latest: no checkpoint in %s yet, starting fresh\n", config_.model_folder.c_str());
      return std::nullopt;
    }
    files = *latest;
  } else {
    if (!fs::is_regular_file(*config_.preload))
      fail(config_.source, ": key 'preload': ", *config_.preload, ": no such file");
    files = CheckpointFiles::beside(*config_.preload);
  }
  nn::load_checkpoint(*model_, files.weights);
  if (!fs::exists(files.optimizer) && !fs::exists(files.state)) {
    if (store_.is_checkpoint_name(files.weights))
      fail(config_.source, ": key 'preload': ", files.weights, " would be overwritten by this run's "
           "checkpoints (it starts again at epoch 00); copy it out of model_folder first");
    say("preload: weights from %s; no optimizer/state beside them, so a fresh optimizer at epoch 0\n",
        files.weights.c_str());
    return std::nullopt;
  }
  for (const std::string* file : {&files.optimizer, &files.state})
    if (!fs::exists(*file)) fail(*file, ": missing, so the checkpoint is incomplete");
  optim::OptimizerState optimizer_state = optimizer_->read_state(files.optimizer);
  optimizer_->load_state_dict(optimizer_state, files.optimizer);
  state_ = files.load_state();
  if (optimizer_->steps() != state_.global_step)
    fail(files.optimizer, ": ", optimizer_->steps(), " steps, but ", files.state, " says ", state_.global_step);
  if (state_.accum_pending >= config_.grad_accum)
    fail(files.state, ": ", state_.accum_pending, " batches pending, but grad_accum is ", config_.grad_accum);
  // Each file is sound on its own; now check that all three are from one save.
  if (std::string problem = files.problem(); !problem.empty()) fail(problem);
  if (state_.batch < state_.batches_in_epoch && state_.batches_in_epoch != train_set_->batches_per_epoch())
    fail(files.state, ": an epoch of ", state_.batches_in_epoch, " batches, but this data and batch_size make ",
         train_set_->batches_per_epoch(), " (resume with the config the run was started with)");
  model_->dropout_rng().set_state(state_.dropout_rng);
  accumulation_.set_pending(state_.accum_pending);
  resumed_ = true;
  say("preload: resumed from %s (epoch %02lld, batch %lld of %lld, step %lld)\n", files.weights.c_str(),
      static_cast<long long>(state_.epoch), static_cast<long long>(state_.batch),
      static_cast<long long>(state_.batches_in_epoch), static_cast<long long>(state_.global_step));
  return optimizer_state;
}

int64_t Trainer::train_batch(const std::vector<size_t>& batch, int64_t batches_left) {
  std::vector<size_t> mine = rank_share(batch, comm_.rank(), comm_.size());
  std::optional<data::Batch> b;
  if (!mine.empty()) b = train_set_->make_batch(mine);
  // The whole batch's label tokens, and whether a stop was asked anywhere:
  // the one exchange before the forward pass.
  std::vector<int64_t> exchange{b ? b->label_tokens : 0, g_stop_requested ? 1 : 0};
  comm_.all_reduce_sum(exchange);
  const int64_t batch_tokens = exchange[0];
  stop_agreed_ = exchange[1] > 0;
  bool step_due = accumulation_.step_due(/*last_batch_of_epoch=*/batches_left == 1);
  if (b) {
    Tensor memory = model_->encode(b->encoder_input, b->encoder_mask);
    Tensor features = model_->decode(memory, b->encoder_mask, b->decoder_input, b->decoder_mask);
    Tensor loss = translation_loss(*model_, features, b->label, config_.label_smoothing);
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

void Trainer::optimizer_step() {
  if (reducer_) {
    reducer_->finish();
    std::vector<double> loss{pending_loss_};
    comm_.all_reduce_sum(loss);
    pending_loss_ = loss[0];
  }
  // Every rank holds the same summed gradients, so the same norm and the same decisions.
  float norm = config_.clip_grad_norm ? optim::clip_grad_norm(optimizer_->params(), *config_.clip_grad_norm)
                                      : optim::grad_norm(optimizer_->params());
  float mean_loss = static_cast<float>(pending_loss_ / pending_batches_);
  if (std::isfinite(mean_loss) && std::isfinite(norm)) {
    nonfinite_in_a_row_ = 0;
    state_.global_step += 1;
    float lr = optim::learning_rate(schedule_, state_.global_step);
    optimizer_->set_lr(lr);
    optimizer_->step();
    if (optimizer_->sharded()) all_gather_parameters(*optimizer_, comm_);
    double seconds = seconds_since(last_step_);
    log_step(mean_loss, lr, norm, seconds > 0 ? pending_tokens_ / seconds : 0.0);
  } else {
    skip_nonfinite_step(mean_loss, norm);
  }
  optimizer_->zero_grad();
  last_step_ = std::chrono::steady_clock::now();
  last_loss_ = mean_loss;
  epoch_loss_sum_ += pending_loss_;
  pending_loss_ = 0;
  pending_batches_ = pending_tokens_ = 0;
}

bool Trainer::stop_requested_anywhere() {
  std::vector<int64_t> stop{g_stop_requested ? 1 : 0};
  comm_.all_reduce_max(stop);
  return stop[0] > 0;
}

// Divergence policy: an update from a NaN or infinite loss or gradient would
// poison every weight, so it is skipped (weights and optimizer state stay as
// they were; the schedule does not advance). The first skip is reported with
// its step; after max_nonfinite_steps skips in a row the run saves its last
// good state and stops.
void Trainer::skip_nonfinite_step(float loss, float grad_norm) {
  ++nonfinite_in_a_row_;
  ++nonfinite_total_;
  int64_t step = state_.global_step + 1;
  if (nonfinite_total_ == 1)
    say("\nstep %lld: loss %g, gradient norm %g: not finite, update skipped (further skips are counted at the end "
        "of each epoch)\n", static_cast<long long>(step), loss, grad_norm);
  if (config_.max_nonfinite_steps > 0 && nonfinite_in_a_row_ >= config_.max_nonfinite_steps)
    diverged_ = true;
}

void Trainer::log_step(float loss, float lr, float grad_norm, double tokens_per_second) {
  nlohmann::ordered_json record = {{"kind", "step"},       {"epoch", state_.epoch}, {"step", state_.global_step},
                 {"loss", loss},         {"lr", lr},              {"grad_norm", grad_norm},
                 {"tokens_per_s", tokens_per_second}, {"time", seconds_since(start_)}};
  append_metrics(record.dump());
}

// One line at the end of metrics.jsonl. A line is written with one call, so a
// killed run leaves at most a last line cut short, which readers skip.
void Trainer::append_metrics(const std::string& line) {
  if (comm_.rank() != 0) return;
  std::ofstream out(metrics_path_, std::ios::app);
  out << line << "\n";
  out.flush();
  if (!out) fail(metrics_path_, ": cannot write (disk full?)");
}

// Collective: every rank hands rank 0 what only it holds (its dropout
// stream, its share of a sharded optimizer state); rank 0 writes the files.
void Trainer::save(const std::string& tag) {
  std::vector<Rng::State> streams(static_cast<size_t>(comm_.size()));
  Rng::State mine = model_->dropout_rng().state();
  comm_.all_gather(std::as_bytes(std::span<const Rng::State>(&mine, 1)), std::as_writable_bytes(std::span(streams)));
  state_.dropout_rng = streams[0];
  state_.rank_dropout_rngs.assign(streams.begin() + 1, streams.end());
  state_.accum_pending = accumulation_.pending();
  optim::OptimizerState optimizer_state =
      optimizer_->sharded() ? gather_optimizer_state(*optimizer_, comm_) : optimizer_->state_dict();
  if (comm_.rank() == 0) store_.save(tag, *model_, optimizer_state, state_);
}

ValidationResult Trainer::validate() {
  ValidationResult result;
  const auto& examples = valid_set_->examples();
  if (examples.empty()) return result;
  model_->eval();
  {
    NoGradGuard no_grad;
    double total = 0;
    int64_t count = 0;
    for (data::EpochBatches batches(*valid_set_, 0); !batches.done();) {
      data::Batch b = batches.next();
      Tensor memory = model_->encode(b.encoder_input, b.encoder_mask);
      Tensor features = model_->decode(memory, b.encoder_mask, b.decoder_input, b.decoder_mask);
      total += translation_loss(*model_, features, b.label, config_.label_smoothing).item() * b.label_tokens;
      count += b.label_tokens;
    }
    result.loss = count > 0 ? total / count : 0.0;
    // The first kHeatmapSentences are decoded on their own, recording their
    // attention for the report; recording every sentence would keep every
    // weight of the validation set.
    size_t heatmaps = std::min(kHeatmapSentences, examples.size());
    std::vector<std::vector<int32_t>> recorded, rest;
    for (size_t i = 0; i < examples.size(); ++i) (i < heatmaps ? recorded : rest).push_back(examples[i].src);
    DecodeOptions options = DecodeOptions::from_config(config_);
    std::vector<TokenIds> outputs = translate_ids(*model_, recorded, options, &result.attention);
    std::vector<TokenIds> rest_outputs = translate_ids(*model_, rest, options);
    outputs.insert(outputs.end(), rest_outputs.begin(), rest_outputs.end());
    for (const TokenIds& ids : outputs) result.predictions.push_back(tgt_tokenizer_->decode(ids));
    for (const data::Example& e : examples) {
      result.sources.push_back(e.text.src);
      result.references.push_back(e.text.tgt);
    }
    result.scores = score_translations(result.predictions, result.references);
  }
  model_->train();
  return result;
}

void Trainer::end_of_epoch(int64_t epoch) {
  ValidationResult v = validate();
  if (!v.predictions.empty()) {
    say("epoch %02lld validation on %zu sentences: loss %.4f  %s\n", static_cast<long long>(epoch),
        v.predictions.size(), v.loss, format_scores(v.scores).c_str());
    for (int64_t i = 0; i < std::min<int64_t>(config_.val_examples, v.predictions.size()); ++i)
      say("    SOURCE: %s\n    TARGET: %s\n PREDICTED: %s\n", v.sources[i].c_str(), v.references[i].c_str(),
          v.predictions[i].c_str());
    nlohmann::ordered_json record = {{"kind", "valid"}, {"epoch", epoch}, {"step", state_.global_step}, {"loss", v.loss}};
    add_scores(record, v.scores);
    append_metrics(record.dump());
  }
  bool best = !v.predictions.empty() && v.scores.at("bleu") > state_.best_bleu;
  if (best) state_.best_bleu = v.scores.at("bleu");
  // The checkpoint first: whatever fails after it, the epoch's work is kept.
  save(CheckpointStore::epoch_tag(epoch));
  if (comm_.rank() == 0) store_.prune();
  if (best) save("best");
  if (nonfinite_total_ > 0)
    say("epoch %02lld: %lld updates skipped so far for a non-finite loss or gradient norm\n",
        static_cast<long long>(epoch), static_cast<long long>(nonfinite_total_));
  if (!v.predictions.empty() && comm_.rank() == 0) write_epoch_report(v);
}

// The report's samples and heatmaps: the first few validation sentences.
void Trainer::write_epoch_report(const ValidationResult& v) {
  constexpr size_t kSamples = 5;
  ReportContent content;
  content.title = "Scratchformer: " + config_.experiment_name;
  content.metrics_path = metrics_path_;
  content.heads = config_.h;
  for (size_t i = 0; i < std::min(kSamples, v.predictions.size()); ++i)
    content.samples.push_back({v.sources[i], v.references[i], v.predictions[i]});
  for (const AttentionRecord& record : v.attention)
    content.attention.push_back(attention_maps(record, *src_tokenizer_, *tgt_tokenizer_));
  write_report((fs::path(config_.experiment_name) / "report.html").string(), content);
}

// metrics.jsonl continues a resumed run: records a killed run wrote after its
// checkpoint are dropped, since the resumed run writes them again. A fresh run
// starts the file anew.
static void restart_metrics(const std::string& path, bool resumed, int64_t global_step) {
  std::string kept;
  if (resumed) {
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);) {
      json r = json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (r.is_object() && r.value("step", INT64_MAX) <= global_step) kept += line + "\n";
    }
  }
  write_file_atomically(path, kept);
}

int Trainer::run() {
  metrics_path_ = (fs::path(config_.experiment_name) / "metrics.jsonl").string();
  if (comm_.rank() == 0) {
    fs::create_directories(config_.experiment_name);
    restart_metrics(metrics_path_, resumed_, state_.global_step);
  }
  start_ = last_step_ = std::chrono::steady_clock::now();
  int64_t epoch = 0, first_batch = 0;
  if (resumed_) {
    epoch = state_.epoch_complete() ? state_.epoch + 1 : state_.epoch;
    first_batch = state_.epoch_complete() ? 0 : state_.batch;
    if (epoch >= config_.num_epochs)
      say("nothing to train: the checkpoint has %lld epochs, num_epochs is %lld\n",
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
    epoch_loss_sum_ = 0;
    int64_t epoch_tokens = 0;
    while (!batches.done()) {
      int64_t batches_left = batches.size() - batches.position();
      epoch_tokens += train_batch(batches.next_indices(), batches_left);
      bool last = batches.done();
      state_.batch = batches.position();
      if (progress)
        progress->update(batches.position(), last_loss_, optimizer_->lr(),
                         epoch_tokens / std::max(seconds_since(epoch_start), 1e-9));
      if (diverged_) {
        save(CheckpointStore::epoch_tag(epoch));
        fail(config_.source, ": training diverged: ", nonfinite_in_a_row_,
             " optimizer steps in a row had a non-finite loss or gradient norm; the last good state is saved as ",
             store_.weights_path(CheckpointStore::epoch_tag(epoch)),
             " (lower lr, set clip_grad_norm, or raise max_nonfinite_steps)");
      }
      // Stop only between optimizer steps, so no accumulated gradient is
      // lost, and on every rank at the same one.
      if (stop_agreed_ && accumulation_.pending() == 0 && !last) {
        save(CheckpointStore::epoch_tag(epoch));
        say("\nstopped: saved epoch %02lld at batch %lld of %lld\n", static_cast<long long>(epoch),
            static_cast<long long>(state_.batch), static_cast<long long>(batches.size()));
        return 130;
      }
    }
    if (progress)
      progress->finish(static_cast<float>(epoch_loss_sum_ / std::max<int64_t>(1, batches.size() - first_batch)));
    end_of_epoch(epoch);
    if (stop_requested_anywhere()) return 130;
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
  say("data parallel: %.2f ms per step waiting for gradient all-reduces after backward (overlap %s); "
      "per rank: peak RSS %s MiB, optimizer state %s MiB\n",
      1e3 * reducer_->exposed_seconds_per_step(), reducer_->overlapping() ? "on" : "off", rss.c_str(), state.c_str());
}

}  // namespace sf::train
