// PyTorch parity: our checkpoint loads into the same model built in PyTorch
// (tests/pytorch_parity.py, docs/05-transformer.md) with strict=True, and
// PyTorch computes the same log-probabilities for a fixed batch to 1e-4.
// Skipped, with a message, when no python3 can import torch.
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "autograd/safetensors.h"
#include "nn/checkpoint.h"
#include "skip.h"
#include "test_nn_helpers.h"

using namespace sf;

// The first interpreter that imports torch: python3 on the PATH, then the
// system's (Debian's python3-torch installs there, which a pyenv or venv
// python3 on the PATH does not see).
static std::string python_with_torch() {
  for (const char* python : {"python3", "/usr/bin/python3"})
    if (std::system((std::string(python) + " -c 'import torch' >/dev/null 2>&1").c_str()) == 0)
      return python;
  return "";
}

TEST_CASE("nn: PyTorch loads our checkpoint (strict) and gives the same log-probs") {
  std::string python = python_with_torch();
  if (python.empty())
    SF_SKIP("PyTorch parity: no python3 imports torch (apt-get install python3-torch to run it)");
  std::filesystem::path script = std::filesystem::path(__FILE__).parent_path() / "pytorch_parity.py";
  REQUIRE_MESSAGE(std::filesystem::exists(script), "missing ", script.string());

  nn::TransformerConfig c;
  c.src_vocab_size = 17;
  c.tgt_vocab_size = 19;
  c.src_seq_len = 12;
  c.tgt_seq_len = 10;
  c.d_model = 16;
  c.N = 2;
  c.h = 4;
  c.d_ff = 32;
  auto model = testing::tiny_model(c, 7);
  model->eval();
  Tensor src = testing::pad_batch({{4, 5, 6, 7, 8, 9, 10}, {11, 12, 13}, {14, 15, 16, 4, 5}}, 9);
  Tensor tgt = testing::pad_batch({{2, 4, 5, 6}, {2, 7, 8, 9, 10, 11, 12}, {2, 18}}, 7);
  Tensor logprobs = testing::log_probs(*model, src, tgt);

  testing::TempDir dir;
  nn::save_checkpoint(*model, dir.file("model.safetensors"));
  safetensors::save(dir.file("batch.safetensors"),
                    {{"src", src}, {"tgt", tgt}, {"logprobs", logprobs}});
  std::string command = python + " " + script.string() + " " + dir.path.string() + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::string output;
  char buffer[512];
  while (fgets(buffer, sizeof buffer, pipe)) output += buffer;
  int status = pclose(pipe);
  std::printf("%s", output.c_str());
  CHECK_MESSAGE(status == 0, output);
}
