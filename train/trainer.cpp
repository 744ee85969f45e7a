#include "trainer.h"

#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>

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

static std::unique_ptr<optim::Optimizer> make_optimizer(const Config& c, const optim::NamedTensors& params) {
  const OptimizerConfig& o = c.optimizer;
  if (o.name == "sgd")
    return std::make_unique<optim::Sgd>(params, c.lr, optim::SgdOptions{o.momentum, o.weight_decay, o.nesterov});
  return std::make_unique<optim::Adam>(
      params, c.lr, optim::AdamOptions{o.beta1, o.beta2, o.eps, o.weight_decay, o.name == "adamw"});
}

Trainer::Trainer(Config config)
    : config_(std::move(config)),
      accumulation_(config_.grad_accum),
      store_(config_.model_folder, config_.model_basename, config_.keep_checkpoints) {
  kernels::set_num_threads(static_cast<int>(config_.threads));
  check_outputs();
  prepare_data();
  build_model_and_optimizer();
  restore();
}

Trainer::~Trainer() = default;

// What the run needs, checked before any data is read or written: memory for
// the model, and every folder it writes to.
void Trainer::check_outputs() {
  if (config_.preload && *config_.preload != "latest" && !fs::is_regular_file(*config_.preload))
    fail(config_.source, ": key 'preload': ", *config_.preload, ": no such file");
  // The vocabularies are not known yet: without them, a lower bound.
  check_fits_in_memory(training_bytes(model_config(0, 0), config_.batch_size), "training this model", config_.source);
  check_writable_folder(config_.model_folder, config_.source, "model_folder");
  check_writable_folder(config_.experiment_name, config_.source, "experiment_name");
  for (const std::string& lang : {config_.lang_src, config_.lang_tgt}) {
    std::string folder = fs::path(config_.tokenizer_path(lang)).parent_path().string();
    check_writable_folder(folder.empty() ? "." : folder, config_.source, "tokenizer_file");
  }
  store_.remove_unfinished();
}

void Trainer::prepare_data() {
  const DataConfig& d = config_.data;
  data::CorpusOptions options{d.task, d.size, d.train, d.valid, d.format, config_.lang_src,
                              config_.lang_tgt, config_.val_fraction, static_cast<uint64_t>(config_.seed)};
  data::Corpus corpus = data::load_corpus(options);
  std::fprintf(stderr, "data: %zu training pairs, %zu validation pairs", corpus.train.size(), corpus.valid.size());
  if (corpus.blank_lines > 0) std::fprintf(stderr, " (%lld blank lines skipped)", static_cast<long long>(corpus.blank_lines));
  std::fprintf(stderr, "\n");
  if (corpus.train.empty())
    fail(d.is_task() ? config_.source : d.train, ": no training pairs");
  if (!d.valid.empty() && corpus.valid.empty()) fail(d.valid, ": no validation pairs");

  auto tokenizer = [&](const std::string& lang, data::Side side) {
    std::string path = config_.tokenizer_path(lang);
    data::TokenizerFile file = data::load_or_build_tokenizer(path, corpus.train, side, config_.min_frequency);
    std::fprintf(stderr, "tokenizer %s: %s %s (%lld tokens)\n", lang.c_str(),
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
      std::fprintf(stderr, "data: dropped %lld pairs longer than seq_len - 2 = %lld tokens\n",
                   static_cast<long long>(dropped), static_cast<long long>(config_.seq_len - 2));
    if (train.empty()) fail(config_.source, ": every training pair is longer than seq_len - 2 tokens");
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
  std::fprintf(stderr, "model: %lld parameters on %s\n",
               static_cast<long long>(model_->num_parameters()), device.description().c_str());
  optimizer_ = make_optimizer(config_, model_->named_parameters());

  int64_t steps_per_epoch = (train_set_->batches_per_epoch() + config_.grad_accum - 1) / config_.grad_accum;
  schedule_ = {optim::parse_schedule(config_.schedule), config_.lr, config_.warmup_steps,
               std::max<int64_t>(1, steps_per_epoch * config_.num_epochs), config_.d_model};
}

void Trainer::restore() {
  if (!config_.preload) return;
  CheckpointFiles files;
  if (*config_.preload == "latest") {
    std::optional<CheckpointFiles> latest = store_.latest();
    if (!latest) {
      // Starting fresh would write over them: say so instead.
      if (std::optional<std::string> stray = store_.any_checkpoint_file())
        fail(config_.source, ": key 'preload': no complete checkpoint in ", config_.model_folder, ", but ", *stray,
             " is there (its optimizer or state file is missing or from another save); move it away to start "
             "fresh, or set preload to it to start from its weights");
      std::fprintf(stderr, "preload latest: no checkpoint in %s yet, starting fresh\n", config_.model_folder.c_str());
      return;
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
    std::fprintf(stderr, "preload: weights from %s; no optimizer/state beside them, so a fresh optimizer at epoch 0\n",
                 files.weights.c_str());
    return;
  }
  for (const std::string* file : {&files.optimizer, &files.state})
    if (!fs::exists(*file)) fail(*file, ": missing, so the checkpoint is incomplete");
  optimizer_->load(files.optimizer);
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
  std::fprintf(stderr, "preload: resumed from %s (epoch %02lld, batch %lld of %lld, step %lld)\n", files.weights.c_str(),
               static_cast<long long>(state_.epoch), static_cast<long long>(state_.batch),
               static_cast<long long>(state_.batches_in_epoch), static_cast<long long>(state_.global_step));
}

float Trainer::train_batch(const data::Batch& batch, int64_t batches_left) {
  Tensor memory = model_->encode(batch.encoder_input, batch.encoder_mask);
  Tensor features = model_->decode(memory, batch.encoder_mask, batch.decoder_input, batch.decoder_mask);
  Tensor loss = translation_loss(*model_, features, batch.label, config_.label_smoothing);
  (loss * accumulation_.loss_scale(batches_left)).backward();
  float batch_loss = loss.item();
  pending_loss_ += batch_loss;
  pending_batches_ += 1;
  pending_tokens_ += batch.label_tokens;
  if (accumulation_.step_due(/*last_batch_of_epoch=*/batches_left == 1)) {
    float norm = config_.clip_grad_norm ? optim::clip_grad_norm(optimizer_->params(), *config_.clip_grad_norm)
                                        : optim::grad_norm(optimizer_->params());
    float mean_loss = static_cast<float>(pending_loss_ / pending_batches_);
    if (std::isfinite(mean_loss) && std::isfinite(norm)) {
      nonfinite_in_a_row_ = 0;
      state_.global_step += 1;
      float lr = optim::learning_rate(schedule_, state_.global_step);
      optimizer_->set_lr(lr);
      optimizer_->step();
      double seconds = seconds_since(last_step_);
      log_step(mean_loss, lr, norm, seconds > 0 ? pending_tokens_ / seconds : 0.0);
    } else {
      skip_nonfinite_step(mean_loss, norm);
    }
    optimizer_->zero_grad();
    last_step_ = std::chrono::steady_clock::now();
    pending_loss_ = 0;
    pending_batches_ = pending_tokens_ = 0;
  }
  return batch_loss;
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
    std::fprintf(stderr, "\nstep %lld: loss %g, gradient norm %g: not finite, update skipped (further skips are "
                 "counted at the end of each epoch)\n", static_cast<long long>(step), loss, grad_norm);
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
  std::ofstream out(metrics_path_, std::ios::app);
  out << line << "\n";
  out.flush();
  if (!out) fail(metrics_path_, ": cannot write (disk full?)");
}

void Trainer::save(const std::string& tag) {
  state_.dropout_rng = model_->dropout_rng().state();
  state_.accum_pending = accumulation_.pending();
  store_.save(tag, *model_, *optimizer_, state_);
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
    std::fprintf(stderr, "epoch %02lld validation on %zu sentences: loss %.4f  %s\n", static_cast<long long>(epoch),
                 v.predictions.size(), v.loss, format_scores(v.scores).c_str());
    for (int64_t i = 0; i < std::min<int64_t>(config_.val_examples, v.predictions.size()); ++i)
      std::fprintf(stderr, "    SOURCE: %s\n    TARGET: %s\n PREDICTED: %s\n", v.sources[i].c_str(),
                   v.references[i].c_str(), v.predictions[i].c_str());
    nlohmann::ordered_json record = {{"kind", "valid"}, {"epoch", epoch}, {"step", state_.global_step}, {"loss", v.loss}};
    add_scores(record, v.scores);
    append_metrics(record.dump());
  }
  bool best = !v.predictions.empty() && v.scores.at("bleu") > state_.best_bleu;
  if (best) state_.best_bleu = v.scores.at("bleu");
  // The checkpoint first: whatever fails after it, the epoch's work is kept.
  save(CheckpointStore::epoch_tag(epoch));
  store_.prune();
  if (best) save("best");
  if (nonfinite_total_ > 0)
    std::fprintf(stderr, "epoch %02lld: %lld updates skipped so far for a non-finite loss or gradient norm\n",
                 static_cast<long long>(epoch), static_cast<long long>(nonfinite_total_));
  if (!v.predictions.empty()) write_epoch_report(v);
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
  fs::create_directories(config_.experiment_name);
  metrics_path_ = (fs::path(config_.experiment_name) / "metrics.jsonl").string();
  restart_metrics(metrics_path_, resumed_, state_.global_step);
  start_ = last_step_ = std::chrono::steady_clock::now();
  int64_t epoch = 0, first_batch = 0;
  if (resumed_) {
    epoch = state_.epoch_complete() ? state_.epoch + 1 : state_.epoch;
    first_batch = state_.epoch_complete() ? 0 : state_.batch;
    if (epoch >= config_.num_epochs)
      std::fprintf(stderr, "nothing to train: the checkpoint has %lld epochs, num_epochs is %lld\n",
                   static_cast<long long>(state_.epoch_complete() ? state_.epoch + 1 : state_.epoch),
                   static_cast<long long>(config_.num_epochs));
  }
  for (; epoch < config_.num_epochs; ++epoch, first_batch = 0) {
    model_->train();
    data::EpochBatches batches(*train_set_, epoch, first_batch);
    state_.epoch = epoch;
    state_.batches_in_epoch = batches.size();
    Progress progress(epoch, config_.num_epochs, batches.size(), first_batch);
    auto epoch_start = std::chrono::steady_clock::now();
    double loss_sum = 0;
    int64_t epoch_tokens = 0;
    while (!batches.done()) {
      int64_t batches_left = batches.size() - batches.position();
      data::Batch batch = batches.next();
      bool last = batches.done();
      float loss = train_batch(batch, batches_left);
      loss_sum += loss;
      state_.batch = batches.position();
      epoch_tokens += batch.label_tokens;
      progress.update(batches.position(), loss, optimizer_->lr(),
                      epoch_tokens / std::max(seconds_since(epoch_start), 1e-9));
      if (diverged_) {
        save(CheckpointStore::epoch_tag(epoch));
        fail(config_.source, ": training diverged: ", nonfinite_in_a_row_,
             " optimizer steps in a row had a non-finite loss or gradient norm; the last good state is saved as ",
             store_.weights_path(CheckpointStore::epoch_tag(epoch)),
             " (lower lr, set clip_grad_norm, or raise max_nonfinite_steps)");
      }
      // Stop only between optimizer steps, so no accumulated gradient is lost.
      if (g_stop_requested && accumulation_.pending() == 0 && !last) {
        save(CheckpointStore::epoch_tag(epoch));
        std::fprintf(stderr, "\nstopped: saved epoch %02lld at batch %lld of %lld\n", static_cast<long long>(epoch),
                     static_cast<long long>(state_.batch), static_cast<long long>(batches.size()));
        return 130;
      }
    }
    progress.finish(static_cast<float>(loss_sum / std::max<int64_t>(1, batches.size() - first_batch)));
    end_of_epoch(epoch);
    if (g_stop_requested) return 130;
  }
  return 0;
}

}  // namespace sf::train
