// The whole Transformer: gradients of the training loss, padding invariance,
// and incremental (KV-cache) decoding against full decoding.
#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "gradcheck.h"
#include "test_nn_helpers.h"

using namespace sf;
using namespace sf::nn;
using sf::testing::Batch;
using sf::testing::batch_loss;
using sf::testing::check_gradients;
using sf::testing::log_probs;
using sf::testing::make_batch;
using V = std::vector<Tensor>;

static const std::vector<std::vector<int32_t>> kSources = {{4, 5, 6, 7}, {8, 9, 10, 11, 12, 4, 5}};
static const std::vector<std::vector<int32_t>> kTargets = {{4, 5, 6}, {7, 8, 9, 10, 4, 5}};

TEST_CASE("grad: a 2-layer tiny Transformer's loss, through every parameter") {
  auto model = testing::tiny_model(testing::tiny_config(), 43);
  Batch batch = make_batch(kSources, kTargets, 8);
  // Training mode: dropout is replayed identically on every evaluation.
  Rng::State start = model->dropout_rng().state();
  // A step of 1e-3 keeps central differences clear of the ReLU kinks.
  check_gradients(
      [&](const V&) {
        model->dropout_rng().set_state(start);
        return batch_loss(*model, batch);
      },
      model->parameters(), 1e-3f);
}

// The training loss (batch_loss: label-smoothed cross-entropy over the
// non-[PAD] labels, as torch.nn.CrossEntropyLoss) from the same float32
// log-probs, summed in double, so that L(θ + εv) - L(θ - εv) is not lost to
// float32 rounding of the mean.
static double loss_in_double(Transformer& model, const Batch& batch, double smoothing = 0.1) {
  Tensor lp = log_softmax(log_probs(model, batch.src, batch.tgt));
  const std::vector<float> values = lp.to_vector();
  const std::vector<int32_t> labels = batch.label.to_int_vector();
  const int64_t vocab = lp.size(-1);
  double total = 0.0;
  int64_t scored = 0;
  for (size_t t = 0; t < labels.size(); ++t) {
    if (labels[t] == data::kPadId) continue;
    const float* row = values.data() + t * vocab;
    double all = 0.0;
    for (int64_t c = 0; c < vocab; ++c) all += row[c];
    total -= (1.0 - smoothing) * row[labels[t]] + smoothing / double(vocab) * all;
    ++scored;
  }
  return total / double(scored);
}

// The element-wise check above lets each gradient be 2% off. Along 16 random
// directions over all 3331 parameters the whole gradient must match central
// differences (step 5e-3) to 2e-3 of |g|/√n (gradcheck.h). Measured: worst
// 5.5e-4 in the release build (typical 3e-4), 7.4e-4 with SANITIZE=1; at step
// 2e-3 or 3e-3 the rounding noise reaches 1e-3, at 1e-2 a direction that
// crosses a ReLU kink is 4.6e-3 off. Along each tensor's own gradient the
// derivative must match to 1% of itself (step 1e-3; measured: worst 0.46%,
// in a query bias; at 5e-3 the attention's query and key weights, whose
// loss curves most, reach 4%). The key biases are left out: adding q·b_k to
// every score of a row leaves its softmax unchanged, so their gradient is
// zero in exact arithmetic.
static void check_loss_directions(Transformer& model) {
  Batch batch = make_batch(kSources, kTargets, 8);
  Rng::State start = model.dropout_rng().state();
  auto loss = [&] {
    model.dropout_rng().set_state(start);
    return batch_loss(model, batch);
  };
  auto precise_loss = [&] {
    model.dropout_rng().set_state(start);
    return loss_in_double(model, batch);
  };
  {
    NoGradGuard no_grad;
    CHECK(precise_loss() == doctest::Approx(loss().item()).epsilon(1e-6));
  }
  auto zero_in_exact_arithmetic = [](const std::string& name) { return name.ends_with("w_k.bias"); };
  testing::check_directional_derivatives(model.named_parameters(), loss, precise_loss, {16, 5e-3, 2e-3},
                                         {0, 1e-3, 1e-2}, zero_in_exact_arithmetic);
}

TEST_CASE("grad: a 2-layer tiny Transformer's loss along random directions over all parameters") {
  check_loss_directions(*testing::tiny_model(testing::tiny_config(), 43));
}

TEST_CASE("nn: padding to seq_len 10 or 20 gives the same loss and gradients") {
  auto model = testing::tiny_model();
  model->eval();  // dropout would draw different numbers for different shapes
  auto run = [&](int64_t length) {
    model->zero_grad();
    Tensor loss = batch_loss(*model, make_batch(kSources, kTargets, length));
    loss.backward();
    std::vector<std::vector<float>> grads;
    for (const Tensor& p : model->parameters()) grads.push_back(p.grad().to_vector());
    return std::make_pair(loss.item(), grads);
  };
  auto [loss10, grads10] = run(10);
  auto [loss20, grads20] = run(20);
  CHECK(std::fabs(loss10 - loss20) <= 1e-5f);
  NamedTensors params = model->named_parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    CAPTURE(params[i].first);
    int bad = 0;
    for (size_t j = 0; j < grads10[i].size(); ++j)
      if (std::fabs(grads10[i][j] - grads20[i][j]) > 1e-5f + 1e-4f * std::fabs(grads10[i][j])) ++bad;
    CHECK(bad == 0);
  }
}

// Full decoding of `tgt` [B, T] vs the cache fed `chunks` tokens at a time.
static void check_incremental(Transformer& model, const Tensor& src, const Tensor& tgt,
                              const std::vector<int64_t>& chunks) {
  NoGradGuard no_grad;
  Tensor full = log_probs(model, src, tgt);  // [B, T, V]
  Tensor src_mask = data::encoder_keep_mask(src);
  Tensor memory = model.encode(src, src_mask);
  DecoderCache cache = model.start_decoding(memory);
  int64_t position = 0;
  float worst = 0.0f;
  for (int64_t n : chunks) {
    Tensor mask = n > 1 ? data::causal_keep_mask(n, position + n) : Tensor();
    Tensor step = model.project(model.decode_next(cache, src_mask, slice(tgt, 1, position, position + n), mask));
    Tensor expect = slice(full, 1, position, position + n);
    REQUIRE(step.shape() == expect.shape());
    for (int64_t i = 0; i < step.numel(); ++i)
      worst = std::max(worst, std::fabs(step.data()[i] - expect.data()[i]));
    position += n;
  }
  CHECK(position == tgt.size(1));
  CHECK(cache.length == position);
  CHECK(worst <= 1e-5f);
}

TEST_CASE("nn: KV-cache decoding equals full decoding for 20 steps") {
  auto model = testing::tiny_model();
  model->eval();
  Tensor src = testing::pad_batch(kSources, 9);  // one row padded
  std::vector<int32_t> ids;
  for (int row = 0; row < 2; ++row) {
    ids.push_back(data::kSosId);
    for (int t = 1; t < 20; ++t) ids.push_back(4 + (row * 3 + t * 5) % 7);
  }
  Tensor tgt = Tensor::from_ints(ids, {2, 20});
  SUBCASE("one token per step") { check_incremental(*model, src, tgt, std::vector<int64_t>(20, 1)); }
  SUBCASE("a prefix of 7, then chunks of 1, 5 and 1") {
    std::vector<int64_t> chunks = {7, 1, 5};
    chunks.resize(10, 1);
    check_incremental(*model, src, tgt, chunks);
  }
  // Under a bf16 autocast the cache holds bf16 keys and values, which the
  // full pass rounds at the same point: the same log-probs still.
  SUBCASE("one token per step, bf16 autocast") {
    AutocastGuard autocast(DType::BF16);
    CHECK(model->start_decoding(model->encode(src, data::encoder_keep_mask(src))).layers[0].cross.keys.dtype() ==
          DType::BF16);
    check_incremental(*model, src, tgt, std::vector<int64_t>(20, 1));
  }
}

TEST_CASE("nn: decoding past tgt_seq_len is an error") {
  TransformerConfig c = testing::tiny_config();
  c.tgt_seq_len = 3;
  auto model = testing::tiny_model(c);
  NoGradGuard no_grad;
  Tensor src = testing::pad_batch({{4, 5}}, 2);
  DecoderCache cache = model->start_decoding(model->encode(src, data::encoder_keep_mask(src)));
  model->decode_next(cache, data::encoder_keep_mask(src), Tensor::from_ints({2, 4, 5}, {1, 3}), data::causal_keep_mask(3, 3));
  CHECK_THROWS_WITH_AS(model->decode_next(cache, data::encoder_keep_mask(src), Tensor::from_ints({6}, {1, 1})),
                       doctest::Contains("beyond seq_len 3"), InternalError);
}

// Post-norm (the paper's blocks): each sublayer's output is added to its
// input, then normalised; the stacks end without a norm of their own.
TEST_CASE("nn: post-norm blocks give norm(x + sublayer(x)); no final stack norm; the gradient along random directions") {
  nn::TransformerConfig c = testing::tiny_config();
  c.post_norm = true;
  auto model = testing::tiny_model(c, 43);
  for (const auto& entry : model->state_dict()) {
    CHECK(entry.first != "encoder.norm.alpha");
    CHECK(entry.first != "decoder.norm.alpha");
  }
  CHECK(static_cast<double>(model->num_parameters()) == parameter_count(c));
  CHECK(static_cast<double>(model->num_parameters()) == parameter_count(testing::tiny_config()) - 4 * c.d_model);

  // The encoder by hand: each block's two sublayers, each followed by its norm.
  model->eval();
  Tensor x = Tensor::from(std::vector<float>(2 * 3 * 8), {2, 3, 8});
  Rng rng(5);
  for (int64_t k = 0; k < x.numel(); ++k) x.data()[k] = static_cast<float>(rng.uniform()) - 0.5f;
  Tensor mask = Tensor::from_ints({1, 1, 1, 1, 1, 0}, {2, 1, 1, 3});  // the second sentence has 2 tokens
  Tensor want = x;
  for (size_t i = 0; i < model->encoder.layers.size(); ++i) {
    EncoderBlock& block = model->encoder.layers[i];
    want = block.residual_connections[0].norm.forward(
        want + block.self_attention_block.forward(want, want, want, mask));
    want = block.residual_connections[1].norm.forward(want + block.feed_forward_block.forward(want));
  }
  CHECK(model->encoder.forward(x, mask).to_vector() == want.to_vector());

  // The whole gradient along random directions, as for the pre-norm model
  // above (the same ops, composed in another order).
  model->train();
  check_loss_directions(*model);
}

// Tied embeddings: one matrix under three names, one parameter for the
// optimizer, whose gradient is the sum of what its three uses contribute.
TEST_CASE("nn: tied embeddings are one parameter under three names; its gradient sums the three uses") {
  nn::TransformerConfig c = testing::tiny_config();
  c.tgt_vocab_size = c.src_vocab_size;
  nn::TransformerConfig tied_config = c;
  tied_config.tie_embeddings = true;
  auto tied = testing::tiny_model(tied_config, 43), untied = testing::tiny_model(c, 43);
  const Tensor& matrix = tied->src_embed.embedding.weight;
  CHECK(tied->tgt_embed.embedding.weight.same_storage(matrix));
  CHECK(tied->projection_layer.proj.weight.same_storage(matrix));
  NamedTensors params = tied->named_parameters();
  CHECK(std::count_if(params.begin(), params.end(), [&](const auto& p) { return p.second.same_storage(matrix); }) == 1);
  CHECK(params.size() == untied->named_parameters().size() - 2);
  CHECK(static_cast<double>(tied->num_parameters()) == parameter_count(tied_config));
  CHECK(tied->state_dict().size() == untied->state_dict().size());

  // The untied model with the tied one's weights in all three places.
  untied->load_state_dict(tied->state_dict(), "tied");
  tied->eval();
  untied->eval();
  Batch batch = make_batch(kSources, kTargets, 8);
  run_backward(batch_loss(*tied, batch), Tensor::ones({}));
  run_backward(batch_loss(*untied, batch), Tensor::ones({}));
  std::vector<float> want = untied->src_embed.embedding.weight.grad().to_vector(),
                     tgt = untied->tgt_embed.embedding.weight.grad().to_vector(),
                     proj = untied->projection_layer.proj.weight.grad().to_vector(),
                     got = matrix.grad().to_vector();
  double worst = 0;
  for (size_t k = 0; k < want.size(); ++k)
    worst = std::max(worst, std::fabs(double(got[k]) - (double(want[k]) + tgt[k] + proj[k])));
  CHECK(worst < 1e-6);
  CHECK(std::any_of(tgt.begin(), tgt.end(), [](float g) { return g != 0; }));
  CHECK(std::any_of(proj.begin(), proj.end(), [](float g) { return g != 0; }));

  // A file whose three names disagree does not load into a tied model.
  NamedTensors edited = tied->state_dict();
  for (auto& [name, t] : edited)
    if (name == "tgt_embed.embedding.weight") t = t + 1.0f;
  CHECK_THROWS_WITH_AS(tied->load_state_dict(edited, "edited.safetensors"),
                       "edited.safetensors: tensors 'src_embed.embedding.weight' and 'tgt_embed.embedding.weight' "
                       "are one matrix in this model (tie_embeddings) but differ in the file",
                       Error);
  // Different vocabularies cannot share one matrix.
  tied_config.tgt_vocab_size = c.src_vocab_size + 1;
  CHECK_THROWS_WITH_AS(testing::tiny_model(tied_config), doctest::Contains("tie_embeddings: the source and target "
                                                                           "vocabularies differ (13 and 14 tokens)"),
                       Error);
}
