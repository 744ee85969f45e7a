// The machine's measured peaks: the ceilings a GEMM's GFLOP/s is read
// against, float32 FMA for the float32 GEMM and VDPBF16PS (AVX512-BF16's bf16
// dot product, float32 accumulation) for the bf16 one. Each thread runs chains
// of the instruction on registers only (no memory traffic), with enough
// independent accumulators to cover its latency times the units that issue it,
// so the figure is throughput, not latency. Measured, not computed from a clock
// and a datasheet: these machines differ (Zen 4 splits a 512-bit FMA in two,
// Zen 5 and Xeons do not), and turbo depends on how many cores run.
#include <immintrin.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <vector>

#include "autograd/kernels/simd.h"
#include "autograd/kernels/thread_pool.h"
#include "bench_util.h"

namespace sf::bench {
namespace {

constexpr int64_t kIterations = 1 << 22;

// 12 FMA accumulators: the FMA latency (4 cycles) times the FMA units (2) of
// current x86 cores is 8.
constexpr int kFmaChains = 12;

// 2 * width * kFmaChains * kIterations flops; returns a value so the work is kept.
float fma_chains(float seed) {
  using kernels::simd::Vec;
  Vec acc[kFmaChains];
  for (int c = 0; c < kFmaChains; ++c) acc[c] = Vec::set1(seed + static_cast<float>(c));
  const Vec a = Vec::set1(0.999999f), b = Vec::set1(1e-7f);
  for (int64_t i = 0; i < kIterations; ++i)
    for (int c = 0; c < kFmaChains; ++c) acc[c] = fma(acc[c], a, b);
  Vec total = acc[0];
  for (int c = 1; c < kFmaChains; ++c) total = total + acc[c];
  return total.sum();
}

// 16 VDPBF16PS accumulators: its latency is longer than an FMA's (6 cycles on
// Zen 4 and Zen 5), and two units issue it on Zen 5, so 12 could leave it
// latency-bound there; 16 of the 32 zmm registers still leave room for the
// operands.
constexpr int kBf16Chains = 16;

// One zmm VDPBF16PS multiplies 32 bf16 pairs and adds them, two by two, into
// 16 float32 lanes: 32 multiplies + 32 adds = 64 flops, the count a bf16
// GEMM's 2·m·n·k is read against.
constexpr double kBf16FlopsPerInstruction = 64;

// kBf16FlopsPerInstruction * kBf16Chains * kIterations flops. Compiled for
// AVX512-BF16 whatever the build's -march, and called only on a CPU that has
// it. The operands are small normal numbers: bf16 dot products treat
// subnormals as zero, and the sums must not overflow.
__attribute__((target("avx512f,avx512bf16"))) float dpbf16_chains(float seed) {
  __m512 acc[kBf16Chains];
  for (int c = 0; c < kBf16Chains; ++c) acc[c] = _mm512_set1_ps(seed + static_cast<float>(c));
  const __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-3f), _mm512_set1_ps(1e-3f));
  const __m512bh b = _mm512_cvtne2ps_pbh(_mm512_set1_ps(2e-3f), _mm512_set1_ps(2e-3f));
  for (int64_t i = 0; i < kIterations; ++i)
    for (int c = 0; c < kBf16Chains; ++c) acc[c] = _mm512_dpbf16_ps(acc[c], a, b);
  __m512 total = acc[0];
  for (int c = 1; c < kBf16Chains; ++c) total = _mm512_add_ps(total, acc[c]);
  return _mm512_reduce_add_ps(total);
}

// `chains` (doing `flops` each) run by `threads` threads at once, one per
// thread of the pool (whose size the caller sets).
PeakRun peak_run(int threads, double flops, float (*chains)(float)) {
  return {flops * threads, [threads, chains] {
            std::vector<float> results(threads);
            kernels::parallel_for(0, threads, 1, [&](int64_t begin, int64_t end) {
              for (int64_t i = begin; i < end; ++i) results[i] = chains(static_cast<float>(i));
            });
            volatile float sink = results[0];  // keeps the chains from being optimised away
            (void)sink;
          }};
}

// The fastest of kTrials, in GFLOP/s: nothing makes the units faster than the
// hardware allows.
double fastest_gflops(int threads, const PeakRun& peak) {
  kernels::set_num_threads(threads);
  std::vector<double> trials;
  for (int t = 0; t < kTrials; ++t) trials.push_back(seconds(peak.run));
  return peak.flops / *std::min_element(trials.begin(), trials.end()) * 1e-9;
}

}  // namespace

double fma_peak_gflops(int threads) {
  using kernels::simd::Vec;
  return fastest_gflops(
      threads, peak_run(threads, 2.0 * Vec::width * kFmaChains * static_cast<double>(kIterations), fma_chains));
}

std::optional<PeakRun> bf16_peak_run(int threads) {
  if (!__builtin_cpu_supports("avx512bf16")) return std::nullopt;
  return peak_run(threads, kBf16FlopsPerInstruction * kBf16Chains * static_cast<double>(kIterations),
                  dpbf16_chains);
}

std::optional<double> bf16_peak_gflops(int threads) {
  std::optional<PeakRun> peak = bf16_peak_run(threads);
  return peak ? std::optional(fastest_gflops(threads, *peak)) : std::nullopt;
}

}  // namespace sf::bench
