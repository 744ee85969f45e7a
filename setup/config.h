// The training configuration: a JSON file whose keys and defaults are the
// table of docs/10-formats.md, overridden by `--set key=value` arguments,
// validated as a whole before anything runs. Every problem is an sf::Error whose message
// starts with the file (and line, for malformed JSON) and names the key.
#pragma once
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "autograd/tensor.h"

namespace sf::setup {

struct DataConfig {
  // Either a built-in toy task ...
  std::string task;     // copy | reverse | dates | numbers | grammar
  int64_t size = 20000;  // pairs to generate
  // ... or files.
  std::string train, valid, format = "tsv";  // tsv | jsonl
  bool is_task() const { return !task.empty(); }
};

struct OptimizerConfig {
  std::string name = "adam";  // adam | adamw | sgd
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-9f, weight_decay = 0.0f;
  float momentum = 0.0f;  // sgd
  bool nesterov = false;  // sgd
};

struct Config {
  std::string source;     // the config file, for messages
  std::string canonical;  // the config as read, --set applied, as compact JSON

  int64_t batch_size = 8, num_epochs = 20;
  float lr = 1e-4f;
  int64_t seq_len = 350, d_model = 512, N = 6, h = 8, d_ff = 2048;
  float dropout = 0.1f, label_smoothing = 0.1f;
  std::string activation = "relu";  // the feed-forward blocks': "relu" or "gelu" (nn/layers.h)
  std::string norm = "pre";     // "pre" | "post": where each block's layer norm sits (nn::TransformerConfig)
  bool tie_embeddings = false;  // one matrix for both embeddings and the projection (one vocabulary)
  int64_t seed = 42;
  std::string lang_src = "en", lang_tgt = "it";
  DataConfig data;
  float val_fraction = 0.1f;
  bool max_len_filter = true, bucket = false;
  // > 0: training batches by tokens, as fairseq's --max-tokens: pairs in
  // batch order while rows x the batch's widest side stays within it (and
  // the rows within batch_size), so every step does about the same work.
  int64_t max_tokens = 0;
  int64_t min_frequency = 2;  // tokenizer "word" only
  // "word": one id per word (data/tokenizer.h); "bpe": subword units
  // (data/bpe.h), vocab_size tokens with the specials, learnt from both sides
  // into one vocabulary written to both tokenizer files when shared_vocab.
  std::string tokenizer = "word";
  int64_t vocab_size = 8000;
  bool shared_vocab = false;
  std::string model_folder = "weights", model_basename = "tmodel_";
  int64_t keep_checkpoints = 5;
  // Optimizer steps between checkpoints of the exact position inside an
  // epoch, so that a hard stop (SIGKILL, a lost machine) loses at most these
  // steps; 0 = checkpoints at epoch ends and on a stop only.
  int64_t checkpoint_every = 0;
  std::optional<std::string> preload;  // "latest" or a path
  // A run owns its model_folder and tokenizer files (docs/07-training.md):
  // another run's checkpoints there, or tokenizer files built from other
  // data, stop it, unless this says to delete those checkpoints and build the
  // tokenizers again.
  bool overwrite = false;
  std::string tokenizer_file = "tokenizer_{0}.json", experiment_name = "runs/tmodel";
  OptimizerConfig optimizer;
  std::string schedule = "constant";  // constant | noam | cosine
  int64_t warmup_steps = 4000;
  std::optional<float> clip_grad_norm;
  int64_t grad_accum = 1;
  std::string device = "cpu";  // one of device_names() (autograd/device.h)
  // "fp32", "bf16": matrix products on bf16 operands with float32
  // accumulation, float32 master weights and optimizer state, as PyTorch's CPU
  // autocast (docs/13-bf16.md), or "auto" (nullopt): bf16 where that is
  // faster here. precision_dtype() is the one a run uses.
  std::optional<DType> precision = DType::F32;
  int64_t threads = 0, val_examples = 2, beam = 1;
  // Under MPI, 1 shards the optimizer state across the ranks (ZeRO stage 1).
  int64_t zero = 0;
  // Under MPI, the size of a gradient bucket, in MB (the first one is smaller).
  float bucket_mb = 25.0f;
  // Under MPI, sum each bucket while backward goes on; false: all of them
  // after backward (to measure what the overlap hides).
  bool overlap_grad_reduce = true;
  float length_penalty = 0.6f;
  // Optimizer steps in a row with a non-finite loss or gradient norm (each
  // skipped) after which training stops, saving its last good state; 0 = never.
  int64_t max_nonfinite_steps = 10;

  // tokenizer_file with {0} replaced by the language.
  std::string tokenizer_path(const std::string& lang) const;
  // "auto": bf16 where the device multiplies bf16 faster than float32
  // (Device::multiplies_bf16_faster), else fp32.
  DType precision_dtype() const;
  // Rows of seq_len positions that hold as many as the largest training
  // batch: batch_size, or with max_tokens max_tokens / seq_len when fewer
  // (what memory estimates count).
  int64_t full_length_rows() const {
    return max_tokens > 0 ? std::min(batch_size, (max_tokens + seq_len - 1) / seq_len) : batch_size;
  }
  // What the precision brings on this machine, for the log ("" for fp32).
  std::string precision_note() const;
};

// Reads `path`, applies each "key=value" override (dotted keys reach into
// nested objects; the value is JSON when it parses as JSON, else a string),
// and validates every key.
Config load_config(const std::string& path, const std::vector<std::string>& overrides = {});

// Bounds on sizes, so that an absurd value is a clear error before anything is
// allocated (the model's memory is checked as a whole later, see
// setup/resources.h). Far beyond anything a CPU trains.
inline constexpr int64_t kMaxSeqLen = 1 << 16, kMaxWidth = 1 << 20, kMaxLayers = 1024;
inline constexpr int64_t kMaxBatchSize = 1 << 20, kMaxEpochs = 1 << 20, kMaxThreads = 1024, kMaxBeam = 1024;

// The default task when a config names no data (the one `make demo` trains).
inline constexpr const char* kDefaultTask = "dates";

}  // namespace sf::setup
