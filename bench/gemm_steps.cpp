// `bench OUT.json gemm_steps`: one product, C = A·B with M = N = K = 512, computed
// four ways, each a step of docs/03-kernels.md, in GFLOP/s beside the measured
// FMA peak (fma_peak.cpp):
//   1. the textbook loop: C[i,j] = Σ_p A[i,p]·B[p,j], one float at a time;
//   2. SIMD rows: C[i,:] += A[i,p]·B[p,:], a vector of B's row per FMA;
//   3. the library's GEMM on 1 thread (gemm.cpp: register tile, B packed into
//      panels, cache blocks);
//   4. the same on 2 threads.
#include <algorithm>
#include <cstdio>
#include <vector>

#include "autograd/kernels/kernels.h"
#include "autograd/kernels/simd.h"
#include "autograd/kernels/thread_pool.h"
#include "bench_util.h"

namespace sf::bench {
namespace {

constexpr int64_t kSize = 512;

// Step 1. The inner loop reads B down a column (stride n floats) and adds into
// one float: each FMA waits for the previous one (a sum in order cannot be
// vectorised without reassociating it).
void textbook(const float* a, const float* b, float* c, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      float sum = 0.0f;
      for (int64_t p = 0; p < n; ++p) sum += a[i * n + p] * b[p * n + j];
      c[i * n + j] = sum;
    }
}

// Step 2. Loops reordered (i, p, j) so the inner loop walks rows of B and C
// contiguously, Vec::width floats per FMA; C's row is loaded and stored at
// every p, so memory, not the FMA units, sets the pace.
void simd_rows(const float* a, const float* b, float* c, int64_t n) {
  using kernels::simd::Vec;
  std::fill(c, c + n * n, 0.0f);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t p = 0; p < n; ++p) {
      const Vec x = Vec::set1(a[i * n + p]);
      for (int64_t j = 0; j + Vec::width <= n; j += Vec::width)
        fma(x, Vec::load(b + p * n + j), Vec::load(c + i * n + j)).store(c + i * n + j);
    }
}

double best_gflops(const std::function<void()>& f) {
  double best = 1e30;
  for (int t = 0; t < 3; ++t) best = std::min(best, seconds(f));
  return 2.0 * kSize * kSize * kSize / best * 1e-9;
}

}  // namespace

void bench_gemm_steps() {
  const int64_t n = kSize;
  std::vector<float> a = random_vector(n * n, 1), b = random_vector(n * n, 2), c(n * n);
  auto library = [&] {
    kernels::fast_table().gemm(false, false, n, n, n, 1.0f, a.data(), n, 0, b.data(), n, 0, 0.0f,
                               c.data(), n, 0, 1);
  };
  struct Step {
    const char* name;
    int threads;
    std::function<void()> run;
  };
  std::vector<Step> steps = {
      {"1 textbook loop (scalar)", 1, [&] { textbook(a.data(), b.data(), c.data(), n); }},
      {"2 SIMD rows", 1, [&] { simd_rows(a.data(), b.data(), c.data(), n); }},
      {"3 tiled + packed (gemm.cpp)", 1, library},
      {"4 tiled + packed, 2 threads", 2, library},
  };
  std::printf("\nGEMM from a loop to the library, %ld^3 (GFLOP/s; %% of the measured FMA peak)\n"
              "%-30s %9s %7s\n",
              static_cast<long>(n), "step", "GFLOP/s", "peak");
  double peak[3] = {0, fma_peak_gflops(1), fma_peak_gflops(2)};
  for (const Step& s : steps) {
    kernels::set_num_threads(s.threads);
    double gflops = best_gflops(s.run);
    std::printf("%-30s %9.1f %6.1f%%\n", s.name, gflops, 100 * gflops / peak[s.threads]);
    add_record("gemm_steps", s.name, s.threads, gflops, peak[s.threads], "fma_peak", "GFLOP/s");
  }
  std::printf("%-30s %9.1f\n%-30s %9.1f\n", "FMA peak, 1 thread", peak[1], "FMA peak, 2 threads", peak[2]);
}

}  // namespace sf::bench
