#include "inference.h"

#include <algorithm>
#include <numeric>

#include "autograd/engine.h"
#include "base/error.h"
#include "data/unicode.h"
#include "nn/checkpoint.h"
#include "setup/checkpoints.h"
#include "setup/loss.h"
#include "setup/model_identity.h"
#include "setup/resources.h"
#include "infer/unknown_words.h"

namespace sf::infer {

Session Session::open(const setup::Config& config, const std::optional<std::string>& checkpoint) {
  data::TokenizerFile src = data::read_tokenizer_file(config.tokenizer_path(config.lang_src), config.tokenizer);
  data::TokenizerFile tgt = data::read_tokenizer_file(config.tokenizer_path(config.lang_tgt), config.tokenizer);
  std::string weights;
  if (checkpoint) {
    weights = *checkpoint;
  } else {
    setup::CheckpointStore store(config.model_folder, config.model_basename, config.keep_checkpoints);
    std::optional<setup::CheckpointFiles> latest = store.latest();
    if (!latest)
      fail(config.model_folder, ": no complete checkpoint '", config.model_basename,
           "NN' here (train first, or pass --checkpoint)");
    weights = latest->weights;
  }
  // The file's metadata and the config with its tokenizer files must
  // describe one model; a difference (an edited key, a --set, another run's
  // tokenizer) is a mistake to name, not to ignore.
  std::optional<setup::ModelIdentity> identity = setup::ModelIdentity::of_file(weights);
  if (!identity)
    fail(weights, ": has no __metadata__, so nothing says which model it holds (weights saved by other tools); "
         "a training run can preload it");
  setup::check_weights_fit(weights, *identity, setup::ModelIdentity::of_run(config, src, tgt), config);
  setup::check_fits_in_memory(setup::inference_bytes(identity->model, inference_batch_size(config), config.beam),
                              "this checkpoint's model", weights);
  Rng init(static_cast<uint64_t>(config.seed));
  Session s{config, std::move(src.tokenizer), std::move(tgt.tokenizer), nn::build_transformer(identity->model, init),
            weights, *identity};
  nn::load_checkpoint(*s.model, s.checkpoint);
  s.model->to(device_named(config.device));
  s.model->eval();
  return s;
}

int64_t inference_batch_size(const setup::Config& config) { return std::max<int64_t>(config.batch_size, 32); }

DecodeOptions DecodeOptions::from_config(const setup::Config& config, std::optional<int64_t> beam) {
  return {beam.value_or(config.beam), config.length_penalty, config.seq_len, inference_batch_size(config)};
}

// Indices of `lengths` in groups of at most `batch_size`, similar lengths
// together, so little padding is computed.
static std::vector<std::vector<size_t>> length_batches(const std::vector<size_t>& lengths, int64_t batch_size) {
  std::vector<size_t> order(lengths.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return lengths[a] < lengths[b]; });
  std::vector<std::vector<size_t>> batches;
  for (size_t i = 0; i < order.size(); i += static_cast<size_t>(batch_size))
    batches.emplace_back(order.begin() + i,
                         order.begin() + std::min(order.size(), i + static_cast<size_t>(batch_size)));
  return batches;
}

std::vector<TokenIds> translate_ids(nn::Transformer& model, const std::vector<std::vector<int32_t>>& sources,
                                    const DecodeOptions& options, std::vector<AttentionRecord>* attention) {
  std::vector<size_t> lengths;
  for (const auto& s : sources) lengths.push_back(s.size());
  std::vector<TokenIds> out(sources.size());
  if (attention) attention->assign(sources.size(), {});
  // The weights stay as they are during this call: one decoder for its batches.
  PlacedDecoder decoder(model, std::max<int64_t>(options.beam, 1), *options.places);
  for (const auto& batch : length_batches(lengths, options.batch_size)) {
    std::vector<std::vector<int32_t>> rows;
    for (size_t i : batch) rows.push_back(sources[i]);
    Tensor src = data::frame_sources(rows);
    std::vector<AttentionRecord> records;
    decoder.decode(std::ssize(batch), [&](nn::Transformer& decoding) {
      if (options.beam <= 1) {
        std::vector<TokenIds> result =
            greedy_decode(decoding, src, options.max_len, attention ? &records : nullptr);
        for (size_t j = 0; j < batch.size(); ++j) out[batch[j]] = std::move(result[j]);
      } else {
        std::vector<Hypothesis> result = beam_search(decoding, src, options.beam, options.length_penalty,
                                                     options.max_len, attention ? &records : nullptr);
        for (size_t j = 0; j < batch.size(); ++j) out[batch[j]] = std::move(result[j].tokens);
      }
    });
    for (size_t j = 0; j < records.size(); ++j) (*attention)[batch[j]] = std::move(records[j]);
  }
  return out;
}

std::vector<Translation> translate_sentences(nn::Transformer& model, const data::Tokenizer& target_tokenizer,
                                             const std::vector<SourceSentence>& sources, const DecodeOptions& options,
                                             std::vector<AttentionRecord>* attention) {
  // Replacing unknown words reads every sentence's cross-attention; unless the
  // caller keeps the records, they are held for a few batches at a time.
  bool record = attention || options.replace_unknown_words;
  size_t chunk = record && !attention ? 8 * static_cast<size_t>(options.batch_size) : sources.size();
  std::vector<Translation> translations;
  if (attention) attention->clear();
  for (size_t begin = 0; begin < sources.size(); begin += chunk) {
    size_t end = std::min(sources.size(), begin + chunk);
    std::vector<std::vector<int32_t>> ids;
    for (size_t i = begin; i < end; ++i) ids.push_back(sources[i].ids);
    std::vector<AttentionRecord> records;
    std::vector<TokenIds> outputs = translate_ids(model, ids, options, record ? &records : nullptr);
    for (size_t i = begin; i < end; ++i) {
      const TokenIds& output = outputs[i - begin];
      std::string tokens = target_tokenizer.decode(output);
      std::string shown = options.replace_unknown_words
                              ? replace_unknown_words(output, records[i - begin], sources[i].words, target_tokenizer)
                              : tokens;
      translations.push_back({std::move(tokens), std::move(shown)});
    }
    if (attention) *attention = std::move(records);
  }
  return translations;
}

std::vector<Translation> translate_lines(Session& session, const std::vector<std::string>& sentences,
                                         const DecodeOptions& options, std::vector<AttentionRecord>* attention) {
  std::vector<SourceSentence> sources;
  int64_t limit = data::longest_source(session.config.seq_len);
  for (size_t i = 0; i < sentences.size(); ++i) {
    std::string where = "input sentence " + std::to_string(i + 1);
    if (size_t bad = data::find_invalid_utf8(sentences[i]); bad != std::string::npos)
      fail(where, ": invalid UTF-8 at byte ", bad + 1);
    std::vector<int32_t> ids = session.src_tokenizer.encode(sentences[i]);
    if (static_cast<int64_t>(ids.size()) > limit)
      fail(where, ": the sentence has ", ids.size(), " tokens, more than seq_len - 2 = ", limit);
    sources.push_back({std::move(ids), session.src_tokenizer.token_texts(sentences[i])});
  }
  return translate_sentences(*session.model, session.tgt_tokenizer, sources, options, attention);
}

std::vector<PairNll> score_pairs(nn::Transformer& model, std::vector<data::Example> examples, int64_t seq_len,
                                 int64_t batch_size) {
  NoGradGuard no_grad;
  std::vector<size_t> lengths;
  for (const data::Example& e : examples) lengths.push_back(std::max(e.src.size(), e.tgt.size()));
  data::BatchedDataset dataset(std::move(examples), {batch_size, seq_len, /*bucket=*/true, /*shuffle=*/false});
  std::vector<PairNll> out(lengths.size());
  for (const auto& indices : length_batches(lengths, batch_size)) {
    data::Batch b = dataset.make_batch(indices);
    // Read on the host (no copy when the model is on the CPU).
    Tensor log_probs = model.project(setup::batch_features(model, b)).to(cpu());
    int64_t width = b.label.size(1), vocab = log_probs.size(-1);
    for (size_t r = 0; r < indices.size(); ++r) {
      // Label positions: the target tokens, then [EOS]; [PAD] after them.
      int64_t tokens = data::framed_target_width(dataset.examples()[indices[r]].tgt.size());
      double nll = 0.0;
      for (int64_t t = 0; t < tokens; ++t) {
        int64_t at = static_cast<int64_t>(r) * width + t;
        nll -= log_probs.data()[at * vocab + b.label.ints()[at]];
      }
      out[indices[r]] = {nll, tokens};
    }
  }
  return out;
}

}  // namespace sf::infer
