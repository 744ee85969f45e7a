// PyTorch parity: our checkpoint loads into the same model built in PyTorch
// (tests/pytorch_parity.py, docs/05-transformer.md) with strict=True, and
// PyTorch computes the same log-probabilities for a fixed batch to 1e-4; a
// bf16 export loads strict too, and gives the NLLs `score` gives on it.
// Skipped, with a message, when no python3 can import torch.
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "autograd/ops.h"
#include "autograd/safetensors.h"
#include "cli_process.h"
#include "data/toy_tasks.h"
#include "nn/checkpoint.h"
#include "test_nn_helpers.h"
#include "torch_python.h"

using namespace sf;

// Runs tests/pytorch_parity.py on `dir` (model.safetensors, batch.safetensors),
// which must exit 0.
static void check_parity(const std::string& python, const std::filesystem::path& dir) {
  testing::check_script_passes(python, "pytorch_parity.py", dir.string());
}

// The same for `model`'s weights and the tensors of `batch`, saved to a fresh folder.
static void check_parity(const std::string& python, const nn::Transformer& model, const NamedTensors& batch) {
  testing::TempDir dir;
  nn::save_checkpoint(model, dir.file("model.safetensors"));
  safetensors::save(dir.file("batch.safetensors"), batch);
  check_parity(python, dir.path);
}

TEST_CASE("nn: PyTorch loads our checkpoint (strict) and gives the same log-probs") {
  SF_NEED_TORCH(python);

  auto model = testing::tiny_model(
      {.src_vocab_size = 17, .tgt_vocab_size = 19, .src_seq_len = 12, .tgt_seq_len = 10, .d_model = 16, .N = 2,
       .h = 4, .d_ff = 32},
      7);
  model->eval();
  Tensor src = testing::pad_batch({{4, 5, 6, 7, 8, 9, 10}, {11, 12, 13}, {14, 15, 16, 4, 5}}, 9);
  Tensor tgt = testing::pad_batch({{2, 4, 5, 6}, {2, 7, 8, 9, 10, 11, 12}, {2, 18}}, 7);
  check_parity(python, *model, {{"src", src}, {"tgt", tgt}, {"logprobs", testing::log_probs(*model, src, tgt)}});
}

// Tied embeddings: the file holds the one matrix under each of its three
// names, so the reference's untied model loads it and computes the same function.
TEST_CASE("nn: PyTorch loads a tied-embeddings checkpoint (strict) and gives the same log-probs") {
  SF_NEED_TORCH(python);

  auto model = testing::tiny_model({.src_vocab_size = 19, .tgt_vocab_size = 19, .src_seq_len = 12, .tgt_seq_len = 10,
                                    .d_model = 16, .N = 2, .h = 4, .d_ff = 32, .tie_embeddings = true},
                                   7);
  model->eval();
  Tensor src = testing::pad_batch({{4, 5, 6, 7, 8, 9, 10}, {11, 12, 13}, {14, 15, 16, 4, 5}}, 9);
  Tensor tgt = testing::pad_batch({{2, 4, 5, 6}, {2, 7, 8, 9, 10, 11, 12}, {2, 18}}, 7);
  check_parity(python, *model, {{"src", src}, {"tgt", tgt}, {"logprobs", testing::log_probs(*model, src, tgt)}});
}

// Mixed precision (docs/13-bf16.md): the same batch's training loss under our
// bf16 autocast and under torch.autocast("cpu", dtype=torch.bfloat16), to 1e-2
// relative and nearer to it than to PyTorch's float32 loss, on a random model
// wide enough (d_model 64) for the rounding to show.
TEST_CASE("nn: our bf16 autocast gives PyTorch's bf16 autocast loss on the same batch") {
  SF_NEED_TORCH(python);
  auto model = testing::tiny_model(
      {.src_vocab_size = 40, .tgt_vocab_size = 40, .src_seq_len = 16, .tgt_seq_len = 16, .d_model = 64, .N = 2,
       .h = 4, .d_ff = 128},
      11);
  model->eval();
  std::vector<std::vector<int32_t>> sources, targets;
  Rng rng(5);
  for (int s = 0; s < 8; ++s) {
    sources.emplace_back();
    for (uint64_t t = 0, n = 4 + rng.next_u64() % 10; t < n; ++t)
      sources.back().push_back(static_cast<int32_t>(4 + rng.next_u64() % 36));
    targets.push_back(sources.back());
  }
  testing::Batch b = testing::make_batch(sources, targets, 16);
  Tensor f32 = testing::batch_loss(*model, b), bf16;
  {
    AutocastGuard autocast(DType::BF16);
    bf16 = testing::batch_loss(*model, b);
  }
  MESSAGE("loss: float32 ", f32.item(), ", bf16 autocast ", bf16.item());
  CHECK(bf16.item() != f32.item());  // the products really ran in bf16

  // The script also holds ours nearer to PyTorch's bf16 loss than to its
  // float32 one, and our float32 loss to PyTorch's float32 one.
  check_parity(python, *model,
               {{"src", b.src}, {"tgt", b.tgt}, {"labels", b.label}, {"loss_bf16", bf16}, {"loss_f32", f32}});
}

TEST_CASE("nn: PyTorch loads our bf16 export (strict) and gives the NLLs score gives on it") {
  SF_NEED_TORCH(python);
  testing::TempDir dir;
  std::string config = testing::write_config(dir.path, std::string(R"("data": {"task": "copy", "size": 300},
    "lang_src": "a", "lang_tgt": "b", "num_epochs": 1, )") + testing::kTiny);
  setup::Config c = setup::load_config(config);
  REQUIRE(train::Trainer(c).run() == 0);
  std::string bin = testing::scratchformer_binary(), model = dir.file("model.safetensors");
  REQUIRE(testing::run({"export", "--config", config, "--out", model}, dir.path / "export.log") == 0);

  // Pairs that fit seq_len, framed as score frames them (data/framing.h).
  data::Tokenizer src_tokenizer = data::Tokenizer::load(c.tokenizer_path(c.lang_src)),
                  tgt_tokenizer = data::Tokenizer::load(c.tokenizer_path(c.lang_tgt));
  std::vector<std::vector<int32_t>> sources, targets;
  std::string pairs;
  for (const data::Pair& p : data::generate_toy_task("copy", 40, 5)) {
    std::vector<int32_t> s = src_tokenizer.encode(p.src), t = tgt_tokenizer.encode(p.tgt);
    if (data::framed_source_width(s.size()) > c.seq_len || sources.size() == 8) continue;
    sources.push_back(s);
    targets.push_back(t);
    pairs += p.src + "\t" + p.tgt + "\n";
  }
  REQUIRE(sources.size() == 8);
  std::ofstream(dir.path / "pairs.tsv") << pairs;
  FILE* pipe = popen(("'" + bin + "' score --config '" + config + "' --checkpoint '" + model + "' < '" +
                      dir.file("pairs.tsv") + "'").c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::vector<float> nll;
  double value = 0;
  long long tokens = 0;
  while (std::fscanf(pipe, "%lf\t%lld\n", &value, &tokens) == 2) nll.push_back(static_cast<float>(value));
  CHECK(pclose(pipe) == 0);
  REQUIRE(nll.size() == sources.size());

  std::vector<int32_t> src, tgt, labels;
  for (size_t i = 0; i < sources.size(); ++i) {
    for (int32_t id : data::frame_source(sources[i], c.seq_len)) src.push_back(id);
    for (int32_t id : data::frame_decoder_input(targets[i], c.seq_len)) tgt.push_back(id);
    for (int32_t id : data::frame_labels(targets[i], c.seq_len)) labels.push_back(id);
  }
  Shape shape{static_cast<int64_t>(sources.size()), c.seq_len};
  safetensors::save(dir.file("batch.safetensors"), {{"src", Tensor::from_ints(src, shape)},
                                                    {"tgt", Tensor::from_ints(tgt, shape)},
                                                    {"labels", Tensor::from_ints(labels, shape)},
                                                    {"nll", Tensor::from(nll, {shape[0]})}});
  check_parity(python, dir.path);
}
