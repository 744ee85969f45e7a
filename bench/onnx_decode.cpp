// Greedy decoding beside ONNX Runtime's (part "onnx_decode"): the model of
// the Multi30k BPE config's shapes (step_models.h: kSmall; random weights from
// a fixed seed) exported by onnx/ and decoded by ONNX Runtime (tools/onnx-run
// greedy: onnxruntime-node, 2 intra-op threads, its default graph
// optimisations, the merged decoder's key/value cache) and by ours
// (infer/decoding.h: greedy_decode, 2 threads), the same 32 sentences one at a
// time and as one batch of 32, in sentences per second. An untrained model
// writes no early [EOS], so every sentence runs to seq_len: both decode the
// same number of steps. Each side's figure is the median of three rounds,
// after a warm-up; ONNX Runtime's excludes Node's start and the sessions'
// creation. Skipped, with a line, where Node or the npm packages cannot be
// installed.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>
#include <unistd.h>

#include "autograd/device.h"
#include "autograd/kernels/thread_pool.h"
#include "base/atomic_file.h"
#include "bench_util.h"
#include "data/framing.h"
#include "infer/decoding.h"
#include "onnx/hf_files.h"
#include "onnx/transformer_graph.h"
#include "step_models.h"

namespace sf::bench {

namespace fs = std::filesystem;

namespace {

// What tools/onnx-runtimes/greedy.mjs reads of config.json: the shapes.
setup::Config shapes_of(const StepConfig& c) {
  setup::Config config;
  config.d_model = c.d_model;
  config.N = c.N;
  config.h = c.h;
  config.d_ff = c.d_ff;
  config.seq_len = c.seq_len;
  return config;
}

// 32 framed sources of 10 to 20 random tokens, Multi30k's usual lengths.
std::vector<std::vector<int32_t>> random_sources(const StepConfig& c) {
  Rng rng(7);
  const int64_t specials = std::ssize(data::kSpecialTokens);
  std::vector<std::vector<int32_t>> sources(32);
  for (std::vector<int32_t>& s : sources) {
    std::vector<int32_t> words(10 + rng.next_u64() % 11);
    for (int32_t& w : words) w = static_cast<int32_t>(specials + rng.next_u64() % (c.vocab - specials));
    s = data::frame_source(words, data::framed_source_width(words.size()));
  }
  return sources;
}

// Our greedy decoding of `sources` in batches of `batch`: the seconds, and the tokens.
double our_seconds(nn::Transformer& model, const std::vector<std::vector<int32_t>>& sources, int64_t batch,
                   int64_t max_len, std::vector<infer::TokenIds>* tokens) {
  auto start = std::chrono::steady_clock::now();
  for (size_t begin = 0; begin < sources.size(); begin += static_cast<size_t>(batch)) {
    std::vector<std::vector<int32_t>> part(sources.begin() + static_cast<std::ptrdiff_t>(begin),
                                           sources.begin() + static_cast<std::ptrdiff_t>(
                                               std::min(sources.size(), begin + static_cast<size_t>(batch))));
    size_t width = 0;
    for (const auto& s : part) width = std::max(width, s.size());
    std::vector<int32_t> ids;
    for (const auto& s : part) {
      ids.insert(ids.end(), s.begin(), s.end());
      ids.insert(ids.end(), width - s.size(), data::kPadId);
    }
    std::vector<infer::TokenIds> out = infer::greedy_decode(
        model, Tensor::from_ints(ids, {static_cast<int64_t>(part.size()), static_cast<int64_t>(width)}), max_len);
    if (tokens) tokens->insert(tokens->end(), out.begin(), out.end());
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

void bench_onnx_decode() {
  std::printf("\nGreedy decoding beside ONNX Runtime, 2 threads, Multi30k BPE shapes (d_model %lld, N %lld, "
              "vocab %lld), 32 sentences to seq_len %lld (sentences/s)\n",
              static_cast<long long>(kSmall.d_model), static_cast<long long>(kSmall.N),
              static_cast<long long>(kSmall.vocab), static_cast<long long>(kSmall.seq_len));
  if (std::system("tools/onnx-run --install >/dev/null 2>&1") != 0) {
    std::printf("skipped: Node, onnxruntime-node or transformers.js could not be installed (tools/onnx-run --install)\n");
    return;
  }
  kernels::set_num_threads(2);
  auto model = build(kSmall, device_named("cpu"));
  model->eval();
  const fs::path dir = fs::temp_directory_path() / ("sf_bench_onnx_" + std::to_string(getpid()));
  make_folders_or_fail((dir / "onnx").string());
  write_file_atomically((dir / "onnx/encoder_model.onnx").string(), onnx::serialize_model(onnx::encoder_graph(*model), {}));
  write_file_atomically((dir / "onnx/decoder_model_merged.onnx").string(),
                        onnx::serialize_model(onnx::decoder_graph(*model), {}));
  write_file_atomically((dir / "config.json").string(), onnx::hf_config(shapes_of(kSmall), kSmall.vocab, kSmall.vocab).dump());
  const std::vector<std::vector<int32_t>> sources = random_sources(kSmall);

  std::printf("%-28s %9s %9s %7s %s\n", "case", "ours", "onnxrt", "ratio", "tokens as ours");
  for (int64_t batch : {1, 32}) {
    nlohmann::json input = {{"sources", sources}, {"max_len", kSmall.seq_len}, {"pad", data::kPadId},
                            {"sos", data::kSosId}, {"eos", data::kEosId}, {"batch", batch}};
    std::ofstream(dir / "input.json") << input.dump();
    std::string command = "tools/onnx-run greedy " + dir.string() + " " + (dir / "input.json").string() + " " +
                          (dir / "ort.json").string();
    std::vector<double> ours, theirs;
    std::vector<infer::TokenIds> our_tokens;
    size_t same = 0;  // sentences whose tokens ONNX Runtime and ours agree on
    our_seconds(*model, sources, batch, kSmall.seq_len, nullptr);  // a warm-up
    for (int round = 0; round < 3; ++round) {
      ours.push_back(our_seconds(*model, sources, batch, kSmall.seq_len, round == 0 ? &our_tokens : nullptr));
      if (std::system(command.c_str()) != 0) {
        std::printf("batch %lld: ONNX Runtime failed (%s)\n", static_cast<long long>(batch), command.c_str());
        fs::remove_all(dir);
        return;
      }
      nlohmann::json out = nlohmann::json::parse(std::ifstream(dir / "ort.json"));
      theirs.push_back(out["seconds"].get<double>());
      if (round == 0)
        for (size_t s = 0; s < sources.size(); ++s) same += out["sentences"][s]["tokens"] == nlohmann::json(our_tokens[s]);
    }
    const double n = static_cast<double>(sources.size()), ours_rate = n / median(ours), ort_rate = n / median(theirs);
    std::string name = "greedy, batch " + std::to_string(batch);
    std::printf("%-28s %9.1f %9.1f %7.3f %zu of %zu\n", name.c_str(), ours_rate, ort_rate, ours_rate / ort_rate,
                same, sources.size());
    add_record("onnx_decode", name, 2, ours_rate, ort_rate, "onnxruntime", "sentences/s");
  }
  fs::remove_all(dir);
}

}  // namespace sf::bench
