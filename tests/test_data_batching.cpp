// Batches framed as data/framing.h says, masks, length filtering,
// bucketing and resumable epoch order.
#include <doctest/doctest.h>

#include <algorithm>

#include "base/error.h"
#include "base/random.h"
#include "data/batching.h"

using namespace sf;
using namespace sf::data;

namespace {

std::vector<Pair> three_pairs() {
  return {{"I am here", "Sono qui", "a:1"}, {"Hello", "Ciao!", "a:2"}, {"We see the cat", "Vediamo il gatto", "a:3"}};
}

Tokenizer side_tokenizer(const std::vector<Pair>& pairs, bool source) {
  std::vector<std::string_view> texts;
  for (const Pair& p : pairs) texts.push_back(source ? p.src : p.tgt);
  return Tokenizer::train(texts, 1);
}

// `count` examples whose sides have pseudo-random lengths 1..30.
std::vector<Example> examples_of_many_lengths(int count) {
  std::vector<Example> examples;
  Rng rng(99);
  for (int i = 0; i < count; ++i) {
    Example e;
    e.src.assign(1 + rng.below(30), 4);
    e.tgt.assign(1 + rng.below(30), 5);
    e.text.origin = "x:" + std::to_string(i);
    examples.push_back(e);
  }
  return examples;
}

// Encoder [PAD] positions if this batch were padded to its own longest source.
int64_t padding(const BatchedDataset& dataset, const std::vector<size_t>& indices) {
  size_t longest = 0, total = 0;
  for (size_t i : indices) {
    longest = std::max(longest, dataset.examples()[i].src.size());
    total += dataset.examples()[i].src.size();
  }
  return static_cast<int64_t>(longest * indices.size() - total);
}

}  // namespace

TEST_CASE("data: batch of 3 sentences: shapes, inputs, labels and masks") {
  std::vector<Pair> pairs = three_pairs();
  Tokenizer src = side_tokenizer(pairs, true), tgt = side_tokenizer(pairs, false);
  BatchedDataset dataset(encode_pairs(pairs, src, tgt), {.batch_size = 3, .seq_len = 8, .shuffle = false});
  EpochBatches epoch(dataset, 0);
  REQUIRE(epoch.size() == 1);
  Batch batch = epoch.next();
  CHECK(epoch.done());

  CHECK(batch.encoder_input.shape() == Shape{3, 8});
  CHECK(batch.decoder_input.shape() == Shape{3, 8});
  CHECK(batch.label.shape() == Shape{3, 8});
  CHECK(batch.encoder_mask.shape() == Shape{3, 1, 1, 8});
  CHECK(batch.decoder_mask.shape() == Shape{3, 1, 8, 8});
  CHECK(batch.encoder_input.dtype() == DType::I32);
  CHECK(batch.decoder_mask.dtype() == DType::I32);

  auto s = [&](const char* w) { return src.token_to_id(w); };
  auto t = [&](const char* w) { return tgt.token_to_id(w); };
  const int32_t P = kPadId, SOS = kSosId, EOS = kEosId;
  CHECK(batch.encoder_input.to_int_vector() ==
        std::vector<int32_t>{SOS, s("I"), s("am"), s("here"), EOS, P, P, P,  //
                             SOS, s("Hello"), EOS, P, P, P, P, P,            //
                             SOS, s("We"), s("see"), s("the"), s("cat"), EOS, P, P});
  CHECK(batch.decoder_input.to_int_vector() ==
        std::vector<int32_t>{SOS, t("Sono"), t("qui"), P, P, P, P, P,  //
                             SOS, t("Ciao"), t("!"), P, P, P, P, P,    //
                             SOS, t("Vediamo"), t("il"), t("gatto"), P, P, P, P});
  CHECK(batch.label.to_int_vector() ==
        std::vector<int32_t>{t("Sono"), t("qui"), EOS, P, P, P, P, P,  //
                             t("Ciao"), t("!"), EOS, P, P, P, P, P,    //
                             t("Vediamo"), t("il"), t("gatto"), EOS, P, P, P, P});
  CHECK(batch.encoder_mask.to_int_vector() ==
        std::vector<int32_t>{1, 1, 1, 1, 1, 0, 0, 0,  //
                             1, 1, 1, 0, 0, 0, 0, 0,  //
                             1, 1, 1, 1, 1, 1, 0, 0});
  // Decoder mask row i of sentence b: key j is kept when it is not [PAD] and j <= i.
  std::vector<int32_t> decoder_mask = batch.decoder_mask.to_int_vector();
  const int real[] = {3, 3, 4};  // [SOS] + target tokens
  for (int b = 0; b < 3; ++b)
    for (int i = 0; i < 8; ++i)
      for (int j = 0; j < 8; ++j) {
        CAPTURE(b);
        CAPTURE(i);
        CAPTURE(j);
        CHECK(decoder_mask[(b * 8 + i) * 8 + j] == (j < real[b] && j <= i ? 1 : 0));
      }
  CHECK(batch.label_tokens == 3 + 3 + 4);
  CHECK(batch.src_text == std::vector<std::string>{"I am here", "Hello", "We see the cat"});
  CHECK(batch.tgt_text[1] == "Ciao!");
  CHECK(batch.indices == std::vector<size_t>{0, 1, 2});

  // Bucketed: padded to the batch's own longest source (+2) and target (+1).
  BatchedDataset bucketed(encode_pairs(pairs, src, tgt), {.batch_size = 3, .seq_len = 8, .bucket = true, .shuffle = false});
  Batch tight = EpochBatches(bucketed, 0).next();
  CHECK(tight.encoder_input.shape() == Shape{3, 6});
  CHECK(tight.decoder_input.shape() == Shape{3, 4});
  CHECK(tight.decoder_mask.shape() == Shape{3, 1, 4, 4});
  CHECK(tight.indices == std::vector<size_t>{1, 0, 2});  // by length
  CHECK(tight.label.to_int_vector() ==
        std::vector<int32_t>{t("Ciao"), t("!"), EOS, P, t("Sono"), t("qui"), EOS, P,
                             t("Vediamo"), t("il"), t("gatto"), EOS});
}

TEST_CASE("data: max_len_filter drops long pairs and counts them; too long is an error") {
  std::vector<Pair> pairs = three_pairs();
  Tokenizer src = side_tokenizer(pairs, true), tgt = side_tokenizer(pairs, false);
  std::vector<Example> examples = encode_pairs(pairs, src, tgt);
  // seq_len 5: at most 3 tokens a side; "We see the cat" has 4.
  CHECK(drop_long_examples(examples, 5) == 1);
  REQUIRE(examples.size() == 2);
  CHECK(examples[1].text.src == "Hello");

  // Without the filter the framing's limits apply: the error names the pair.
  CHECK_THROWS_WITH_AS(BatchedDataset(encode_pairs(pairs, src, tgt), {.seq_len = 5}),
                       "a:3: the source has 4 tokens, more than seq_len - 2 = 3", Error);
  // A target of seq_len - 1 tokens still fits the decoder ([SOS] + target).
  std::vector<Example> target_only = encode_pairs({{"Hello", "Vediamo il gatto", "b:1"}}, src, tgt);
  BatchedDataset fits(target_only, {.seq_len = 4});
  CHECK(EpochBatches(fits, 0).next().label.to_int_vector().back() == kEosId);
  CHECK_THROWS_WITH_AS(BatchedDataset(target_only, {.seq_len = 3}),
                       "b:1: the target has 3 tokens, more than seq_len - 1 = 2", Error);
}

TEST_CASE("data: bucketing covers every pair exactly once per epoch, with similar lengths") {
  const int n = 1000;
  BatchedDataset dataset(examples_of_many_lengths(n), {.batch_size = 16, .seq_len = 40, .bucket = true, .seed = 7});
  CHECK(dataset.batches_in_epoch(0) == 63);
  int64_t bucket_padding = 0;
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    std::vector<int> seen(n, 0);
    EpochBatches batches(dataset, epoch);
    CHECK(batches.size() == 63);
    while (!batches.done()) {
      Batch batch = batches.next();
      for (size_t i : batch.indices) ++seen[i];
      // Every row is exactly as wide as the batch's longest source + 2.
      size_t longest = 0;
      for (size_t i : batch.indices) longest = std::max(longest, dataset.examples()[i].src.size());
      CHECK(batch.encoder_input.size(1) == static_cast<int64_t>(longest) + 2);
      bucket_padding += padding(dataset, batch.indices);
    }
    CHECK(std::all_of(seen.begin(), seen.end(), [](int k) { return k == 1; }));
  }
  // Sorting by length inside pools leaves far less padding than random batches.
  BatchedDataset fixed(examples_of_many_lengths(n), {.batch_size = 16, .seq_len = 40, .bucket = false, .seed = 7});
  int64_t random_padding = 0;
  for (int64_t epoch = 0; epoch < 3; ++epoch)
    for (const auto& indices : fixed.epoch_plan(epoch)) random_padding += padding(fixed, indices);
  CHECK(bucket_padding * 2 < random_padding);
}

TEST_CASE("data: max_tokens batches hold about max_tokens padded positions each, short pairs in more rows") {
  const int n = 1000;
  const int64_t max_tokens = 400;
  BatchedDataset dataset(examples_of_many_lengths(n),
                         {.batch_size = 1000, .seq_len = 40, .bucket = true, .seed = 7, .max_tokens = max_tokens});
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    std::vector<std::vector<size_t>> plan = dataset.epoch_plan(epoch);
    CHECK(dataset.batches_in_epoch(epoch) == static_cast<int64_t>(plan.size()));
    std::vector<int> seen(n, 0);
    int64_t padded = 0, fewest_rows = n, most_rows = 0;
    for (const std::vector<size_t>& indices : plan) {
      Batch batch = dataset.make_batch(indices);
      const int64_t size = batch.encoder_input.size(0) * std::max(batch.encoder_input.size(1), batch.decoder_input.size(1));
      CHECK(size <= max_tokens);
      padded += size;
      fewest_rows = std::min(fewest_rows, batch.encoder_input.size(0));
      most_rows = std::max(most_rows, batch.encoder_input.size(0));
      for (size_t i : indices) ++seen[i];
    }
    CHECK(std::all_of(seen.begin(), seen.end(), [](int k) { return k == 1; }));
    // Filled: on average over 85% of max_tokens (batches of a fixed count of
    // pairs would hold from 3 to 32 positions a row).
    CHECK(padded > 0.85 * max_tokens * static_cast<double>(plan.size()));
    CHECK(most_rows >= 3 * fewest_rows);
  }
  // batch_size still caps the rows; without bucketing every row is seq_len wide.
  BatchedDataset capped(examples_of_many_lengths(n),
                        {.batch_size = 8, .seq_len = 40, .bucket = true, .seed = 7, .max_tokens = max_tokens});
  for (const std::vector<size_t>& indices : capped.epoch_plan(0)) CHECK(indices.size() <= 8);
  BatchedDataset fixed(examples_of_many_lengths(n),
                       {.batch_size = 1000, .seq_len = 40, .bucket = false, .seed = 7, .max_tokens = max_tokens});
  CHECK(fixed.batches_in_epoch(0) == 100);  // 10 rows of 40 each
  CHECK_THROWS_AS(BatchedDataset(examples_of_many_lengths(3), {.seq_len = 40, .max_tokens = 39}), InternalError);
}

TEST_CASE("data: epoch order is a function of (seed, epoch); resuming at batch k continues it") {
  for (bool bucket : {false, true}) {
    CAPTURE(bucket);
    BatchOptions options{.batch_size = 10, .seq_len = 40, .bucket = bucket, .seed = 3};
    BatchedDataset a(examples_of_many_lengths(95), options), b(examples_of_many_lengths(95), options);
    CHECK(a.epoch_plan(4) == b.epoch_plan(4));
    CHECK(a.epoch_plan(4) != a.epoch_plan(5));
    options.seed = 4;
    CHECK(BatchedDataset(examples_of_many_lengths(95), options).epoch_plan(4) != a.epoch_plan(4));
    // Nine full batches and one with the remaining 5 (bucketing shuffles where it goes).
    std::vector<size_t> sizes;
    for (const auto& batch : a.epoch_plan(0)) sizes.push_back(batch.size());
    std::sort(sizes.begin(), sizes.end());
    CHECK(sizes == std::vector<size_t>{5, 10, 10, 10, 10, 10, 10, 10, 10, 10});

    // A run interrupted after 6 batches resumes with exactly the remaining ones.
    std::vector<std::vector<size_t>> plan = a.epoch_plan(2);
    EpochBatches resumed(b, 2, 6);
    CHECK(resumed.position() == 6);
    for (size_t k = 6; k < plan.size(); ++k) CHECK(resumed.next().indices == plan[k]);
    CHECK(resumed.done());
    CHECK_THROWS_AS(resumed.next(), InternalError);
    CHECK_THROWS_AS(EpochBatches(a, 2, 11), Error);
  }
  // Without shuffling (validation) the order is the input order.
  BatchedDataset valid(examples_of_many_lengths(5), {.batch_size = 2, .seq_len = 40, .shuffle = false});
  CHECK(valid.epoch_plan(9) == std::vector<std::vector<size_t>>{{0, 1}, {2, 3}, {4}});
}

TEST_CASE("data: framing a source, a decoder input and labels, padded to a length") {
  const int32_t P = kPadId, SOS = kSosId, EOS = kEosId;
  CHECK(frame_source({7, 8}, 6) == std::vector<int32_t>{SOS, 7, 8, EOS, P, P});
  CHECK(frame_decoder_input({7, 8}, 4) == std::vector<int32_t>{SOS, 7, 8, P});
  CHECK(frame_labels({7, 8}, 4) == std::vector<int32_t>{7, 8, EOS, P});
  CHECK(frame_sources({{7}, {7, 8, 9}}).to_int_vector() ==
        std::vector<int32_t>{SOS, 7, EOS, P, P, SOS, 7, 8, 9, EOS});
  CHECK_THROWS_WITH_AS(frame_source({7, 8}, 3), doctest::Contains("do not fit"), InternalError);
}

TEST_CASE("data: framing's masks keep (1) what a query may attend to") {
  Tensor tokens = Tensor::from_ints({2, 5, 6, 1, 1, 2, 7, 1, 1, 1}, {2, 5});
  Tensor enc = encoder_keep_mask(tokens);
  CHECK(enc.shape() == Shape{2, 1, 1, 5});
  CHECK(enc.to_int_vector() == std::vector<int32_t>{1, 1, 1, 0, 0, 1, 1, 0, 0, 0});

  Tensor dec = decoder_keep_mask(tokens);
  CHECK(dec.shape() == Shape{2, 1, 5, 5});
  std::vector<int32_t> first = {1, 0, 0, 0, 0,  //
                                1, 1, 0, 0, 0,  //
                                1, 1, 1, 0, 0,  //
                                1, 1, 1, 0, 0,  // key 3 is [PAD]
                                1, 1, 1, 0, 0};
  std::vector<int32_t> got = dec.to_int_vector();
  CHECK(std::vector<int32_t>(got.begin(), got.begin() + 25) == first);

  // Two new queries at positions 3 and 4 of 5 keys.
  CHECK(causal_keep_mask(2, 5).to_int_vector() == std::vector<int32_t>{1, 1, 1, 1, 0, 1, 1, 1, 1, 1});
}
