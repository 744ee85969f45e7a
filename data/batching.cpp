#include "batching.h"

#include <algorithm>
#include <tuple>

#include "base/error.h"
#include "shuffle.h"

namespace sf::data {

namespace {

// Bucketing sorts by length within pools of this many batches: batches hold
// similar lengths, while which sentences meet in a batch still changes every
// epoch (sorting the whole set would fix the batches for ever).
constexpr size_t kBucketPoolBatches = 50;

// One generator per epoch, seeded from (seed, epoch), so no state has to
// survive between epochs or across a resume.
Rng epoch_rng(uint64_t seed, int64_t epoch) {
  return Rng(seed ^ (0x9E3779B97F4A7C15ULL * static_cast<uint64_t>(epoch + 1)));
}

std::vector<std::vector<size_t>> chunk(const std::vector<size_t>& order, size_t batch_size) {
  std::vector<std::vector<size_t>> batches;
  for (size_t begin = 0; begin < order.size(); begin += batch_size)
    batches.emplace_back(order.begin() + begin, order.begin() + std::min(order.size(), begin + batch_size));
  return batches;
}

// Batches of consecutive pairs of `order`, each as many as fit: rows x the
// widest side within max_tokens and rows within batch_size. A batch's cost
// is what the padded tensors hold, so batches of short pairs get more rows.
std::vector<std::vector<size_t>> chunk_by_tokens(const std::vector<size_t>& order, const BatchedDataset& dataset) {
  const BatchOptions& o = dataset.options();
  std::vector<std::vector<size_t>> batches;
  int64_t widest = 0;
  for (size_t i : order) {
    const auto [source, target] = dataset.padded_widths(i);
    const int64_t width = std::max({widest, source, target});
    if (batches.empty() || static_cast<int64_t>(batches.back().size()) + 1 > o.batch_size ||
        (static_cast<int64_t>(batches.back().size()) + 1) * width > o.max_tokens) {
      batches.emplace_back();
      widest = std::max(source, target);
    } else {
      widest = width;
    }
    batches.back().push_back(i);
  }
  return batches;
}

}  // namespace

std::vector<Example> encode_pairs(const std::vector<Pair>& pairs, const Tokenizer& src, const Tokenizer& tgt) {
  std::vector<Example> examples;
  examples.reserve(pairs.size());
  for (const Pair& pair : pairs) examples.push_back({src.encode(pair.src), tgt.encode(pair.tgt), pair});
  return examples;
}

int64_t drop_long_examples(std::vector<Example>& examples, int64_t seq_len) {
  // Both sides are held to the source's limit, the stricter one.
  size_t limit = static_cast<size_t>(std::max<int64_t>(longest_source(seq_len), 0));
  size_t before = examples.size();
  std::erase_if(examples, [&](const Example& e) { return e.src.size() > limit || e.tgt.size() > limit; });
  return static_cast<int64_t>(before - examples.size());
}

void check_example_fits(const Example& e, int64_t seq_len) {
  if (int64_t longest = longest_source(seq_len); static_cast<int64_t>(e.src.size()) > longest)
    fail(e.text.origin, ": the source has ", e.src.size(), " tokens, more than seq_len - 2 = ", longest);
  if (int64_t longest = longest_target(seq_len); static_cast<int64_t>(e.tgt.size()) > longest)
    fail(e.text.origin, ": the target has ", e.tgt.size(), " tokens, more than seq_len - 1 = ", longest);
}

BatchedDataset::BatchedDataset(std::vector<Example> examples, BatchOptions options)
    : examples_(std::move(examples)), options_(options) {
  if (options_.batch_size <= 0) internal_fail("batch_size must be positive, got ", options_.batch_size);
  if (options_.max_tokens != 0 && options_.max_tokens < options_.seq_len)
    internal_fail("max_tokens must be 0 or at least seq_len, got ", options_.max_tokens);
  for (const Example& e : examples_) check_example_fits(e, options_.seq_len);
}

int64_t BatchedDataset::batches_in_epoch(int64_t epoch) const {
  if (options_.max_tokens > 0) return static_cast<int64_t>(epoch_plan(epoch).size());
  int64_t n = static_cast<int64_t>(examples_.size());
  return (n + options_.batch_size - 1) / options_.batch_size;
}

std::vector<std::vector<size_t>> BatchedDataset::epoch_plan(int64_t epoch) const {
  Rng rng = epoch_rng(options_.seed, epoch);
  std::vector<size_t> order(examples_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  if (options_.shuffle) shuffle(order, rng);
  size_t batch_size = static_cast<size_t>(options_.batch_size);
  if (!options_.bucket) return options_.max_tokens > 0 ? chunk_by_tokens(order, *this) : chunk(order, batch_size);

  // By source, then target length; by tokens, by the wider side first, the
  // width a batch's cost counts.
  auto shorter = [&](size_t a, size_t b) {
    const Example &x = examples_[a], &y = examples_[b];
    const auto [x_src, x_tgt] = padded_widths(a);
    const auto [y_src, y_tgt] = padded_widths(b);
    const int64_t x_width = options_.max_tokens > 0 ? std::max(x_src, x_tgt) : 0;
    const int64_t y_width = options_.max_tokens > 0 ? std::max(y_src, y_tgt) : 0;
    return std::tuple(x_width, x.src.size(), x.tgt.size()) < std::tuple(y_width, y.src.size(), y.tgt.size());
  };
  // Without shuffling the pool is everything: plain length order.
  size_t pool = options_.shuffle ? kBucketPoolBatches * rows_per_batch() : std::max<size_t>(order.size(), 1);
  for (size_t begin = 0; begin < order.size(); begin += pool)
    std::stable_sort(order.begin() + begin, order.begin() + std::min(order.size(), begin + pool), shorter);
  std::vector<std::vector<size_t>> batches =
      options_.max_tokens > 0 ? chunk_by_tokens(order, *this) : chunk(order, batch_size);
  if (options_.shuffle) shuffle(batches, rng);
  return batches;
}

size_t BatchedDataset::rows_per_batch() const {
  if (options_.max_tokens == 0 || examples_.empty()) return static_cast<size_t>(options_.batch_size);
  int64_t width_sum = 0;
  for (size_t i = 0; i < examples_.size(); ++i) {
    const auto [source, target] = padded_widths(i);
    width_sum += std::max(source, target);
  }
  const int64_t mean_width = std::max<int64_t>(1, width_sum / static_cast<int64_t>(examples_.size()));
  return static_cast<size_t>(std::clamp<int64_t>(options_.max_tokens / mean_width, 1, options_.batch_size));
}

std::pair<int64_t, int64_t> BatchedDataset::padded_widths(size_t i) const {
  if (!options_.bucket) return {options_.seq_len, options_.seq_len};
  const Example& e = examples_.at(i);
  return {framed_source_width(e.src.size()), framed_target_width(e.tgt.size())};
}

Batch BatchedDataset::make_batch(const std::vector<size_t>& indices) const {
  if (indices.empty()) internal_fail("make_batch: no examples");
  int64_t S = 0, T = 0;
  for (size_t i : indices) {
    const auto [source, target] = padded_widths(i);
    S = std::max(S, source);
    T = std::max(T, target);
  }
  int64_t B = static_cast<int64_t>(indices.size());
  std::vector<int32_t> encoder, decoder, label;
  Batch batch;
  const auto append = [](std::vector<int32_t>& to, const std::vector<int32_t>& ids) {
    to.insert(to.end(), ids.begin(), ids.end());
  };
  for (size_t i : indices) {
    const Example& e = examples_.at(i);
    append(encoder, frame_source(e.src, S));
    append(decoder, frame_decoder_input(e.tgt, T));
    append(label, frame_labels(e.tgt, T));
    batch.src_text.push_back(e.text.src);
    batch.tgt_text.push_back(e.text.tgt);
    batch.label_tokens += framed_target_width(e.tgt.size());
  }
  batch.encoder_input = Tensor::from_ints(encoder, {B, S});
  batch.decoder_input = Tensor::from_ints(decoder, {B, T});
  batch.label = Tensor::from_ints(label, {B, T});
  batch.encoder_mask = encoder_keep_mask(batch.encoder_input);
  batch.decoder_mask = decoder_keep_mask(batch.decoder_input);
  batch.indices = indices;
  return batch;
}

EpochBatches::EpochBatches(const BatchedDataset& dataset, int64_t epoch, int64_t start)
    : dataset_(dataset), plan_(dataset.epoch_plan(epoch)), position_(start) {
  if (start < 0 || start > size())
    fail("cannot resume epoch ", epoch, " at batch ", start, ": it has ", size(), " batches");
}

Batch EpochBatches::next() { return dataset_.make_batch(next_indices()); }

const std::vector<size_t>& EpochBatches::next_indices() {
  if (done()) internal_fail("EpochBatches::next: the epoch is over");
  return plan_[position_++];
}

}  // namespace sf::data
