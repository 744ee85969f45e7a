// A short training run whose losses two builds of the library must agree on:
// `make test` runs it built for this machine, then built for AArch64 under
// qemu, and the second run compares its losses with the first's. The kernels
// differ between the two (AVX-512 or AVX2 against NEON: other vector widths,
// so other orders of summation) and the rest of the library is the same
// source, so the losses may differ by rounding only: 1e-5 relative, where a
// wrong kernel, a lane out of place or a platform difference in the random
// numbers shows as far more.
//
//   build/train_losses > losses.txt             prints each step's loss
//   train_losses --expect losses.txt            compares with those, exit 1 if apart
//
// The run: the toy "reverse" task, word-level tokenizers, bucketed batches,
// a 2-layer Transformer with dropout, Adam with a clipped gradient norm: the
// training step of train/ without its files.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "data/batching.h"
#include "data/toy_tasks.h"
#include "nn/transformer.h"
#include "optim/clip.h"
#include "optim/optimizer.h"
#include "setup/loss.h"

using namespace sf;

namespace {

constexpr int kSteps = 12;
constexpr double kRelativeTolerance = 1e-5;

std::vector<double> train() {
  std::vector<data::Pair> pairs = data::generate_toy_task("reverse", 256, /*seed=*/3);
  std::vector<std::string_view> sources, targets;
  for (const data::Pair& p : pairs) sources.push_back(p.src), targets.push_back(p.tgt);
  const data::Tokenizer src = data::Tokenizer::train(sources, 1), tgt = data::Tokenizer::train(targets, 1);
  const int64_t seq_len = 16;
  data::BatchedDataset dataset(data::encode_pairs(pairs, src, tgt),
                               {.batch_size = 16, .seq_len = seq_len, .bucket = true, .seed = 5});
  auto model = nn::build_transformer(src.vocab_size(), tgt.vocab_size(), seq_len, seq_len, /*d_model=*/32, /*N=*/2,
                                     /*h=*/4, /*dropout=*/0.1f, /*d_ff=*/64, /*seed=*/7);
  optim::Adam adam(model->named_parameters(), /*lr=*/1e-3f);
  std::vector<double> losses;
  const std::vector<std::vector<size_t>> plan = dataset.epoch_plan(0);
  for (int step = 0; step < kSteps; ++step) {
    const data::Batch batch = dataset.make_batch(plan[static_cast<size_t>(step) % plan.size()]);
    Tensor loss = setup::batch_loss(*model, batch, /*label_smoothing=*/0.1f);
    adam.zero_grad();
    loss.backward();
    optim::clip_grad_norm(model->named_parameters(), /*max_norm=*/0.5f);
    adam.step();
    losses.push_back(loss.item());
  }
  return losses;
}

int compare(const char* path, const std::vector<double>& got) {
  std::ifstream in(path);
  if (!in) fail(path, ": cannot read the losses to compare with");
  std::vector<double> want;
  std::string word;
  double value;
  while (in >> word >> value) want.push_back(value);  // "step_N LOSS" lines
  if (want.size() != got.size()) fail(path, ": ", want.size(), " losses, where this run has ", got.size());
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(got[i] - want[i]) / std::fabs(want[i]));
  const bool same = worst <= kRelativeTolerance;
  std::printf("%d losses against %s: largest relative difference %.3g (at most %.0e allowed): %s\n",
              static_cast<int>(got.size()), path, worst, kRelativeTolerance, same ? "same" : "DIFFERENT");
  return same ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (!(argc == 1 || (argc == 3 && std::string(argv[1]) == "--expect")))
      fail("usage: train_losses [--expect FILE]");
    const std::vector<double> losses = train();
    if (argc == 3) return compare(argv[2], losses);
    for (size_t i = 0; i < losses.size(); ++i) std::printf("step_%zu %.9g\n", i, losses[i]);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_losses: %s\n", e.what());
    return exit_status(e);
  }
}
