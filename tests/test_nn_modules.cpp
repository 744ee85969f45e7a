// nn modules one at a time: parameter names, initialisation, hand-checked
// values, masks, and a finite-difference gradient check through each module.
#include <cmath>

#include "base/error.h"
#include "gradcheck.h"
#include "nn/transformer.h"
#include "test_nn_helpers.h"

using namespace sf;
using namespace sf::nn;
using doctest::Approx;
using sf::testing::check_gradients;
using sf::testing::random_tensor;
using V = std::vector<Tensor>;

// Inputs followed by the module's parameters, so check_gradients perturbs both
// (the handles share storage with the module's own).
static V with_parameters(V inputs, const Module& m) {
  for (const Tensor& p : m.parameters()) inputs.push_back(p);
  return inputs;
}

// ReLU's kink breaks central differences when a pre-activation lies within the
// step of 0, so checks through a feed-forward block take a smaller step.
constexpr float kReluStep = 1e-3f;

// Dropout p = 0.2 in training mode, replayed identically on every call of the
// checked function, so the check covers the gradient through dropout too.
struct ReplayedNoise {
  Rng rng{7};
  Rng::State start = rng.state();
  void rewind() { rng.set_state(start); }
};

static std::vector<std::string> expected_state_dict_names(int64_t N) {
  std::vector<std::string> names;
  auto linear = [&](const std::string& prefix) {
    names.push_back(prefix + ".weight");
    names.push_back(prefix + ".bias");
  };
  auto attention = [&](const std::string& prefix) {
    for (const char* w : {"w_q", "w_k", "w_v", "w_o"}) linear(prefix + "." + w);
  };
  auto norm = [&](const std::string& prefix) {
    names.push_back(prefix + ".alpha");
    names.push_back(prefix + ".bias");
  };
  for (const std::string stack : {"encoder", "decoder"}) {
    int residuals = stack == "encoder" ? 2 : 3;
    for (int64_t i = 0; i < N; ++i) {
      std::string layer = stack + ".layers." + std::to_string(i);
      attention(layer + ".self_attention_block");
      if (stack == "decoder") attention(layer + ".cross_attention_block");
      linear(layer + ".feed_forward_block.linear_1");
      linear(layer + ".feed_forward_block.linear_2");
      for (int r = 0; r < residuals; ++r)
        norm(layer + ".residual_connections." + std::to_string(r) + ".norm");
    }
    norm(stack + ".norm");
  }
  names.insert(names.end(), {"src_embed.embedding.weight", "tgt_embed.embedding.weight",
                             "src_pos.pe", "tgt_pos.pe"});
  linear("projection_layer.proj");
  return names;
}

TEST_CASE("nn: state dict names, order and shapes are PyTorch's") {
  TransformerConfig c = testing::tiny_config();
  auto model = testing::tiny_model(c);
  NamedTensors state = model->state_dict();
  std::vector<std::string> names;
  for (const auto& [name, t] : state) names.push_back(name);
  CHECK(names == expected_state_dict_names(c.N));

  auto shape_of = [&](const std::string& name) {
    for (const auto& [n, t] : state)
      if (n == name) return t.shape();
    FAIL("no tensor ", name);
    return Shape{};
  };
  CHECK(shape_of("src_embed.embedding.weight") == Shape{13, 8});
  CHECK(shape_of("tgt_embed.embedding.weight") == Shape{11, 8});
  CHECK(shape_of("src_pos.pe") == Shape{1, 24, 8});
  CHECK(shape_of("encoder.layers.1.self_attention_block.w_o.weight") == Shape{8, 8});
  CHECK(shape_of("decoder.layers.0.cross_attention_block.w_k.bias") == Shape{8});
  CHECK(shape_of("decoder.layers.1.feed_forward_block.linear_1.weight") == Shape{16, 8});
  CHECK(shape_of("decoder.layers.1.feed_forward_block.linear_2.weight") == Shape{8, 16});
  CHECK(shape_of("decoder.layers.0.residual_connections.2.norm.alpha") == Shape{8});
  CHECK(shape_of("projection_layer.proj.weight") == Shape{11, 8});
  CHECK(shape_of("projection_layer.proj.bias") == Shape{11});

  // Buffers are in the state dict but are not parameters.
  NamedTensors buffers = model->named_buffers();
  REQUIRE(buffers.size() == 2);
  CHECK(buffers[0].first == "src_pos.pe");
  CHECK(!buffers[0].second.requires_grad());
  CHECK(model->named_parameters().size() == state.size() - 2);
}

TEST_CASE("nn: parameter count matches the formula") {
  TransformerConfig c = testing::tiny_config();
  auto model = testing::tiny_model(c);
  int64_t d = c.d_model, f = c.d_ff;
  int64_t attention = 4 * (d * d + d), ffn = d * f + f + f * d + d, norm = 2 * d;
  int64_t expect = c.N * (attention + ffn + 2 * norm) + c.N * (2 * attention + ffn + 3 * norm) +
                   2 * norm + c.src_vocab_size * d + c.tgt_vocab_size * d +
                   (c.tgt_vocab_size * d + c.tgt_vocab_size);
  CHECK(model->num_parameters() == expect);
}

TEST_CASE("nn: build_transformer initialises Xavier-uniform, deterministically") {
  auto model = testing::tiny_model();
  for (const auto& named : model->named_parameters()) {  // (no bindings: clang before 16 cannot capture them)
    const auto& name = named.first;
    const auto& p = named.second;
    CAPTURE(name);
    std::vector<float> v = p.to_vector();
    if (p.ndim() >= 2) {
      // Xavier-uniform: |w| <= sqrt(6 / (fan_in + fan_out)).
      float bound = std::sqrt(6.0f / static_cast<float>(p.size(0) + p.size(1)));
      for (float x : v) CHECK(std::fabs(x) <= bound);
    } else if (name.ends_with("alpha")) {
      for (float x : v) CHECK(x == 1.0f);
    } else if (name.ends_with("norm.bias")) {
      for (float x : v) CHECK(x == 0.0f);
    } else {
      // A Linear bias: U(-1/sqrt(in), 1/sqrt(in)), in = the weight's columns.
      CHECK(name.ends_with(".bias"));
      int64_t in = name.starts_with("encoder") || name.starts_with("decoder")
                       ? (name.find("linear_2") != std::string::npos ? 16 : 8)
                       : 8;
      float bound = 1.0f / std::sqrt(static_cast<float>(in));
      for (float x : v) CHECK(std::fabs(x) <= bound);
    }
  }
  auto same = testing::tiny_model(testing::tiny_config(), 42);
  auto other = testing::tiny_model(testing::tiny_config(), 43);
  Tensor w = model->encoder.layers[0].self_attention_block.w_q.weight;
  CHECK(w.to_vector() == same->encoder.layers[0].self_attention_block.w_q.weight.to_vector());
  CHECK(w.to_vector() != other->encoder.layers[0].self_attention_block.w_q.weight.to_vector());
}

TEST_CASE("nn: positional encoding rows 0 and 1 by hand") {
  Rng noise(1);
  PositionalEncoding pos(8, 5, 0.0f, noise);
  std::vector<float> pe = pos.pe.to_vector();
  // Position 0: sin(0) = 0 on even dims, cos(0) = 1 on odd dims.
  for (int i = 0; i < 8; ++i) CHECK(pe[i] == (i % 2 == 0 ? 0.0f : 1.0f));
  // Position 1: angles 1 / 10000^(2i/8) = 1, 0.1, 0.01, 0.001.
  std::vector<float> row1 = {0.84147098f, 0.54030231f, 0.09983342f, 0.99500417f,
                             0.00999983f, 0.99995000f, 0.00099999983f, 0.9999995f};
  for (int i = 0; i < 8; ++i) {
    CAPTURE(i);
    CHECK(pe[8 + i] == Approx(row1[i]).epsilon(1e-6));
  }
  // forward adds rows start.. to x.
  Tensor x = Tensor::zeros({1, 2, 8});
  Tensor y = pos.forward(x, 1);
  for (int i = 0; i < 8; ++i) CHECK(y.data()[i] == pe[8 + i]);
  CHECK_THROWS_AS(pos.forward(x, 4), InternalError);  // positions 4, 5 of a 5-row table
}

TEST_CASE("nn: layer normalization of [1, 2, 3, 4] by hand") {
  LayerNormalization norm(4);
  // mean 2.5, unbiased std sqrt(5/3) = 1.29099445; eps is added to the std.
  Tensor y = norm.forward(Tensor::from({1, 2, 3, 4}, {1, 4}));
  double s = std::sqrt(5.0 / 3.0) + 1e-6;
  std::vector<double> expect = {-1.5 / s, -0.5 / s, 0.5 / s, 1.5 / s};
  for (int i = 0; i < 4; ++i) CHECK(y.data()[i] == Approx(expect[i]).epsilon(1e-6));
  CHECK(y.data()[3] == Approx(1.16189410).epsilon(1e-6));
  // alpha scales and bias shifts each feature.
  std::copy_n(std::vector<float>{2, 2, 1, 1}.data(), 4, norm.alpha.data());
  std::copy_n(std::vector<float>{0, 1, 0, 1}.data(), 4, norm.bias.data());
  y = norm.forward(Tensor::from({1, 2, 3, 4}, {1, 4}));
  CHECK(y.data()[0] == Approx(2 * expect[0]).epsilon(1e-6));
  CHECK(y.data()[1] == Approx(2 * expect[1] + 1).epsilon(1e-6));
  CHECK(y.data()[3] == Approx(expect[3] + 1).epsilon(1e-6));
}

// Both linears the identity without bias, no dropout: the block is its
// activation. GELU's values are PyTorch's gelu(x, approximate='tanh'),
// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) worked out in double.
TEST_CASE("nn: feed-forward block with gelu or relu, by hand") {
  const std::vector<float> x = {1, -1, 2, 0.5f, -3, 0};
  const double gelu_of_x[] = {0.8411919906082768, -0.15880800939172324, 1.954597694087775,
                              0.34571400982514394, -0.0036373920817729943, 0};
  for (Activation activation : {Activation::Gelu, Activation::Relu}) {
    Rng init(1), noise(2);
    FeedForwardBlock ffn(2, 2, 0.0f, init, noise, activation);
    for (Linear* linear : {&ffn.linear_1, &ffn.linear_2}) {
      std::copy_n(std::vector<float>{1, 0, 0, 1}.data(), 4, linear->weight.data());
      std::copy_n(std::vector<float>{0, 0}.data(), 2, linear->bias.data());
    }
    Tensor y = ffn.forward(Tensor::from(x, {3, 2}));
    for (int i = 0; i < 6; ++i) {
      const double want = activation == Activation::Gelu ? gelu_of_x[i] : std::max(0.0f, x[i]);
      CHECK(y.data()[i] == Approx(want).epsilon(1e-6));
    }
  }
  CHECK(activation_named("gelu") == Activation::Gelu);
  CHECK_FALSE(activation_named("swish").has_value());
}

TEST_CASE("nn: attention gives masked (padding) keys zero weight") {
  Rng init(3), noise(4);
  MultiHeadAttentionBlock attention(8, 2, 0.1f, init, noise);
  attention.eval();
  Tensor q = random_tensor({1, 3, 8}, 10), kv = random_tensor({1, 4, 8}, 11);
  Tensor mask = data::encoder_keep_mask(Tensor::from_ints({5, 6, 1, 1}, {1, 4}));
  std::vector<Tensor> seen;
  attention.weights_hook = [&](const Tensor& weights) { seen.push_back(weights); };
  Tensor out = attention.forward(q, kv, kv, mask);
  Tensor w = seen.at(0);
  REQUIRE(w.shape() == Shape{1, 2, 3, 4});
  for (int64_t row = 0; row < 6; ++row) {
    const float* p = w.data() + row * 4;
    CHECK(p[2] == 0.0f);
    CHECK(p[3] == 0.0f);
    CHECK(p[0] + p[1] == Approx(1.0f));
    CHECK(p[0] > 0.0f);
  }
  // So the padded positions' contents cannot change the result.
  Tensor changed = kv.clone();
  for (int64_t i = 2 * 8; i < 4 * 8; ++i) changed.data()[i] += 5.0f;
  CHECK(attention.forward(q, changed, changed, mask).to_vector() == out.to_vector());
}

TEST_CASE("nn: attention shows its weights to its hook, once per call, detached") {
  Rng init(3), noise(4);
  MultiHeadAttentionBlock attention(8, 2, 0.1f, init, noise);
  Tensor x = random_tensor({1, 3, 8}, 10).set_requires_grad();
  std::vector<Tensor> seen;
  attention.forward(x, x, x, Tensor());  // no hook: nothing to see, nothing kept
  attention.weights_hook = [&](const Tensor& weights) { seen.push_back(weights); };
  attention.forward(x, x, x, Tensor());  // training mode, with a gradient
  attention.eval();
  attention.forward(x, x, x, Tensor());
  REQUIRE(seen.size() == 2);
  CHECK_FALSE(seen[0].requires_grad());
  CHECK(seen[1].shape() == Shape{1, 2, 3, 3});
}

TEST_CASE("nn: causal mask hides the future") {
  Rng init(5), noise(6);
  MultiHeadAttentionBlock attention(8, 2, 0.0f, init, noise);
  Tensor x = random_tensor({1, 4, 8}, 12);
  Tensor mask = data::decoder_keep_mask(Tensor::from_ints({2, 5, 6, 7}, {1, 4}));
  std::vector<Tensor> seen;
  attention.weights_hook = [&](const Tensor& weights) { seen.push_back(weights); };
  Tensor out = attention.forward(x, x, x, mask);
  Tensor w = seen.at(0);
  for (int64_t head = 0; head < 2; ++head)
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t j = 0; j < 4; ++j) {
        float p = w.data()[(head * 4 + i) * 4 + j];
        if (j > i) CHECK(p == 0.0f);
        else CHECK(p > 0.0f);
      }
  // Changing the last position changes no earlier output.
  Tensor changed = x.clone();
  for (int64_t i = 3 * 8; i < 4 * 8; ++i) changed.data()[i] -= 3.0f;
  Tensor again = attention.forward(changed, changed, changed, mask);
  for (int64_t i = 0; i < 3 * 8; ++i) CHECK(again.data()[i] == out.data()[i]);
  CHECK(again.data()[3 * 8] != out.data()[3 * 8]);
}

TEST_CASE("nn: dropout is active in training mode only, and draws from the model's generator") {
  auto model = testing::tiny_model();
  FeedForwardBlock& ffn = model->encoder.layers[0].feed_forward_block;
  Tensor x = random_tensor({2, 3, 8}, 13);
  CHECK(model->is_training());
  Rng::State before = model->dropout_rng().state();
  Tensor a = ffn.forward(x), b = ffn.forward(x);
  CHECK(a.to_vector() != b.to_vector());
  CHECK(model->dropout_rng().state() != before);

  model->eval();
  CHECK(!ffn.is_training());
  CHECK(!model->decoder.layers[1].residual_connections[2].dropout.is_training());
  before = model->dropout_rng().state();
  CHECK(ffn.forward(x).to_vector() == ffn.forward(x).to_vector());
  CHECK(model->dropout_rng().state() == before);
  model->train();
  CHECK(model->tgt_pos.dropout.is_training());
}

TEST_CASE("grad: Linear, InputEmbeddings and ProjectionLayer") {
  Rng init(20);
  Linear linear(4, 3, init);
  check_gradients([&](const V& x) { return linear.forward(x[0]); },
                  with_parameters({random_tensor({2, 3, 4}, 21)}, linear));

  InputEmbeddings embed(6, 5, init);
  Tensor ids = Tensor::from_ints({0, 4, 4, 1, 2, 0}, {2, 3});
  check_gradients([&](const V&) { return embed.forward(ids); }, with_parameters({}, embed));

  ProjectionLayer projection(6, 5, init);
  check_gradients([&](const V& x) { return projection.forward(x[0]); },
                  with_parameters({random_tensor({2, 3, 6}, 22)}, projection));
}

TEST_CASE("grad: PositionalEncoding and LayerNormalization") {
  ReplayedNoise noise;
  PositionalEncoding pos(6, 5, 0.2f, noise.rng);
  check_gradients(
      [&](const V& x) {
        noise.rewind();
        return pos.forward(x[0], 1);
      },
      {random_tensor({2, 3, 6}, 23)});

  Rng init(24);
  LayerNormalization norm(6);
  norm.alpha.data()[0] = 0.5f;
  norm.bias.data()[1] = -0.3f;
  check_gradients([&](const V& x) { return norm.forward(x[0]); },
                  with_parameters({random_tensor({2, 3, 6}, 25)}, norm));
}

TEST_CASE("grad: FeedForwardBlock and ResidualConnection") {
  ReplayedNoise noise;
  Rng init(26);
  FeedForwardBlock ffn(6, 10, 0.2f, init, noise.rng);
  check_gradients(
      [&](const V& x) {
        noise.rewind();
        return ffn.forward(x[0]);
      },
      with_parameters({random_tensor({2, 3, 6}, 127)}, ffn), kReluStep);

  FeedForwardBlock gelu_ffn(6, 10, 0.2f, init, noise.rng, Activation::Gelu);
  check_gradients(
      [&](const V& x) {
        noise.rewind();
        return gelu_ffn.forward(x[0]);
      },
      with_parameters({random_tensor({2, 3, 6}, 128)}, gelu_ffn));

  ResidualConnection residual(6, 0.2f, noise.rng);
  check_gradients(
      [&](const V& x) {
        noise.rewind();
        return residual.forward(x[0], [](const Tensor& z) { return tanh(z); });
      },
      with_parameters({random_tensor({2, 3, 6}, 28)}, residual));
}

TEST_CASE("grad: MultiHeadAttentionBlock with a padding mask") {
  ReplayedNoise noise;
  Rng init(29);
  MultiHeadAttentionBlock attention(8, 2, 0.2f, init, noise.rng);
  Tensor mask = data::encoder_keep_mask(Tensor::from_ints({4, 5, 6, 1, 4, 1, 1, 1}, {2, 4}));
  check_gradients(
      [&](const V& x) {
        noise.rewind();
        return attention.forward(x[0], x[1], x[2], mask);
      },
      with_parameters({random_tensor({2, 3, 8}, 30), random_tensor({2, 4, 8}, 31),
                       random_tensor({2, 4, 8}, 32)},
                      attention));
}

TEST_CASE("grad: EncoderBlock and Encoder") {
  ReplayedNoise noise;
  Rng init(33);
  TransformerConfig c = testing::tiny_config();
  c.N = 1;
  Tensor mask = data::encoder_keep_mask(Tensor::from_ints({4, 5, 6, 1, 4, 1, 1, 1}, {2, 4}));
  EncoderBlock block(c, init, noise.rng);
  check_gradients(
      [&](const V& x) {
        noise.rewind();
        return block.forward(x[0], mask);
      },
      with_parameters({random_tensor({2, 4, 8}, 34)}, block), kReluStep);

  Encoder encoder(c, init, noise.rng);
  check_gradients(
      [&](const V& x) {
        noise.rewind();
        return encoder.forward(x[0], mask);
      },
      with_parameters({random_tensor({2, 4, 8}, 35)}, encoder), kReluStep);
}

TEST_CASE("grad: DecoderBlock and Decoder") {
  ReplayedNoise noise;
  Rng init(36);
  TransformerConfig c = testing::tiny_config();
  c.N = 1;
  Tensor src_mask = data::encoder_keep_mask(Tensor::from_ints({4, 5, 6, 1, 4, 1, 1, 1}, {2, 4}));
  Tensor tgt_mask = data::decoder_keep_mask(Tensor::from_ints({2, 5, 6, 2, 6, 1}, {2, 3}));
  DecoderBlock block(c, init, noise.rng);
  check_gradients(
      [&](const V& x) {
        noise.rewind();
        return block.forward(x[0], x[1], src_mask, tgt_mask);
      },
      with_parameters({random_tensor({2, 3, 8}, 137), random_tensor({2, 4, 8}, 138)}, block), kReluStep);

  Decoder decoder(c, init, noise.rng);
  check_gradients(
      [&](const V& x) {
        noise.rewind();
        return decoder.forward(x[0], x[1], src_mask, tgt_mask);
      },
      with_parameters({random_tensor({2, 3, 8}, 139), random_tensor({2, 4, 8}, 140)}, decoder), kReluStep);
}
