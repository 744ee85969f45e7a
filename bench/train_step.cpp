// One training step of the whole Transformer (forward, loss, backward, Adam),
// the unit users feel: CPU with 1 and 2 threads, and, in an OPENCL=1 build, the
// OpenCL device beside the CPU with 2 threads. Batches of random tokens whose
// lengths are uniform in [S/2, S-1], padded to S; dropout 0.1, label smoothing
// 0.1. The figure is the median step after warm-up steps.
#include <cstdio>
#include <memory>
#include <vector>

#include "autograd/device.h"
#include "autograd/kernels/thread_pool.h"
#include "autograd/ops.h"
#include "bench_util.h"
#include "nn/transformer.h"
#include "optim/optimizer.h"

namespace sf::bench {
namespace {

struct StepConfig {
  const char* name;
  int64_t d_model, N, h, d_ff, seq_len, batch, vocab;
};

// The sizes of a toy task (tiny) and of a small real corpus such as Multi30k (small).
const StepConfig kTiny{"tiny", 128, 2, 4, 512, 32, 32, 4000};
const StepConfig kSmall{"small", 256, 3, 8, 1024, 64, 32, 8000};

struct Batch {
  Tensor src, tgt, label, src_mask, tgt_mask;
};

// [SOS] tokens [EOS] [PAD]... for the encoder; the decoder input and labels
// are the same tokens shifted, as the data pipeline frames them.
Batch random_batch(const StepConfig& c, Rng& rng) {
  const int32_t pad = 1, sos = 2, eos = 3;
  int64_t s = c.seq_len;
  std::vector<int32_t> src(c.batch * s, pad), tgt(c.batch * s, pad), label(c.batch * s, pad);
  for (int64_t b = 0; b < c.batch; ++b) {
    int64_t length = s / 2 + static_cast<int64_t>(rng.next_u64() % static_cast<uint64_t>(s / 2)) - 2;
    src[b * s] = tgt[b * s] = sos;
    for (int64_t t = 1; t <= length; ++t) {
      src[b * s + t] = static_cast<int32_t>(4 + rng.next_u64() % (c.vocab - 4));
      tgt[b * s + t] = static_cast<int32_t>(4 + rng.next_u64() % (c.vocab - 4));
      label[b * s + t - 1] = tgt[b * s + t];
    }
    src[b * s + length + 1] = eos;
    label[b * s + length] = eos;
  }
  Batch batch{Tensor::from_ints(src, {c.batch, s}), Tensor::from_ints(tgt, {c.batch, s}),
              Tensor::from_ints(label, {c.batch, s}), {}, {}};
  batch.src_mask = nn::padding_mask(batch.src);
  batch.tgt_mask = nn::decoder_mask(batch.tgt);
  return batch;
}

// Median milliseconds of `steps` training steps after `warmup` on `device`.
double step_ms(const StepConfig& c, Device& device, int warmup, int steps) {
  Rng init(42);
  auto model = nn::build_transformer({c.vocab, c.vocab, c.seq_len, c.seq_len, c.d_model, c.N, c.h,
                                      c.d_ff, 0.1f},
                                     init);
  model->to(device);
  optim::Adam adam(model->named_parameters(), 1e-4f);
  Rng data(7);
  std::vector<Batch> batches;
  for (int i = 0; i < 4; ++i) batches.push_back(random_batch(c, data));
  std::vector<double> times;
  for (int i = 0; i < warmup + steps; ++i) {
    const Batch& b = batches[i % batches.size()];
    double t = seconds([&] {
      Tensor memory = model->encode(b.src, b.src_mask);
      Tensor logp = model->project(model->decode(memory, b.src_mask, b.tgt, b.tgt_mask));
      Tensor loss = cross_entropy(logp, b.label, 1, 0.1f);
      loss.backward();
      adam.step();
      adam.zero_grad();
      (void)loss.item();  // as training does: the step is over when its loss is on the host
    });
    if (i >= warmup) times.push_back(t * 1e3);
  }
  return median(times);
}

}  // namespace

void bench_train_steps() {
  std::printf("\nTraining step (ms, median of 20 after 5 warm-up): 2 threads vs 1 thread\n"
              "%-10s %9s %9s %7s\n", "model", "2 threads", "1 thread", "ratio");
  for (const StepConfig& c : {kTiny, kSmall}) {
    kernels::set_num_threads(1);
    double one = step_ms(c, cpu(), 5, 20);
    kernels::set_num_threads(2);
    double two = step_ms(c, cpu(), 5, 20);
    std::printf("%-10s %9.1f %9.1f %7.3f\n", c.name, two, one, one / two);
    add_record("train_step", c.name, 1, one, one, "cpu", "ms");
    add_record("train_step", c.name, 2, two, one, "cpu 1 thread", "ms");
  }
#ifdef SF_OPENCL
  std::printf("\nTraining step on OpenCL (%s; ms, median of 10 after 3 warm-up) vs the CPU, 2 threads\n"
              "%-10s %9s %9s %7s\n", device_named("opencl").description().c_str(), "model", "opencl",
              "cpu", "ratio");
  for (const StepConfig& c : {kTiny, kSmall}) {
    kernels::set_num_threads(2);
    double on_cpu = step_ms(c, cpu(), 3, 10), on_opencl = step_ms(c, device_named("opencl"), 3, 10);
    std::printf("%-10s %9.1f %9.1f %7.3f\n", c.name, on_opencl, on_cpu, on_cpu / on_opencl);
    add_record("train_step_opencl", c.name, 2, on_opencl, on_cpu, "cpu 2 threads", "ms");
  }
#endif
}

}  // namespace sf::bench
