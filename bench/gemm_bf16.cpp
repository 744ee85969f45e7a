// `bench OUT.json gemm_bf16`: the bf16 GEMM (gemm_bf16: bf16 operands, float32
// accumulation) beside our float32 GEMM on the same shapes, in interleaved
// trials, and as a fraction of the measured VDPBF16PS peak (fma_peak.cpp). The
// goals (issue 22): bf16 at least 1.7x float32 on the Transformer's shapes, and
// at least 80% of the peak at 1024^3.
//
// The shapes: the float32 table's Transformer products and 1024^3
// (bench_util.h), then every distinct product of a training step of the tiny
// and the small model (step_models.h), recorded from a real step, with a last
// row per model for all its products together, weighted by how often a step
// runs each.
//
// OpenBLAS as a reference: its cblas.h declares cblas_sbgemm, but Debian's
// libopenblas 0.3.21 is built without bfloat16 support and does not export it,
// so it is looked up when the bench runs and its column is shown only where a
// library has it.
#include <cblas.h>
#include <dlfcn.h>

#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "autograd/device.h"
#include "autograd/kernels/gemm.h"
#include "autograd/kernels/kernels.h"
#include "bench_util.h"
#include "step_models.h"

namespace sf::bench {
namespace {

using kernels::bf16;

struct Product {
  GemmCase shape;
  int64_t batch = 1;
  int per_step = 1;  // how many times a training step runs it
};

std::string product_name(const Product& p) {
  return gemm_name(p.shape) + (p.batch > 1 ? " x" + std::to_string(p.batch) : "");
}

double product_flops(const Product& p) {
  return 2.0 * static_cast<double>(p.shape.m * p.shape.n) * static_cast<double>(p.shape.k * p.batch);
}

// The products a training step of `c` runs (forward, loss, backward), as
// (trans_a, trans_b, m, n, k, batch) with their counts: one step runs with a
// table whose gemm and gemm_bf16 entries note their arguments. Leading
// dimensions and batch strides are not kept: the bench runs each product on
// contiguous operands.
std::vector<Product> step_products(const StepConfig& c) {
  using Key = std::tuple<bool, bool, int64_t, int64_t, int64_t, int64_t>;
  static std::map<Key, int> seen;  // static: the table's entries are plain function pointers
  seen.clear();
  kernels::HostTable recording = kernels::fast_table();
  recording.gemm = [](bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                      int64_t lda, int64_t stride_a, const float* b, int64_t ldb, int64_t stride_b, float beta,
                      float* out, int64_t ldc, int64_t stride_c, int64_t batch) {
    ++seen[{ta, tb, m, n, k, batch}];
    kernels::fast_table().gemm(ta, tb, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta, out, ldc,
                               stride_c, batch);
  };
  recording.gemm_bf16 = [](bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const bf16* a,
                           int64_t lda, int64_t stride_a, const bf16* b, int64_t ldb, int64_t stride_b,
                           float beta, float* out, int64_t ldc, int64_t stride_c, int64_t batch) {
    ++seen[{ta, tb, m, n, k, batch}];
    kernels::fast_table().gemm_bf16(ta, tb, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta, out,
                                    ldc, stride_c, batch);
  };
  auto model = build(c, cpu());
  Rng data(7);
  StepBatch batch = random_batch(c, data);
  kernels::set_active(recording);
  step_loss(*model, batch).backward();
  kernels::set_active(kernels::fast_table());
  std::vector<Product> products;
  for (const auto& [key, count] : seen) {
    auto [ta, tb, m, n, k, b] = key;
    products.push_back({{ta, tb, m, n, k}, b, count});
  }
  return products;
}

// OpenBLAS's bf16 GEMM where the library exports it, else null.
decltype(&cblas_sbgemm) openblas_sbgemm() {
  static auto f = reinterpret_cast<decltype(&cblas_sbgemm)>(dlsym(RTLD_DEFAULT, "cblas_sbgemm"));
  return f;
}

// One product's operands, float32 and the same values rounded to bf16.
struct Operands {
  std::vector<float> a, b, out;
  std::vector<bf16> a16, b16;

  explicit Operands(const Product& p)
      : a(random_vector(p.shape.m * p.shape.k * p.batch, 1)),
        b(random_vector(p.shape.k * p.shape.n * p.batch, 2)),
        out(p.shape.m * p.shape.n * p.batch) {
    for (float x : a) a16.push_back(kernels::to_bf16(x));
    for (float x : b) b16.push_back(kernels::to_bf16(x));
  }
};

// Seconds per call.
struct Timings {
  double ours_bf16, ours_fp32;
  std::optional<double> sbgemm;
};

// Median seconds of our bf16 and float32 GEMMs (and OpenBLAS's sbgemm where
// there is one) on `p`, in interleaved trials.
Timings time_product(const Product& p) {
  const GemmCase& c = p.shape;
  Operands o(p);
  const int64_t lda = c.trans_a ? c.m : c.k, ldb = c.trans_b ? c.k : c.n;
  const int64_t sa = c.m * c.k, sb = c.k * c.n, sc = c.m * c.n;
  std::vector<std::function<void()>> runs = {
      [&] {
        kernels::fast_table().gemm_bf16(c.trans_a, c.trans_b, c.m, c.n, c.k, 1.0f, o.a16.data(), lda, sa,
                                        o.b16.data(), ldb, sb, 0.0f, o.out.data(), c.n, sc, p.batch);
      },
      [&] {
        kernels::fast_table().gemm(c.trans_a, c.trans_b, c.m, c.n, c.k, 1.0f, o.a.data(), lda, sa, o.b.data(),
                                   ldb, sb, 0.0f, o.out.data(), c.n, sc, p.batch);
      }};
  if (auto sbgemm = openblas_sbgemm())
    runs.push_back([&, sbgemm] {
      for (int64_t i = 0; i < p.batch; ++i)
        sbgemm(CblasRowMajor, c.trans_a ? CblasTrans : CblasNoTrans, c.trans_b ? CblasTrans : CblasNoTrans,
               c.m, c.n, c.k, 1.0f, &o.a16[i * sa].bits, lda, &o.b16[i * sb].bits, ldb, 0.0f,
               o.out.data() + i * sc, c.n);
    });
  std::vector<double> s = interleaved(runs);
  return {s[0], s[1], s.size() > 2 ? std::optional(s[2]) : std::nullopt};
}

std::string percent(std::optional<double> fraction) {
  return fraction ? std::to_string(static_cast<int>(100 * *fraction + 0.5)) + "%" : "-";
}

// One row: figures in GFLOP/s for `flops` done in the timings' seconds.
void print_row(const std::string& name, int threads, double flops, const Timings& t,
               std::optional<double> peak) {
  const double bf16_rate = flops / t.ours_bf16 * 1e-9, fp32_rate = flops / t.ours_fp32 * 1e-9;
  std::optional<double> fraction = peak ? std::optional(bf16_rate / *peak) : std::nullopt;
  std::printf("%-34s %8.1f %8.1f %6.2f %6s", name.c_str(), bf16_rate, fp32_rate, bf16_rate / fp32_rate,
              percent(fraction).c_str());
  if (t.sbgemm) std::printf(" %8.1f", flops / *t.sbgemm * 1e-9);
  std::printf("\n");
  nlohmann::json& r = add_record("gemm_bf16", name, threads, bf16_rate, fp32_rate, "ours fp32", "GFLOP/s");
  if (fraction) r["peak_fraction"] = *fraction;
  if (t.sbgemm) r["openblas_sbgemm"] = flops / *t.sbgemm * 1e-9;
}

// 1024^3 at the default level, at the portable level (bf16 widened to
// float32, then fast::gemm: what a CPU without AVX512-BF16 gets) and the
// VDPBF16PS chains of the peak, in interleaved trials: the peak's goal read
// against a peak measured under the same conditions, which on a machine
// shared with other work (a second core busy for seconds) the table's peak,
// measured once before it, may not be.
void print_square_beside_peak(int threads) {
  const Product p{{false, false, 1024, 1024, 1024}};
  const kernels::Bf16Gemm level = kernels::bf16_gemm();
  Operands o(p);
  auto at = [&](kernels::Bf16Gemm l) {
    return [&, l] {
      kernels::set_bf16_gemm(l);
      kernels::fast_table().gemm_bf16(false, false, 1024, 1024, 1024, 1.0f, o.a16.data(), 1024, 0,
                                      o.b16.data(), 1024, 0, 0.0f, o.out.data(), 1024, 0, 1);
    };
  };
  std::vector<std::function<void()>> runs = {at(level), at(kernels::Bf16Gemm::kPortable)};
  std::optional<PeakRun> peak = bf16_peak_run(threads);
  if (peak) runs.push_back(peak->run);
  std::vector<double> s = interleaved(runs);
  kernels::set_bf16_gemm(level);
  const double flops = product_flops(p), fast = flops / s[0] * 1e-9, portable = flops / s[1] * 1e-9;
  const std::string name = product_name(p), ours = std::string("ours bf16 ") + kernels::to_string(level);
  std::printf("%s, %s: %.1f GFLOP/s", name.c_str(), kernels::to_string(level), fast);
  if (peak) {
    const double peak_gflops = peak->flops / s[2] * 1e-9;
    std::printf(", %.0f%% of the VDPBF16PS peak measured beside it (%.1f GFLOP/s)", 100 * fast / peak_gflops,
                peak_gflops);
    add_record("gemm_bf16_peak", name, threads, fast, peak_gflops, "VDPBF16PS peak beside it", "GFLOP/s");
  }
  std::printf("\n%s, %s: %.1f GFLOP/s, %.2fx %s\n", name.c_str(), kernels::to_string(kernels::Bf16Gemm::kPortable),
              portable, portable / fast, kernels::to_string(level));
  add_record("gemm_bf16_portable", name, threads, portable, fast, ours, "GFLOP/s");
}

}  // namespace

void measure_gemm_bf16(int64_t size) {
  const Product p{{false, false, size, size, size}};
  const Timings t = time_product(p);
  const double flops = product_flops(p);
  nlohmann::json result = {{"level", kernels::to_string(kernels::bf16_gemm())},
                           {"bf16_gflops", flops / t.ours_bf16 * 1e-9},
                           {"fp32_gflops", flops / t.ours_fp32 * 1e-9},
                           {"ratio", t.ours_fp32 / t.ours_bf16}};
  std::printf("%s\n", result.dump().c_str());
}

void bench_gemm_bf16(int threads, std::optional<double> peak) {
  const std::string peak_text =
      peak ? std::to_string(static_cast<int>(*peak + 0.5)) + " GFLOP/s" : "none (no AVX512-BF16)";
  std::printf("\nbf16 GEMM (level %s), %d thread%s: GFLOP/s beside our float32 GEMM on the same shapes;\n"
              "peak: the measured VDPBF16PS peak, %s; goals: ratio >= 1.7, 1024^3 >= 80%% of the peak\n%s"
              "%-34s %8s %8s %6s %6s%s\n",
              kernels::to_string(kernels::bf16_gemm()), threads, threads > 1 ? "s" : "", peak_text.c_str(),
              openblas_sbgemm() ? "" : "(OpenBLAS's cblas_sbgemm: not in this libopenblas, no column)\n", "case",
              "bf16", "fp32", "ratio", "peak", openblas_sbgemm() ? "   sbgemm" : "");
  for (const GemmCase& c : gemm_cases({1024})) {
    const Product p{c};
    print_row(product_name(p), threads, product_flops(p), time_product(p), peak);
  }
  for (const StepConfig* c : {&kTiny, &kSmall}) {
    double flops = 0;
    Timings step{0, 0, openblas_sbgemm() ? std::optional(0.0) : std::nullopt};
    for (const Product& p : step_products(*c)) {
      Timings t = time_product(p);
      print_row(std::string(c->name) + " " + product_name(p), threads, product_flops(p), t, peak);
      flops += p.per_step * product_flops(p);
      step.ours_bf16 += p.per_step * t.ours_bf16;
      step.ours_fp32 += p.per_step * t.ours_fp32;
      if (t.sbgemm) *step.sbgemm += p.per_step * *t.sbgemm;
    }
    print_row(std::string(c->name) + " step, all products", threads, flops, step, peak);
  }
  print_square_beside_peak(threads);
}

}  // namespace sf::bench
