// `make bench`: our kernels beside a reference measured in the same run.
// GEMM in GFLOP/s against OpenBLAS's cblas_sgemm; memory-bound kernels in GB/s
// against memcpy's bandwidth on the same bytes. Ours and the reference run in
// interleaved trials (A B A B ...) and each figure is the median, so a machine
// whose speed drifts (this VM's 2-thread speed does, for seconds at a time)
// affects both alike. Writes every comparison to build/bench.json.
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "autograd/kernels/kernels.h"
#include "autograd/kernels/thread_pool.h"
#include "autograd/random.h"

using namespace sf;
using namespace sf::kernels;

namespace {

constexpr int kTrials = 7;

double seconds(const std::function<void()>& f) {
  auto start = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median seconds of each of the two, timed alternately after one warm-up each.
// Each trial repeats its function until it has run for a few milliseconds.
std::pair<double, double> interleaved(const std::function<void()>& ours,
                                      const std::function<void()>& ref) {
  int reps = 1;
  double once = seconds(ours);
  seconds(ref);
  if (once < 5e-3) reps = static_cast<int>(5e-3 / std::max(once, 1e-7)) + 1;
  auto timed = [reps](const std::function<void()>& f) {
    return seconds([&] {
             for (int r = 0; r < reps; ++r) f();
           }) /
           reps;
  };
  std::vector<double> a, b;
  for (int t = 0; t < kTrials; ++t) {
    a.push_back(timed(ours));
    b.push_back(timed(ref));
  }
  return {median(a), median(b)};
}

std::vector<float> random_vector(size_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = rng.uniform(-1.0f, 1.0f);
  return v;
}

nlohmann::json g_records = nlohmann::json::array();

void add_record(const std::string& bench, const std::string& name, int threads, double ours,
                double ref, const char* ref_name, const char* unit) {
  g_records.push_back({{"bench", bench}, {"case", name}, {"threads", threads}, {"ours", ours},
                       {"ref", ref}, {"ref_name", ref_name}, {"unit", unit},
                       {"speedup", ours / ref}});
}

struct GemmCase {
  bool trans_a, trans_b;
  int64_t m, n, k;
};

std::string layout_name(const GemmCase& c) {
  return std::string(c.trans_a ? "T" : "N") + (c.trans_b ? "T" : "N");
}

void bench_gemm(int threads) {
  std::vector<GemmCase> cases;
  for (auto [ta, tb] : {std::pair{false, false}, {false, true}, {true, false}}) {
    for (int64_t s : {64, 128, 256, 512, 1024}) cases.push_back({ta, tb, s, s, s});
    // The Transformer's products: d_model 256, d_ff 1024, a vocabulary of 8000.
    for (auto [k, n] : {std::pair<int64_t, int64_t>{256, 256}, {256, 1024}, {1024, 256}, {256, 8000}})
      cases.push_back({ta, tb, 2048, n, k});
  }
  std::printf("\nGEMM, %d thread%s (GFLOP/s)\n%-28s %9s %9s %7s\n", threads, threads > 1 ? "s" : "",
              "case", "ours", "openblas", "ratio");
  for (const GemmCase& c : cases) {
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
    std::string name = layout_name(c) + " m=" + std::to_string(c.m) + " n=" + std::to_string(c.n) +
                       " k=" + std::to_string(c.k);
    std::printf("%-28s %9.1f %9.1f %7.3f\n", name.c_str(), flops / ours * 1e-9, flops / ref * 1e-9,
                ref / ours);
    add_record("gemm", name, threads, flops / ours * 1e-9, flops / ref * 1e-9, "openblas", "GFLOP/s");
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
  int64_t shape[] = {rows, cols}, full[] = {cols, 1}, row[] = {0, 1};
  const HostTable& t = fast_table();
  double f = sizeof(float);
  std::vector<MemoryCase> cases = {
      {"add [2048,512]", 3 * n * f,
       [&] { t.binary(Binary::Add, {x.data(), full}, {y.data(), full}, out.data(), shape, 2); }},
      {"add bias [2048,512]+[512]", 2 * n * f,
       [&] { t.binary(Binary::Add, {x.data(), full}, {bias.data(), row}, out.data(), shape, 2); }},
      {"bias_relu [2048,512]", 2 * n * f, [&] { t.bias_relu(x.data(), bias.data(), rows, cols, out.data()); }},
      {"relu_backward", 3 * n * f, [&] { t.relu_backward(x.data(), y.data(), out.data(), n); }},
      {"sum_to bias grad", n * f, [&] {
         int64_t unit[] = {0, 1};
         std::fill(out.begin(), out.begin() + cols, 0.0f);
         t.sum_to(x.data(), shape, 2, out.data(), unit);
       }},
      {"softmax rows of 512", 2 * n * f, [&] { t.softmax(x.data(), out.data(), rows, cols); }},
      {"softmax_backward", 3 * n * f, [&] { t.softmax_backward(x.data(), y.data(), out.data(), rows, cols); }},
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

}  // namespace

int main(int argc, char** argv) {
  std::string out_path = argc > 1 ? argv[1] : "build/bench.json";
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    openblas_set_num_threads(threads);
    bench_gemm(threads);
    bench_memory(threads);
  }
  std::string tmp = out_path + ".tmp";
  std::ofstream(tmp) << g_records.dump(1) << "\n";
  std::rename(tmp.c_str(), out_path.c_str());
  std::printf("\nwrote %s (%zu records)\n", out_path.c_str(), g_records.size());
}
