// From tokenised pairs to model batches, each pair framed as framing.h says:
//   encoder_input  [SOS] src [EOS] [PAD]...      [B, S]
//   decoder_input  [SOS] tgt [PAD]...            [B, T]
//   label          tgt [EOS] [PAD]...            [B, T]
//   encoder_mask   encoder_keep_mask             [B, 1, 1, S]
//   decoder_mask   decoder_keep_mask             [B, 1, T, T]
// Fixed padding (S = T = seq_len) or, with `bucket`, batches of similar
// lengths padded only to their own longest sentence (S = longest source + 2,
// T = longest target + 1).
//
// An epoch's batches are a function of (seed, epoch) alone, so training can
// stop anywhere and resume at batch k of the same epoch (EpochBatches).
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "autograd/tensor.h"
#include "corpus.h"
#include "framing.h"
#include "tokenizer.h"

namespace sf::data {

struct Example {
  std::vector<int32_t> src, tgt;  // token ids, without special tokens
  Pair text;
};

std::vector<Example> encode_pairs(const std::vector<Pair>& pairs, const Tokenizer& src, const Tokenizer& tgt);

// The max_len_filter option: removes the examples with a side longer than
// seq_len - 2 tokens, keeping the others in order; returns how many it removed.
int64_t drop_long_examples(std::vector<Example>& examples, int64_t seq_len);
// Fails, naming the example's origin, unless it fits seq_len positions:
// source <= seq_len - 2 tokens ([SOS], [EOS]), target <= seq_len - 1.
void check_example_fits(const Example& e, int64_t seq_len);

struct BatchOptions {
  int64_t batch_size = 8;  // pairs per batch; with max_tokens, the most
  int64_t seq_len = 350;
  bool bucket = false;   // pad each batch to its own longest sentence
  bool shuffle = true;   // a new order every epoch (false: validation, in input order)
  uint64_t seed = 42;
  // > 0: a batch takes pairs in batch order while its padded size, rows x
  // its widest side (framed source or target), stays within max_tokens, as
  // fairseq's --max-tokens. Must be at least seq_len, so every pair fits.
  int64_t max_tokens = 0;
};

struct Batch {
  Tensor encoder_input, decoder_input, label;  // int32
  Tensor encoder_mask, decoder_mask;           // int32, 1 = keep
  std::vector<size_t> indices;                 // the examples, in batch order
  std::vector<std::string> src_text, tgt_text;
  int64_t label_tokens = 0;                    // non-[PAD] label positions
};

class BatchedDataset {
 public:
  // Every example must fit (check_example_fits); otherwise an sf::Error
  // names the pair's origin.
  BatchedDataset(std::vector<Example> examples, BatchOptions options);

  const std::vector<Example>& examples() const { return examples_; }
  const BatchOptions& options() const { return options_; }
  // How many batches epoch `epoch` has: the same for every epoch unless
  // batches are made by tokens (max_tokens), where it varies a little with
  // which pairs meet.
  int64_t batches_in_epoch(int64_t epoch) const;

  // The example indices of every batch of `epoch`, in training order. Each
  // example appears exactly once; the last batch may be smaller (as
  // torch.utils.data.DataLoader with drop_last=False).
  std::vector<std::vector<size_t>> epoch_plan(int64_t epoch) const;
  Batch make_batch(const std::vector<size_t>& indices) const;
  // The source and target widths example i's rows take in a batch: its
  // framed lengths with bucketing (a batch is as wide as its longest), else
  // seq_len.
  std::pair<int64_t, int64_t> padded_widths(size_t i) const;

 private:
  // About how many pairs a batch holds: batch_size, or with max_tokens as
  // many as fit at the mean width (the size of the pools bucketing sorts).
  size_t rows_per_batch() const;

  std::vector<Example> examples_;
  BatchOptions options_;
};

// The batches of one epoch, from batch `start` on (a resumed run passes the
// position saved in its checkpoint). It refers to `dataset`, which must outlive it.
class EpochBatches {
 public:
  EpochBatches(const BatchedDataset& dataset, int64_t epoch, int64_t start = 0);
  bool done() const { return position_ >= size(); }
  int64_t position() const { return position_; }  // the index of the next batch
  int64_t size() const { return static_cast<int64_t>(plan_.size()); }
  Batch next();
  // The next batch's example indices, without building it (a rank of
  // data-parallel training builds its share only).
  const std::vector<size_t>& next_indices();

 private:
  const BatchedDataset& dataset_;
  std::vector<std::vector<size_t>> plan_;
  int64_t position_;
};

}  // namespace sf::data
