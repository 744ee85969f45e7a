// Shared by the benchmark's parts: timing, the cases, the records that go to
// build/bench.json.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/random.h"

namespace sf::bench {

inline constexpr int kTrials = 7;

inline double seconds(const std::function<void()>& f) {
  auto start = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median seconds of each function, timed in turn (A B C A B C ...) after one
// warm-up each. Each trial repeats its function until the first function has
// run for a few milliseconds, the same count for all.
inline std::vector<double> interleaved(const std::vector<std::function<void()>>& runs) {
  int reps = 1;
  double once = seconds(runs[0]);
  for (size_t i = 1; i < runs.size(); ++i) seconds(runs[i]);
  if (once < 5e-3) reps = static_cast<int>(5e-3 / std::max(once, 1e-7)) + 1;
  auto timed = [reps](const std::function<void()>& f) {
    return seconds([&] {
             for (int r = 0; r < reps; ++r) f();
           }) /
           reps;
  };
  // A pause before each trial: both libraries' idle threads spin for a while
  // after their last call (ours 0.2 ms, OpenBLAS's 2^18 cycles as the bench
  // sets it), and must not compete with the other's trial for a core.
  auto pause = [] { std::this_thread::sleep_for(std::chrono::milliseconds(1)); };
  std::vector<std::vector<double>> trials(runs.size());
  for (int t = 0; t < kTrials; ++t)
    for (size_t i = 0; i < runs.size(); ++i) {
      pause();
      trials[i].push_back(timed(runs[i]));
    }
  std::vector<double> medians;
  for (const std::vector<double>& v : trials) medians.push_back(median(v));
  return medians;
}

// Ours beside a reference: the median seconds of each.
inline std::pair<double, double> interleaved(const std::function<void()>& ours,
                                             const std::function<void()>& ref) {
  std::vector<double> m = interleaved(std::vector<std::function<void()>>{ours, ref});
  return {m[0], m[1]};
}

inline std::vector<float> random_vector(size_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = rng.uniform(-1.0f, 1.0f);
  return v;
}

// Every comparison of the run, written to build/bench.json at the end.
// `speedup` > 1 means ours is faster: ours / ref for rates (GFLOP/s, GB/s),
// ref / ours for times (ms).
inline nlohmann::json& records() {
  static nlohmann::json all = nlohmann::json::array();
  return all;
}

// Returns the record, for fields of its own (e.g. a GEMM's fraction of the peak).
inline nlohmann::json& add_record(const std::string& bench, const std::string& name, int threads,
                                  double ours, double ref, const std::string& ref_name,
                                  const std::string& unit) {
  bool is_time = unit == "ms";
  records().push_back({{"bench", bench}, {"case", name}, {"threads", threads}, {"ours", ours},
                       {"ref", ref}, {"ref_name", ref_name}, {"unit", unit},
                       {"speedup", is_time ? ref / ours : ours / ref}});
  return records().back();
}

struct GemmCase {
  bool trans_a, trans_b;
  int64_t m, n, k;
};

// The GEMM cases of every backend's table: squares, and the Transformer's
// products at d_model 256, d_ff 1024 and a vocabulary of 8000 over 2048 tokens.
inline std::vector<GemmCase> gemm_cases(const std::vector<int64_t>& squares) {
  std::vector<GemmCase> cases;
  for (auto [ta, tb] : {std::pair{false, false}, {false, true}, {true, false}}) {
    for (int64_t s : squares) cases.push_back({ta, tb, s, s, s});
    for (auto [k, n] : {std::pair<int64_t, int64_t>{256, 256}, {256, 1024}, {1024, 256}, {256, 8000}})
      cases.push_back({ta, tb, 2048, n, k});
  }
  return cases;
}

inline std::string gemm_name(const GemmCase& c) {
  return std::string(c.trans_a ? "T" : "N") + (c.trans_b ? "T" : "N") + " m=" + std::to_string(c.m) +
         " n=" + std::to_string(c.n) + " k=" + std::to_string(c.k);
}

// Parts of the benchmark outside bench.cpp.
double fma_peak_gflops(int threads);  // fma_peak.cpp
// The VDPBF16PS peak (fma_peak.cpp); none on a CPU without AVX512-BF16.
std::optional<double> bf16_peak_gflops(int threads);
// The run it times, `threads` threads at once (the pool's size set by the
// caller), and the flops of one run: to be timed beside a GEMM.
struct PeakRun {
  double flops;
  std::function<void()> run;
};
std::optional<PeakRun> bf16_peak_run(int threads);
void bench_gemm_bf16(int threads, std::optional<double> bf16_peak);  // gemm_bf16.cpp
// JSON: our bf16 GEMM (its level) and float32 GEMM on size^3, GFLOP/s.
void measure_gemm_bf16(int64_t size);  // gemm_bf16.cpp
void bench_train_steps();  // train_step.cpp
void bench_train_steps_bf16();  // train_step.cpp
void bench_portable_bf16_steps();  // train_step.cpp
int measure(int argc, char** argv);  // train_step.cpp: `bench --measure ...`
void bench_step_profile();  // step_profile.cpp
void bench_gemm_steps();  // gemm_steps.cpp: the steps of docs/03-kernels.md
void bench_opencl_gemm();  // opencl_gemm.cpp (OPENCL=1 builds)
void bench_onnx_decode();  // onnx_decode.cpp: greedy decoding beside ONNX Runtime

}  // namespace sf::bench
