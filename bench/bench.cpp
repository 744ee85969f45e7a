// `make bench`: our kernels beside a reference measured in the same run.
// GEMM in GFLOP/s against OpenBLAS's cblas_sgemm and the machine's measured
// FMA peak (fma_peak.cpp), the bf16 GEMM against our float32 one and the
// measured VDPBF16PS peak (gemm_bf16.cpp); memory-bound kernels in GB/s
// against memcpy's bandwidth on the same bytes. Ours and the reference run in
// interleaved trials (A B A B ...) and each figure is the median, so a machine
// whose speed drifts (this VM's 2-thread speed does, for seconds at a time)
// affects both alike. Writes every comparison to build/bench.json.
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <unistd.h>

#include "autograd/kernels/kernels.h"
#include "autograd/kernels/thread_pool.h"
#include "bench_util.h"

using namespace sf;
using namespace sf::bench;
using namespace sf::kernels;

namespace {

// GEMM beside OpenBLAS, and each as a fraction of the measured FMA peak.
void bench_gemm(int threads, double peak) {
  std::printf("\nGEMM, %d thread%s (GFLOP/s; peak: the measured FMA peak, %.1f GFLOP/s)\n"
              "%-28s %9s %9s %7s %7s\n",
              threads, threads > 1 ? "s" : "", peak, "case", "ours", "openblas", "ratio", "peak");
  for (const GemmCase& c : gemm_cases({64, 128, 256, 512, 1024})) {
    int64_t lda = c.trans_a ? c.m : c.k, ldb = c.trans_b ? c.k : c.n;
    std::vector<float> a = random_vector(c.m * c.k, 1), b = random_vector(c.k * c.n, 2);
    std::vector<float> out(c.m * c.n);
    auto [ours, ref] = interleaved(
        [&] {
          fast_table().gemm(c.trans_a, c.trans_b, c.m, c.n, c.k, 1.0f, a.data(), lda, 0, b.data(),
                            ldb, 0, 0.0f, out.data(), c.n, 0, 1);
        },
        [&] {
          cblas_sgemm(CblasRowMajor, c.trans_a ? CblasTrans : CblasNoTrans,
                      c.trans_b ? CblasTrans : CblasNoTrans, c.m, c.n, c.k, 1.0f, a.data(), lda,
                      b.data(), ldb, 0.0f, out.data(), c.n);
        });
    double flops = 2.0 * c.m * c.n * c.k;
    std::string name = gemm_name(c);
    double gflops = flops / ours * 1e-9;
    std::printf("%-28s %9.1f %9.1f %7.3f %6.0f%%\n", name.c_str(), gflops, flops / ref * 1e-9, ref / ours,
                100 * gflops / peak);
    add_record("gemm", name, threads, gflops, flops / ref * 1e-9, "openblas", "GFLOP/s")["peak_fraction"] =
        gflops / peak;
  }
}

// A memory-bound kernel: `bytes` read plus written per call.
struct MemoryCase {
  const char* name;
  double bytes;
  std::function<void()> run;
};

void bench_memory(int threads) {
  // Transformer-sized activations: 2048 tokens x d_model 512, or 2048 x 8000 logits.
  const int64_t rows = 2048, cols = 512, n = rows * cols, vocab = 8000;
  std::vector<float> x = random_vector(n, 3), y = random_vector(n, 4), out(n), dx(n);
  std::vector<float> bias = random_vector(cols, 5), alpha(cols, 1.0f), mean(rows), stdv(rows);
  std::vector<float> logits = random_vector(rows * vocab, 6), log_probs(rows * vocab), loss(rows), counted(rows);
  const float loss_scale = 1e-3f;
  std::vector<int32_t> targets(rows), ids(rows);
  for (int64_t r = 0; r < rows; ++r) targets[r] = ids[r] = static_cast<int32_t>((r * 131) % vocab);
  std::vector<float> table = random_vector(vocab * cols, 7);
  const Rows full = rows_view({rows, cols}, {{cols, 1}, {cols, 1}}), add_bias = rows_view({rows, cols}, {{cols, 1}, {0, 1}});
  const Rows bias_grad = rows_view({rows, cols}, {{cols, 1}, {0, 1}}), plain = rows_view({rows, cols}, {{0, 0}}, true);
  const HostTable& t = fast_table();
  double f = sizeof(float);
  std::vector<MemoryCase> cases = {
      {"add [2048,512]", 3 * n * f,
       [&] { t.binary(Binary::Add, x.data(), y.data(), out.data(), full); }},
      {"add bias [2048,512]+[512]", 2 * n * f,
       [&] { t.binary(Binary::Add, x.data(), bias.data(), out.data(), add_bias); }},
      {"bias_relu [2048,512]", 2 * n * f, [&] { t.bias_relu(x.data(), bias.data(), rows, cols, out.data()); }},
      {"relu_backward", 3 * n * f, [&] { t.relu_backward(x.data(), y.data(), out.data(), n); }},
      {"sum_to bias grad", n * f, [&] { t.sum_to(x.data(), out.data(), bias_grad); }},
      {"softmax rows of 512", 2 * n * f,
       [&] { t.masked_softmax(x.data(), nullptr, plain, 1.0f, out.data()); }},
      {"softmax_backward", 3 * n * f,
       [&] { t.masked_softmax_backward(x.data(), y.data(), nullptr, plain, 1.0f, out.data()); }},
      {"layer_norm", 2 * n * f, [&] {
         t.layer_norm(x.data(), alpha.data(), bias.data(), rows, cols, 1e-6f, out.data(), mean.data(), stdv.data());
       }},
      {"layer_norm_backward", 3 * n * f, [&] {
         t.layer_norm_backward(x.data(), alpha.data(), mean.data(), stdv.data(), y.data(), rows, cols,
                               1e-6f, dx.data(), out.data(), out.data() + cols);
       }},
      {"dropout p=0.1", 2 * n * f, [&] { t.dropout(x.data(), out.data(), n, 1.0f / 0.9f, 7, 429496730u); }},
      {"cross_entropy [2048,8000]", 2.0 * rows * vocab * f, [&] {
         t.cross_entropy(logits.data(), targets.data(), rows, vocab, 1, 0.1f, loss.data(), counted.data(),
                         log_probs.data());
       }},
      {"cross_entropy_backward", 2.0 * rows * vocab * f, [&] {
         t.cross_entropy_backward(log_probs.data(), targets.data(), rows, vocab, 1, 0.1f, &loss_scale,
                                  logits.data());
       }},
      {"embedding gather", 2 * n * f, [&] { t.gather_rows(table.data(), ids.data(), rows, cols, out.data()); }},
  };
  std::printf("\nMemory-bound kernels, %d thread%s (GB/s; memcpy of the same bytes)\n%-28s %9s %9s %7s\n",
              threads, threads > 1 ? "s" : "", "case", "ours", "memcpy", "ratio");
  std::vector<char> src(static_cast<size_t>(2.0 * rows * vocab * f)), dst(src.size());
  for (const MemoryCase& c : cases) {
    // memcpy moves bytes/2 in and bytes/2 out: the same traffic.
    size_t half = static_cast<size_t>(c.bytes / 2);
    auto [ours, ref] = interleaved(c.run, [&] { std::memcpy(dst.data(), src.data(), half); });
    std::printf("%-28s %9.1f %9.1f %7.3f\n", c.name, c.bytes / ours * 1e-9, c.bytes / ref * 1e-9, ref / ours);
    add_record("memory", c.name, threads, c.bytes / ours * 1e-9, c.bytes / ref * 1e-9, "memcpy", "GB/s");
  }
}

// Both peaks, 1 and 2 threads: printed, recorded and returned (the
// VDPBF16PS one none without AVX512-BF16).
std::pair<double, std::optional<double>> measured_peaks(int threads) {
  const char* plural = threads > 1 ? "s" : "";
  double fma = fma_peak_gflops(threads);
  std::printf("\nmeasured FMA peak, %d thread%s: %.1f GFLOP/s\n", threads, plural, fma);
  add_record("fma_peak", "measured FMA peak", threads, fma, fma, "fma_peak", "GFLOP/s");
  std::optional<double> bf16 = bf16_peak_gflops(threads);
  if (!bf16) {
    std::printf("measured VDPBF16PS peak: skipped, this CPU has no AVX512-BF16\n");
    return {fma, bf16};
  }
  std::printf("measured VDPBF16PS peak, %d thread%s: %.1f GFLOP/s, %.2fx the FMA peak\n", threads, plural,
              *bf16, *bf16 / fma);
  add_record("bf16_peak", "measured VDPBF16PS peak", threads, *bf16, fma, "fma_peak", "GFLOP/s");
  return {fma, bf16};
}

// OpenBLAS chooses its kernels by the CPU's family and model when it loads. A
// CPU newer than the installed OpenBLAS gets the generic "Prescott" (SSE3)
// kernels: Debian 12's 0.3.21 does so on Emerald Rapids (family 6, model
// 207), where they run 4-5x slower than its AVX-512 ones, and a reference that
// slow would flatter every ratio of the bench, PyTorch's included (it calls
// the same library). The core to name instead (OPENBLAS_CORETYPE, read at
// load), or nullptr where OpenBLAS chose well or the user chose already.
// (0.3.21 does not take "Cooperlake" here: it warns "Core not found" and
// detects again; its float32 kernels are SkylakeX's anyway.)
const char* openblas_core_to_set() {
  if (std::getenv("OPENBLAS_CORETYPE") || std::strcmp(openblas_get_corename(), "Prescott") != 0) return nullptr;
  if (__builtin_cpu_supports("avx512f")) return "SkylakeX";
  if (__builtin_cpu_supports("avx2")) return "Haswell";
  return nullptr;
}

}  // namespace

// Usage: bench [OUT.json [PART...]]: every part by default, else the parts
// named (gemm, gemm_bf16, memory, train, train_bf16, train_bf16_portable, profile, gemm_steps,
// onnx_decode, opencl_gemm). `bench --openblas-coretype` prints the OpenBLAS core the
// bench would name, if any (bench/data_parallel.py sets it for PyTorch).
int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--openblas-coretype") {
    if (const char* core = openblas_core_to_set()) std::printf("%s\n", core);
    return 0;
  }
  // OpenBLAS reads its settings once, when it loads: the bench sets them and
  // starts itself again (once, with both). Its idle workers spin for 2^28
  // cycles (~0.1 s) after each call before they sleep, so in interleaved
  // trials they would hold the second core while our own threads run and
  // halve our 2-thread figures. 2^18 cycles (~70 us) keeps them spinning
  // between OpenBLAS's own back-to-back calls, as they would in a user's
  // program, and idle before our trial starts (trials are apart,
  // bench_util.h). And the kernels: openblas_core_to_set.
  const char* core = openblas_core_to_set();
  if (core) {
    std::printf("OpenBLAS chose its generic %s kernels for this CPU; the bench names %s (OPENBLAS_CORETYPE)\n",
                openblas_get_corename(), core);
    std::fflush(stdout);
    setenv("OPENBLAS_CORETYPE", core, 1);
  }
  if (core || !std::getenv("OPENBLAS_THREAD_TIMEOUT")) {
    setenv("OPENBLAS_THREAD_TIMEOUT", "18", 0);
    execv("/proc/self/exe", argv);
  }
  if (argc > 1 && std::string(argv[1]) == "--measure") return measure(argc, argv);
  std::printf("%s, core %s\n", openblas_get_config(), openblas_get_corename());
  std::string out_path = argc > 1 ? argv[1] : "build/bench.json";
  std::vector<std::string> parts(argv + std::min(argc, 2), argv + argc);
  auto wanted = [&](const std::string& part) {
    return parts.empty() || std::find(parts.begin(), parts.end(), part) != parts.end();
  };
  for (int threads : {1, 2}) {
    auto [peak, bf16_peak] = measured_peaks(threads);
    set_num_threads(threads);
    openblas_set_num_threads(threads);
    if (wanted("gemm")) bench_gemm(threads, peak);
    if (wanted("gemm_bf16")) bench_gemm_bf16(threads, bf16_peak);
    if (wanted("memory")) bench_memory(threads);
  }
  if (wanted("train")) bench_train_steps();
  if (wanted("train_bf16")) bench_train_steps_bf16();
  if (wanted("train_bf16_portable")) bench_portable_bf16_steps();
  if (wanted("profile")) bench_step_profile();
  if (wanted("gemm_steps")) bench_gemm_steps();
  if (wanted("onnx_decode")) bench_onnx_decode();
#ifdef SF_OPENCL
  if (wanted("opencl_gemm")) bench_opencl_gemm();
#endif
  std::string tmp = out_path + ".tmp";
  std::ofstream(tmp) << records().dump(1) << "\n";
  std::rename(tmp.c_str(), out_path.c_str());
  std::printf("\nwrote %s (%zu records)\n", out_path.c_str(), records().size());
}
