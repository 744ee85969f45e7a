// The machine's measured FMA peak: the ceiling a GEMM's GFLOP/s is read
// against. Each thread runs chains of fused multiply-adds on registers only
// (no memory traffic): 12 independent accumulators, enough to cover the FMA
// latency (4 cycles) times the FMA units (2) of current x86 cores, so the
// figure is throughput, not latency. Measured, not computed from a clock and a
// datasheet: these machines differ (Zen 4 splits a 512-bit FMA in two, Zen 5
// and Xeons do not), and turbo depends on how many cores run.
#include <algorithm>
#include <vector>

#include "autograd/kernels/simd.h"
#include "autograd/kernels/thread_pool.h"
#include "bench_util.h"

namespace sf::bench {
namespace {

constexpr int kChains = 12;
constexpr int64_t kIterations = 1 << 22;

// 2 * width * kChains * kIterations flops; returns a value so the work is kept.
float fma_chains(float seed) {
  using kernels::simd::Vec;
  Vec acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = Vec::set1(seed + static_cast<float>(c));
  const Vec a = Vec::set1(0.999999f), b = Vec::set1(1e-7f);
  for (int64_t i = 0; i < kIterations; ++i)
    for (int c = 0; c < kChains; ++c) acc[c] = fma(acc[c], a, b);
  Vec total = acc[0];
  for (int c = 1; c < kChains; ++c) total = total + acc[c];
  return total.sum();
}

}  // namespace

double fma_peak_gflops(int threads) {
  using kernels::simd::Vec;
  kernels::set_num_threads(threads);
  std::vector<float> results(threads);
  std::vector<double> trials;
  for (int t = 0; t < kTrials; ++t)
    trials.push_back(seconds([&] {
      kernels::parallel_for(0, threads, 1, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) results[i] = fma_chains(static_cast<float>(i));
      });
    }));
  volatile float sink = results[0];  // keeps the chains from being optimised away
  (void)sink;
  double flops = 2.0 * Vec::width * kChains * static_cast<double>(kIterations) * threads;
  // The fastest trial: nothing makes FMAs faster than the hardware allows.
  return flops / *std::min_element(trials.begin(), trials.end()) * 1e-9;
}

}  // namespace sf::bench
