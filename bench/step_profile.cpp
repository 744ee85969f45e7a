// Where a training step's time goes, so the next person knows what to make
// faster: the step split by phase (forward with the loss, backward, optimizer)
// and by kernel. The kernels are timed by a host table whose every entry wraps
// the fast table's (`timed`), made active for the run; what the kernels do not
// account for is the framework around them (graph, allocation, dispatch).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "autograd/kernels/kernels.h"
#include "autograd/kernels/thread_pool.h"
#include "autograd/ops.h"
#include "bench_util.h"
#include "step_models.h"
#include "optim/optimizer.h"

namespace sf::bench {
namespace {

using Clock = std::chrono::steady_clock;

std::map<std::string, double>& kernel_seconds() {
  static std::map<std::string, double> seconds;
  return seconds;
}

// Floating-point operations done by the timed GEMM calls (2 per multiply-add).
double& gemm_flops() {
  static double flops = 0;
  return flops;
}

// Adds the time from its construction to its destruction to `name`'s total.
class KernelTimer {
 public:
  explicit KernelTimer(const char* name) : name_(name), start_(Clock::now()) {}
  ~KernelTimer() { kernel_seconds()[name_] += std::chrono::duration<double>(Clock::now() - start_).count(); }
  KernelTimer(const KernelTimer&) = delete;
  KernelTimer& operator=(const KernelTimer&) = delete;

 private:
  const char* name_;
  Clock::time_point start_;
};

// One GEMM shape of the step, for one of the three GEMM entries (float32,
// bf16 operands, float32 operands rounded to bf16): its calls' seconds and
// operations, and the first call's arguments, to run it again alone.
struct GemmShape {
  const char* entry;
  bool trans_a, trans_b;
  int64_t m, n, k, lda, stride_a, ldb, stride_b, ldc, stride_c, batch;
  float alpha, beta;
  int64_t calls = 0;
  double seconds = 0, flops = 0;
};

std::map<std::string, GemmShape>& gemm_shapes() {
  static std::map<std::string, GemmShape> shapes;
  return shapes;
}

// The fast table's entry, timed.
#define TIMED(entry)                                  \
  t.entry = [](auto... args) {                        \
    KernelTimer timer(#entry);                        \
    return kernels::fast_table().entry(args...);      \
  };

// A GEMM entry of the fast table, timed and its floating-point operations
// counted, by shape.
#define TIMED_GEMM(entry)                                                                                     \
  t.entry = [](bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, auto a, int64_t lda,           \
               int64_t stride_a, auto b, int64_t ldb, int64_t stride_b, float beta, float* c, int64_t ldc,    \
               int64_t stride_c, int64_t batch) {                                                             \
    const auto start = Clock::now();                                                                          \
    kernels::fast_table().entry(ta, tb, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta, c, ldc,     \
                                stride_c, batch);                                                             \
    count_gemm(#entry, std::chrono::duration<double>(Clock::now() - start).count(),                           \
               GemmShape{#entry, ta, tb, m, n, k, lda, stride_a, ldb, stride_b, ldc, stride_c, batch, alpha,   \
                         beta});                                                                              \
  };

void count_gemm(const char* entry, double seconds, const GemmShape& call) {
  const double flops = 2.0 * static_cast<double>(call.m * call.n) * static_cast<double>(call.k * call.batch);
  kernel_seconds()[entry] += seconds;
  gemm_flops() += flops;
  const std::string key = std::string(entry == std::string("gemm") ? "" : "bf16 ") + (call.trans_a ? "T" : "N") +
                          (call.trans_b ? "T" : "N") + " m=" + std::to_string(call.m) + " n=" +
                          std::to_string(call.n) + " k=" + std::to_string(call.k) + " x" + std::to_string(call.batch);
  GemmShape& shape = gemm_shapes().try_emplace(key, call).first->second;
  shape.calls += 1;
  shape.seconds += seconds;
  shape.flops += flops;
}

const kernels::HostTable& timed_table() {
  static const kernels::HostTable table = [] {
    kernels::HostTable t = kernels::fast_table();
    t.name = "timed";
    SF_KERNEL_LIST(TIMED)
    TIMED_GEMM(gemm)
    TIMED_GEMM(gemm_bf16)
    TIMED_GEMM(gemm_rounded_bf16)
    return t;
  }();
  return table;
}
#undef TIMED_GEMM
#undef TIMED

double since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// The shapes that take most of the step's GEMM time, each at its speed in the
// step and alone (the same call repeated on operands left in cache by the
// last): where the two differ, the step's operands come from farther away
// than the shape needs.
void print_gemm_shapes(int steps, double peak, nlohmann::json& split) {
  std::vector<std::pair<double, std::string>> by_time;
  for (const auto& [key, shape] : gemm_shapes()) by_time.push_back({shape.seconds, key});
  std::sort(by_time.rbegin(), by_time.rend());
  std::printf("  GEMM by shape (op(A) op(B), C m x n, batch), ms per step, GFLOP/s in the step and alone:\n");
  for (size_t i = 0; i < std::min<size_t>(by_time.size(), 8); ++i) {
    const std::string& key = by_time[i].second;
    const GemmShape& g = gemm_shapes().at(key);
    const size_t a_size = kernels::gemm_operand_extent(g.trans_a, g.m, g.k, g.lda, g.stride_a, g.batch);
    const size_t b_size = kernels::gemm_operand_extent(g.trans_b, g.k, g.n, g.ldb, g.stride_b, g.batch);
    std::vector<float> a(a_size, 0.5f), b(b_size, 0.25f);
    std::vector<bf16> a16(a_size, kernels::to_bf16(0.5f)), b16(b_size, kernels::to_bf16(0.25f));
    std::vector<float> c(kernels::gemm_operand_extent(false, g.m, g.n, g.ldc, g.stride_c, g.batch), 0.0f);
    const kernels::HostTable& fast = kernels::fast_table();
    const std::string entry = g.entry;
    const double alone = interleaved({[&] {
      if (entry == "gemm_bf16")
        fast.gemm_bf16(g.trans_a, g.trans_b, g.m, g.n, g.k, g.alpha, a16.data(), g.lda, g.stride_a, b16.data(),
                       g.ldb, g.stride_b, g.beta, c.data(), g.ldc, g.stride_c, g.batch);
      else
        (entry == "gemm" ? fast.gemm : fast.gemm_rounded_bf16)(g.trans_a, g.trans_b, g.m, g.n, g.k, g.alpha,
                                                                 a.data(), g.lda, g.stride_a, b.data(), g.ldb,
                                                                 g.stride_b, g.beta, c.data(), g.ldc, g.stride_c,
                                                                 g.batch);
    }})[0];
    const double in_step = g.flops / g.seconds * 1e-9, by_itself = g.flops / g.calls / alone * 1e-9;
    std::printf("    %-30s %7.2f ms %3lld calls %7.1f %7.1f (%.0f%% and %.0f%% of peak)\n", key.c_str(),
                g.seconds / steps * 1e3, static_cast<long long>(g.calls / steps), in_step, by_itself,
                100 * in_step / peak, 100 * by_itself / peak);
    split["gemm_shapes"][key] = {{"ms", g.seconds / steps * 1e3}, {"gflops_in_step", in_step},
                                 {"gflops_alone", by_itself}};
  }
}

}  // namespace

void bench_step_profile() {
  constexpr int kWarmup = 3, kSteps = 10;
  const double fma_peak = fma_peak_gflops(2);
  const std::optional<double> bf16_peak = bf16_peak_gflops(2);
  kernels::set_num_threads(2);
  for (const DType precision : {DType::F32, DType::BF16})
    for (const std::string model_name : {"tiny", "small"}) {
      const bool bf16 = precision == DType::BF16;
      // bf16 products against the VDPBF16PS peak where the CPU has one.
      const double peak = bf16 ? bf16_peak.value_or(fma_peak) : fma_peak;
      TrainingSteps run(config_named(model_name), cpu());
      double forward = 0, backward = 0, update = 0;
      for (int i = 0; i < kWarmup + kSteps; ++i) {
        if (i == kWarmup) {  // measure from here on
          kernels::set_active(timed_table());
          kernel_seconds().clear();
          gemm_shapes().clear();
          gemm_flops() = 0;
          forward = backward = update = 0;
        }
        auto start = Clock::now();
        Tensor loss;
        {
          AutocastGuard autocast(precision);
          loss = step_loss(*run.model, run.next_batch());
        }
        (void)loss.item();
        forward += since(start);
        start = Clock::now();
        loss.backward();
        backward += since(start);
        start = Clock::now();
        run.adam.step();
        run.adam.zero_grad();
        update += since(start);
      }
      kernels::set_active(kernels::fast_table());
      double step = (forward + backward + update) / kSteps * 1e3, kernels_total = 0, gemm_seconds = 0;
      std::vector<std::pair<double, std::string>> by_kernel;
      for (const auto& [name, seconds] : kernel_seconds()) {
        by_kernel.push_back({seconds / kSteps * 1e3, name});
        kernels_total += seconds / kSteps * 1e3;
        if (name.starts_with("gemm")) gemm_seconds += seconds;
      }
      std::sort(by_kernel.rbegin(), by_kernel.rend());
      std::printf("\nWhere a %s training step goes, %s, 2 threads (ms per step, mean of %d): %.1f ms\n"
                  "  forward + loss %.1f, backward %.1f, optimizer %.1f\n"
                  "  kernels %.1f (%.0f%%), around them %.1f:\n",
                  model_name.c_str(), bf16 ? "bf16 products" : "float32", kSteps, step, forward / kSteps * 1e3,
                  backward / kSteps * 1e3, update / kSteps * 1e3, kernels_total, 100 * kernels_total / step,
                  step - kernels_total);
      nlohmann::json split = {{"forward_ms", forward / kSteps * 1e3},
                              {"backward_ms", backward / kSteps * 1e3},
                              {"optimizer_ms", update / kSteps * 1e3}};
      for (const auto& [ms, name] : by_kernel) {
        if (ms >= 0.01 * step) std::printf("    %-26s %7.2f ms %5.1f%%\n", name.c_str(), ms, 100 * ms / step);
        split["kernels_ms"][name] = ms;
      }
      // The matrix products' speed, inside the GEMM calls and over the whole
      // step, as fractions of the measured 2-thread peak of the precision.
      const double gflop = gemm_flops() / kSteps * 1e-9, in_gemm = gflop / (gemm_seconds / kSteps);
      const double over_step = gflop / (step * 1e-3);
      std::printf("  matrix products: %.2f GFLOP per step, %.1f GFLOP/s inside GEMM (%.0f%% of the %.0f GFLOP/s\n"
                  "  2-thread %s peak), %.1f GFLOP/s over the whole step (%.0f%%)\n",
                  gflop, in_gemm, 100 * in_gemm / peak, peak, bf16 && bf16_peak ? "VDPBF16PS" : "FMA",
                  over_step, 100 * over_step / peak);
      split["gemm_gflop_per_step"] = gflop;
      split["gemm_peak_fraction"] = in_gemm / peak;
      print_gemm_shapes(kSteps, peak, split);
      split["step_peak_fraction"] = over_step / peak;
      add_record("step_profile", model_name + (bf16 ? "_bf16" : ""), 2, step, step, "self", "ms")["split"] = split;
    }
}

}  // namespace sf::bench
