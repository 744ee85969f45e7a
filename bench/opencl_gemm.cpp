// Our OpenCL GEMM beside CLBlast's SGEMM (the reference; only the benchmark
// links it) on the same device, queue and buffers, over the CPU tables' cases
// and 2048^3. Each call is timed to completion (the queue drained), in
// interleaved trials. Both are read against the device's float32 peak,
// measured in the same run by a kernel of FMA chains, as fma_peak.cpp does for
// the CPU.
#ifdef SF_OPENCL
// The runtime first: it sets the OpenCL version the headers target.
#include "autograd/opencl/runtime.h"
// clang-format off
#include <clblast_c.h>
// clang-format on

#include <algorithm>
#include <cstdio>
#include <string>

#include "autograd/opencl/gemm.h"
#include "autograd/opencl/gemm_tuning.h"
#include "autograd/opencl/launch.h"
#include "autograd/opencl/opencl.h"
#include "autograd/tensor.h"
#include "bench_util.h"

namespace sf::bench {
namespace {

// A tensor's buffer as CLBlast takes it.
cl_mem handle(const Tensor& t) { return static_cast<cl_mem>(t.mem().buffer); }

// 16 independent FMA chains per item on registers only: enough to cover the
// FMA latency on a GPU whose scheduler also switches between many items.
constexpr int kChains = 16;
const opencl_backend::Source fma_peak_source{
    "fma_peak",
    {R"CLC(
__kernel void fma_peak(__global float* out, long out_off, int iterations) {
  float acc[16];
  for (int c = 0; c < 16; ++c) acc[c] = get_global_id(0) * 1e-9f + c;
  for (int i = 0; i < iterations; ++i)
#pragma unroll
    for (int c = 0; c < 16; ++c) acc[c] = fma(acc[c], 0.999999f, 1e-7f);
  float total = 0.0f;
  for (int c = 0; c < 16; ++c) total += acc[c];
  out[out_off + get_global_id(0)] = total;
}
)CLC"},
    "",
    {"fma_peak"}};

// The device's float32 FMA throughput in GFLOP/s: 2048 items per compute
// unit (enough to fill a GPU's), the chains lengthened until a run takes
// about 0.1 s; the best of 3 runs.
double fma_peak_gflops(Device& device) {
  using namespace opencl_backend;
  Runtime& runtime = Runtime::get();
  cl_uint units = 0;
  check(clGetDeviceInfo(runtime.device(), CL_DEVICE_MAX_COMPUTE_UNITS, sizeof units, &units, nullptr),
        "clGetDeviceInfo");
  size_t items = size_t{units} * 2048;
  Tensor out = Tensor::zeros({static_cast<int64_t>(items)}, DType::F32, device);
  cl_kernel kernel = runtime.kernel(fma_peak_source, "fma_peak");
  Grid grid{1, {items, 1, 1}, {64, 1, 1}};
  auto run = [&](int32_t iterations) {
    return seconds([&] {
      launch(kernel, grid, out.mem(), iterations);
      device.synchronize();
    });
  };
  int32_t iterations = 16;
  run(iterations);  // built, warmed up
  while (iterations < (1 << 24)) {
    double once = run(iterations);
    if (once > 0.05) break;
    iterations = static_cast<int32_t>(iterations * std::clamp(0.1 / std::max(once, 1e-6), 2.0, 64.0));
  }
  double best = run(iterations);
  for (int trial = 0; trial < 2; ++trial) best = std::min(best, run(iterations));
  return 2.0 * kChains * iterations * static_cast<double>(items) / best * 1e-9;
}

// Which GEMM kernel the device runs: the tiled one in the tiling tuned (or
// forced) for it, or the blocked one in CPU shapes.
std::string gemm_kernel() {
  using namespace opencl_backend;
  if (!Runtime::get().shapes().tiled_gemm) return "the blocked kernel (cpu shapes)";
  return "the tiled kernel in tiling " + tiling_name(kTilings[gemm_tiling()]);
}

}  // namespace

void bench_opencl_gemm() {
  Device& device = opencl();
  cl_command_queue queue = opencl_backend::Runtime::get().queue();
  double peak = fma_peak_gflops(device);
  std::printf("\nOpenCL GEMM on %s (GFLOP/s; float32 FMA peak measured: %.1f GFLOP/s)\n", device.description().c_str(),
              peak);
  std::printf("ours: %s\n%-28s %9s %9s %7s %7s %7s\n", gemm_kernel().c_str(), "case", "ours", "clblast", "ratio",
              "ours/pk", "cb/pk");
  add_record("opencl_gemm", "fma peak", 0, peak, peak, "fma_peak", "GFLOP/s");
  for (const GemmCase& c : gemm_cases({256, 1024, 2048})) {
    int64_t lda = c.trans_a ? c.m : c.k, ldb = c.trans_b ? c.k : c.n;
    Tensor a = Tensor::from(random_vector(c.m * c.k, 1), {c.m * c.k}).to(device),
           b = Tensor::from(random_vector(c.k * c.n, 2), {c.k * c.n}).to(device),
           out = Tensor::zeros({c.m * c.n}, DType::F32, device);
    auto [ours, ref] = interleaved(
        [&] {
          device.kernels().gemm(c.trans_a, c.trans_b, c.m, c.n, c.k, 1.0f, a.mem(), lda, 0, b.mem(), ldb, 0,
                                0.0f, out.mem(), c.n, 0, 1);
          device.synchronize();
        },
        [&] {
          CLBlastStatusCode status = CLBlastSgemm(
              CLBlastLayoutRowMajor, c.trans_a ? CLBlastTransposeYes : CLBlastTransposeNo,
              c.trans_b ? CLBlastTransposeYes : CLBlastTransposeNo, c.m, c.n, c.k, 1.0f, handle(a), 0, lda,
              handle(b), 0, ldb, 0.0f, handle(out), 0, c.n, &queue, nullptr);
          if (status != CLBlastSuccess) std::printf("CLBlastSgemm failed: status %d\n", status);
          device.synchronize();
        });
    double flops = 2.0 * c.m * c.n * c.k;
    double ours_gflops = flops / ours * 1e-9, ref_gflops = flops / ref * 1e-9;
    std::printf("%-28s %9.1f %9.1f %7.3f %6.1f%% %6.1f%%\n", gemm_name(c).c_str(), ours_gflops, ref_gflops,
                ref / ours, 100.0 * ours_gflops / peak, 100.0 * ref_gflops / peak);
    add_record("opencl_gemm", gemm_name(c), 0, flops / ours * 1e-9, flops / ref * 1e-9, "clblast", "GFLOP/s");
  }
}

}  // namespace sf::bench
#endif  // SF_OPENCL
