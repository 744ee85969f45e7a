// Trains a small Transformer to reverse sequences of syllables ("ka mo ti" ->
// "ti mo ka"), through the library's C++ API alone: toy data, word-level
// tokenizers, padded batches with their masks, the model, Adam, the
// cross-entropy loss, then greedy decoding of pairs it never saw. The
// command's `train` (train/trainer.cpp) runs the same steps, plus validation,
// checkpoints and metrics.
//
//   build/examples/train_toy                     # learns to reverse
//   build/examples/train_toy --no-causal-mask    # learns to cheat
//
// Without the causal mask the decoder sees, at every position, the very
// token it is asked to predict (the decoder input is the label shifted one
// place), so the training loss falls to almost nothing; at inference the
// future is not there to copy, and the held-out pairs come out wrong.
// docs/00-start.md, the course's first chapter, runs it and explains it.
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "data/batching.h"
#include "data/framing.h"
#include "data/toy_tasks.h"
#include "nn/transformer.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "infer/decoding.h"
#include "setup/loss.h"

using namespace sf;

int main(int argc, char** argv) {
  const bool causal = !(argc > 1 && std::string_view(argv[1]) == "--no-causal-mask");
  if (argc > 2 || (argc == 2 && causal)) {
    std::fprintf(stderr, "usage: train_toy [--no-causal-mask]\n");
    return 2;
  }

  // 1. Data: pairs of the built-in "reverse" task (data/toy_tasks.h), the
  //    last few held out to translate at the end.
  std::vector<data::Pair> pairs = data::generate_toy_task("reverse", 2000, /*seed=*/1);
  std::vector<data::Pair> held_out(pairs.end() - 4, pairs.end());
  pairs.resize(pairs.size() - held_out.size());

  // 2. A word-level vocabulary per side: [UNK] [PAD] [SOS] [EOS], then the words.
  std::vector<std::string_view> sources, targets;
  for (const data::Pair& p : pairs) sources.push_back(p.src), targets.push_back(p.tgt);
  data::Tokenizer src_tokenizer = data::Tokenizer::train(sources, /*min_frequency=*/1);
  data::Tokenizer tgt_tokenizer = data::Tokenizer::train(targets, /*min_frequency=*/1);

  // 3. Batches (data/batching.h): encoder input [SOS] src [EOS] [PAD]...,
  //    decoder input [SOS] tgt, label tgt [EOS], and the two masks.
  const int64_t seq_len = 16;
  data::BatchedDataset dataset(data::encode_pairs(pairs, src_tokenizer, tgt_tokenizer),
                               {.batch_size = 32, .seq_len = seq_len, .bucket = true, .seed = 1});

  // 4. The model (one layer of each stack, d_model 32) and its optimizer.
  auto model = nn::build_transformer(src_tokenizer.vocab_size(), tgt_tokenizer.vocab_size(), seq_len,
                                     seq_len, /*d_model=*/32, /*N=*/1, /*h=*/4, /*dropout=*/0.0f,
                                     /*d_ff=*/64, /*seed=*/1);
  optim::Adam adam(model->named_parameters(), /*lr=*/3e-3f);
  // The rate warms up over the first epoch, then decays to 0 on a cosine
  // (optim/schedule.h): held at 3e-3, the loss of so small a model jumps back
  // up now and then instead of settling.
  const int64_t epochs = 20, steps_per_epoch = data::EpochBatches(dataset, 0).size();
  optim::ScheduleOptions schedule{.kind = optim::Schedule::Cosine, .lr = 3e-3f,
                                  .warmup_steps = steps_per_epoch, .total_steps = epochs * steps_per_epoch};

  // 5. Training: forward, loss, backward, step. The loss is the cross-entropy
  //    -log p(label) averaged over the label positions that are not [PAD].
  double epoch_loss = 0.0;
  for (int64_t epoch = 0, step = 0; epoch < epochs; ++epoch) {
    int64_t steps = 0;
    epoch_loss = 0.0;
    for (data::EpochBatches batches(dataset, epoch); !batches.done();) {
      data::Batch b = batches.next();
      if (!causal) b.decoder_mask = data::encoder_keep_mask(b.decoder_input);  // [PAD] hidden, nothing else
      Tensor memory = model->encode(b.encoder_input, b.encoder_mask);
      Tensor features = model->decode(memory, b.encoder_mask, b.decoder_input, b.decoder_mask);
      Tensor loss = setup::translation_loss(*model, features, b.label, /*label_smoothing=*/0.0f);
      adam.zero_grad();
      loss.backward();
      adam.set_lr(optim::learning_rate(schedule, ++step));
      adam.step();
      epoch_loss += loss.item(), ++steps;
    }
    epoch_loss /= static_cast<double>(steps);
    std::printf("epoch %lld  loss %.4f\n", static_cast<long long>(epoch), epoch_loss);
  }

  // 6. Greedy decoding (infer/decoding.h) of the held-out sources, each framed
  //    [SOS] src [EOS] and padded to the longest (data/framing.h).
  model->eval();
  std::vector<std::vector<int32_t>> ids;
  for (const data::Pair& p : held_out) ids.push_back(src_tokenizer.encode(p.src));
  std::vector<infer::TokenIds> outputs = infer::greedy_decode(*model, data::frame_sources(ids), seq_len);
  int correct = 0;
  for (size_t i = 0; i < held_out.size(); ++i) {
    std::string output = tgt_tokenizer.decode(outputs[i]);
    bool exact = output == held_out[i].tgt;
    std::printf("%s -> %s%s\n", held_out[i].src.c_str(), output.c_str(), exact ? "" : "  (wrong)");
    correct += exact;
  }
  std::printf("final loss %.4f, %d of %zu held-out pairs exact\n", epoch_loss, correct, held_out.size());
}
