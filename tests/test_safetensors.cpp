// The safetensors reader/writer and model checkpoints: round trips are bit-exact
// and deterministic; damaged or mismatched files are rejected with an error
// naming the file and the tensor.
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>

#include "autograd/safetensors.h"
#include "base/error.h"
#include "nn/checkpoint.h"
#include "test_nn_helpers.h"

using namespace sf;
using sf::testing::TempDir;

static std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

static void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A file with the given header text and `data_bytes` zero bytes of data.
static void write_file(const std::string& path, const std::string& header, size_t data_bytes) {
  uint64_t n = header.size();
  std::string bytes(reinterpret_cast<const char*>(&n), 8);
  write_bytes(path, bytes + header + std::string(data_bytes, '\0'));
}

static bool same_bits(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.raw(), b.raw(), static_cast<size_t>(a.numel() * element_bytes(a.dtype()))) == 0;
}

TEST_CASE("safetensors: round trip is bit-identical, in order, with metadata") {
  TempDir dir;
  float inf = std::numeric_limits<float>::infinity();
  NamedTensors tensors = {
      {"weights", Tensor::from({1.5f, -0.0f, inf, -inf, 1e-40f, 3.14159265f}, {2, 3})},
      {"ids", Tensor::from_ints({7, -2, 2147483647}, {3})},
      {"scalar", Tensor::scalar(std::nanf(""))},
      {"empty", Tensor::zeros({0, 4})},
      {"a.b.c", Tensor::from({2.0f}, {1, 1, 1})}};
  safetensors::Metadata metadata = {{"d_model", "8"}, {"note", "x"}};
  std::string path = dir.file("t.safetensors");
  safetensors::save(path, tensors, metadata);

  safetensors::Contents back = safetensors::load(path);
  CHECK(back.metadata == metadata);
  REQUIRE(back.tensors.size() == tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    CAPTURE(tensors[i].first);
    CHECK(back.tensors[i].first == tensors[i].first);
    CHECK(same_bits(back.tensors[i].second, tensors[i].second));
  }
  CHECK(safetensors::load_metadata(path) == metadata);

  // The layout: 8-byte little-endian header length, JSON, 8-byte aligned data.
  std::string bytes = read_bytes(path);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  CHECK(n % 8 == 0);
  CHECK(bytes[8] == '{');
  CHECK(bytes.substr(8, 15) == "{\"__metadata__\"");
  CHECK(bytes.size() == 8 + n + (6 + 3 + 1 + 0 + 1) * 4);
  // Same tensors, same bytes; no temporary file left behind.
  safetensors::save(dir.file("u.safetensors"), tensors, metadata);
  CHECK(read_bytes(dir.file("u.safetensors")) == bytes);
  CHECK(!std::filesystem::exists(path + ".tmp"));
}

TEST_CASE("safetensors: saving rejects repeated and reserved names") {
  TempDir dir;
  Tensor t = Tensor::zeros({2});
  CHECK_THROWS_WITH_AS(safetensors::save(dir.file("x"), {{"a", t}, {"a", t}}),
                       doctest::Contains("'a'"), InternalError);
  CHECK_THROWS_AS(safetensors::save(dir.file("x"), {{"__metadata__", t}}), InternalError);
  CHECK(!std::filesystem::exists(dir.file("x")));
}

TEST_CASE("safetensors: damaged files are rejected, naming the file and tensor") {
  TempDir dir;
  std::string path = dir.file("bad.safetensors");
  auto rejects = [&](const std::string& fragment) {
    CAPTURE(fragment);
    try {
      safetensors::load(path);
      FAIL("loaded a damaged file");
    } catch (const Error& e) {
      std::string message = e.what();
      CAPTURE(message);
      CHECK(message.starts_with(path + ": "));
      CHECK(message.find(fragment) != std::string::npos);
    }
  };
  // A valid file, then damaged copies of it.
  safetensors::save(path, {{"first", Tensor::zeros({2, 3})}, {"second", Tensor::zeros({4})}});
  std::string good = read_bytes(path);

  write_bytes(path, good.substr(0, good.size() - 4));
  rejects("tensor 'second': data_offsets [24,40] go past the end of the data");
  write_bytes(path, good.substr(0, 30));
  rejects("header length");
  write_bytes(path, good.substr(0, 5));
  rejects("too short");
  write_bytes(path, good + "xx");
  rejects("the tensors hold 40 bytes but the file has 42");

  std::string altered = good;
  altered.replace(altered.find("F32"), 3, "F16");
  write_bytes(path, altered);
  rejects("tensor 'first': dtype \"F16\" is not supported");
  altered = good;
  altered.replace(altered.find("[2,3]"), 5, "[3,3]");
  write_bytes(path, altered);
  rejects("tensor 'first': shape [3, 3] needs 36 bytes but data_offsets [0,24] hold 24");
  altered = good;
  altered[9] = 'x';
  write_bytes(path, altered);
  rejects("not valid JSON");

  write_file(path, R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                   R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})", 12);
  rejects("tensor 'b': data starts at byte 8, expected 4");
  write_file(path, R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                   R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8);
  rejects("data starts at byte 4, expected 8");
  write_file(path, R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4);
  rejects("tensor 'a': shape [-1]");
  write_file(path, R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})", 4);
  rejects("larger than the whole file");
  write_file(path, R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}})", 4);
  rejects("end before they begin");
  write_file(path, R"({"a":{"dtype":"F32","shape":[1]}})", 4);
  rejects("needs dtype, shape and data_offsets");
  write_file(path, R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1}})", 4);
  rejects("unexpected field 'x'");
  write_file(path, R"({"__metadata__":{"k":3}})", 0);
  rejects("__metadata__ value of 'k' is not a string");
  write_file(path, R"([1,2])", 0);
  rejects("not a JSON object");
  CHECK_THROWS_WITH_AS(safetensors::load(dir.file("missing")), doctest::Contains("cannot open"),
                       Error);
}

TEST_CASE("checkpoint: save -> load is bit-identical and gives the same log-probs") {
  TempDir dir;
  auto model = testing::tiny_model(testing::tiny_config(), 1);
  auto other = testing::tiny_model(testing::tiny_config(), 2);
  std::string path = dir.file("tmodel_00.safetensors");
  nn::save_checkpoint(*model, path);
  nn::load_checkpoint(*other, path);
  NamedTensors a = model->state_dict(), b = other->state_dict();
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    CAPTURE(a[i].first);
    CHECK(same_bits(a[i].second, b[i].second));
  }
  model->eval();
  other->eval();
  Tensor src = testing::pad_batch({{4, 5, 6}, {7, 8}}, 4);
  Tensor tgt = testing::pad_batch({{2, 4, 5}, {2, 6, 7}}, 3);
  CHECK(same_bits(testing::log_probs(*model, src, tgt), testing::log_probs(*other, src, tgt)));

  // The file's order is the state dict's, and its metadata describes the model.
  safetensors::Contents contents = safetensors::load(path);
  for (size_t i = 0; i < a.size(); ++i) CHECK(contents.tensors[i].first == a[i].first);
  CHECK(contents.metadata == safetensors::Metadata{{"N", "2"},
                                                   {"activation", "relu"},
                                                   {"d_ff", "16"},
                                                   {"d_model", "8"},
                                                   {"h", "2"},
                                                   {"norm", "pre"},
                                                   {"seq_len", "24"},
                                                   {"src_vocab_size", "13"},
                                                   {"tgt_vocab_size", "11"},
                                                   {"tie_embeddings", "false"}});
  nn::TransformerConfig config = nn::read_checkpoint_config(path);
  CHECK(config.d_model == 8);
  CHECK(config.N == 2);
  CHECK(config.h == 2);
  CHECK(config.d_ff == 16);
  CHECK(config.src_seq_len == 24);
  CHECK(config.tgt_seq_len == 24);
  CHECK(config.src_vocab_size == 13);
  CHECK(config.tgt_vocab_size == 11);
  // Saving again gives the same bytes.
  nn::save_checkpoint(*other, dir.file("again.safetensors"));
  CHECK(read_bytes(dir.file("again.safetensors")) == read_bytes(path));
}

TEST_CASE("checkpoint: a file for another model is rejected, naming the tensor") {
  TempDir dir;
  std::string path = dir.file("m.safetensors");
  nn::TransformerConfig c = testing::tiny_config();
  nn::save_checkpoint(*testing::tiny_model(c), path);

  nn::TransformerConfig wider = c;
  wider.d_ff = 32;
  auto model = testing::tiny_model(wider);
  std::vector<float> before = model->encoder.layers[0].self_attention_block.w_q.weight.to_vector();
  CHECK_THROWS_WITH_AS(nn::load_checkpoint(*model, path),
                       doctest::Contains(": has d_ff 16, the model it is loaded into 32"), Error);
  CHECK(model->encoder.layers[0].self_attention_block.w_q.weight.to_vector() == before);

  nn::TransformerConfig heads = c;
  heads.h = 4;  // the same shapes: only the metadata tells
  CHECK_THROWS_WITH_AS(nn::load_checkpoint(*testing::tiny_model(heads), path),
                       doctest::Contains(": has h 2, the model it is loaded into 4"), Error);

  // Without metadata (as exported from PyTorch) the shapes are checked.
  NamedTensors tensors = safetensors::load(path).tensors;
  safetensors::save(path, tensors);
  std::string expect = path + ": tensor 'encoder.layers.0.feed_forward_block.linear_1.weight'" +
                       " has shape [16, 8], the model needs [32, 8]";
  CHECK_THROWS_WITH_AS(nn::load_checkpoint(*model, path), doctest::Contains(expect.c_str()), Error);
  nn::load_checkpoint(*testing::tiny_model(c), path);  // loads fine into the right model

  NamedTensors missing(tensors.begin(), tensors.end() - 1);
  safetensors::save(path, missing);
  CHECK_THROWS_WITH_AS(nn::load_checkpoint(*testing::tiny_model(c), path),
                       doctest::Contains("tensor 'projection_layer.proj.bias' is missing"), Error);
  NamedTensors extra = tensors;
  extra.emplace_back("encoder.layers.2.norm.alpha", Tensor::ones({8}));
  safetensors::save(path, extra);
  CHECK_THROWS_WITH_AS(nn::load_checkpoint(*testing::tiny_model(c), path),
                       doctest::Contains("unexpected tensor 'encoder.layers.2.norm.alpha'"), Error);
  NamedTensors wrong_dtype = tensors;
  wrong_dtype[0].second = Tensor::zeros(wrong_dtype[0].second.shape(), DType::I32);
  safetensors::save(path, wrong_dtype);
  CHECK_THROWS_WITH_AS(nn::load_checkpoint(*testing::tiny_model(c), path),
                       doctest::Contains("is int32, the model needs float32"), Error);
}

// bf16 values as a tensor: `values` rounded to nearest even.
static Tensor bf16_tensor(const std::vector<float>& values, const Shape& shape) {
  return to_dtype(Tensor::from(values, shape), DType::BF16);
}

TEST_CASE("safetensors: BF16 round trip is bit-identical, 2 bytes a value, little-endian") {
  TempDir dir;
  float inf = std::numeric_limits<float>::infinity();
  // 1.0 is 0x3F80; 1 + 2^-8 is a tie rounded to even (1.0); 1 + 3·2^-8 one
  // rounded up (0x3F82); -0, the infinities, NaN and a subnormal keep their kind.
  NamedTensors tensors = {{"w", bf16_tensor({1.0f, 1.00390625f, 1.01171875f, -0.0f, inf, -inf}, {2, 3})},
                          {"nan", bf16_tensor({std::nanf(""), 1e-40f}, {2})},
                          {"ids", Tensor::from_ints({7}, {1})}};
  std::string path = dir.file("b.safetensors");
  safetensors::save(path, tensors);
  safetensors::Contents back = safetensors::load(path);
  REQUIRE(back.tensors.size() == tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    CAPTURE(tensors[i].first);
    CHECK(back.tensors[i].first == tensors[i].first);
    CHECK(same_bits(back.tensors[i].second, tensors[i].second));
  }
  CHECK(std::isnan(back.tensors[1].second.to_vector()[0]));
  CHECK(back.tensors[1].second.to_vector()[1] == kernels::round_to_bf16(1e-40f));

  std::string bytes = read_bytes(path);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  std::string header = bytes.substr(8, n);
  CHECK(header.find(R"("w":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,12]})") != std::string::npos);
  CHECK(header.find(R"("nan":{"dtype":"BF16","shape":[2],"data_offsets":[12,16]})") != std::string::npos);
  CHECK(bytes.size() == 8 + n + 6 * 2 + 2 * 2 + 4);
  const std::string data = bytes.substr(8 + n, 12);
  CHECK(data == std::string("\x80\x3f\x80\x3f\x82\x3f\x00\x80\x80\x7f\x80\xff", 12));
}

// A model whose values (pe included) mostly need rounding to become bf16, so
// that a load that kept more bits, or rounded otherwise, would show.
static std::unique_ptr<nn::Transformer> model_with_unrounded_values() {
  auto model = testing::tiny_model(testing::tiny_config(), 3);
  float x = 0.1f;
  for (const auto& [name, t] : model->state_dict())
    for (int64_t i = 0; i < t.numel(); ++i, x += 0.0123f) t.data()[i] = x;
  return model;
}

TEST_CASE("checkpoint: a bf16 export has the same names, order and metadata, half the data, and loads "
          "into a float32 model as exactly the rounded values") {
  TempDir dir;
  auto model = model_with_unrounded_values();
  std::string fp32 = dir.file("fp32.safetensors"), bf16 = dir.file("bf16.safetensors");
  nn::save_checkpoint(*model, fp32);
  nn::save_checkpoint(*model, bf16, DType::BF16);

  testing::check_bf16_export(fp32, bf16);
  // Headers aside, exactly half the bytes: 2 a value instead of 4.
  auto data_bytes = [](const std::string& path) {
    std::string bytes = read_bytes(path);
    uint64_t n = 0;
    std::memcpy(&n, bytes.data(), 8);
    return bytes.size() - 8 - n;
  };
  CHECK(2 * data_bytes(bf16) == data_bytes(fp32));
  CHECK(nn::read_checkpoint_config(bf16).d_model == model->config().d_model);  // the size check allows half

  auto loaded = testing::tiny_model(testing::tiny_config(), 4);
  nn::load_checkpoint(*loaded, bf16);
  NamedTensors want = model->state_dict(), got = loaded->state_dict();
  for (size_t i = 0; i < want.size(); ++i) {
    CAPTURE(want[i].first);
    REQUIRE(got[i].second.dtype() == DType::F32);
    std::vector<float> w = want[i].second.to_vector(), g = got[i].second.to_vector();
    CHECK(g != w);
    for (float& v : w) v = kernels::round_to_bf16(v);
    CHECK(g == w);
  }
  // Saving the loaded model in bf16 again gives the same bytes: the values round to themselves.
  nn::save_checkpoint(*loaded, dir.file("again.safetensors"), DType::BF16);
  CHECK(read_bytes(dir.file("again.safetensors")) == read_bytes(bf16));
}

TEST_CASE("checkpoint: a bf16 file is checked as a float32 one (shapes, non-finite values, other dtypes)") {
  TempDir dir;
  nn::TransformerConfig c = testing::tiny_config();
  std::string path = dir.file("m.safetensors");
  NamedTensors tensors;
  for (const auto& [name, t] : testing::tiny_model(c)->state_dict())
    tensors.emplace_back(name, to_dtype(t.detach(), DType::BF16));
  auto model = testing::tiny_model(c, 5);
  std::vector<float> before = model->state_dict()[0].second.to_vector();
  auto rejects = [&](const NamedTensors& file, const std::string& error) {
    safetensors::save(path, file, nn::checkpoint_metadata(c));
    CHECK_THROWS_WITH_AS(nn::load_checkpoint(*model, path), (path + ": tensor '" + error).c_str(), Error);
    CHECK(model->state_dict()[0].second.to_vector() == before);  // nothing loaded
  };
  NamedTensors infinite = tensors;
  infinite[3].second = bf16_tensor(std::vector<float>(static_cast<size_t>(infinite[3].second.numel()),
                                                      std::numeric_limits<float>::infinity()),
                                   infinite[3].second.shape());
  rejects(infinite, infinite[3].first + "' holds NaN or infinite values");
  NamedTensors nan = tensors;
  nan.back().second = bf16_tensor(std::vector<float>(static_cast<size_t>(nan.back().second.numel()), std::nanf("")),
                                  nan.back().second.shape());
  rejects(nan, nan.back().first + "' holds NaN or infinite values");
  NamedTensors narrow = tensors;
  narrow[0].second = Tensor::zeros({1, 8}, DType::BF16);
  rejects(narrow, narrow[0].first + "' has shape [1, 8], the model needs [8, 8]");
  NamedTensors ints = tensors;
  ints[0].second = Tensor::zeros(ints[0].second.shape(), DType::I32);
  rejects(ints, ints[0].first + "' is int32, the model needs float32");
}
