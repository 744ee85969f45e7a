// Our OpenCL GEMM beside CLBlast's SGEMM (the reference; only the benchmark
// links it) on the same device, queue and buffers, over the CPU tables' cases.
// Each call is timed to completion (the queue drained), in interleaved trials.
#ifdef SF_OPENCL
// The runtime first: it sets the OpenCL version the headers target.
#include "autograd/opencl/runtime.h"
// clang-format off
#include <clblast_c.h>
// clang-format on

#include <cstdio>

#include "autograd/opencl/opencl.h"
#include "autograd/tensor.h"
#include "bench_util.h"

namespace sf::bench {
namespace {

// A tensor's buffer as CLBlast takes it.
cl_mem handle(const Tensor& t) { return static_cast<cl_mem>(t.mem().buffer); }

}  // namespace

void bench_opencl_gemm() {
  Device& device = opencl();
  cl_command_queue queue = opencl_backend::Runtime::get().queue();
  std::printf("\nOpenCL GEMM on %s (GFLOP/s)\n%-28s %9s %9s %7s\n", device.description().c_str(), "case",
              "ours", "clblast", "ratio");
  for (const GemmCase& c : gemm_cases({256, 1024})) {
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
    std::printf("%-28s %9.1f %9.1f %7.3f\n", gemm_name(c).c_str(), flops / ours * 1e-9, flops / ref * 1e-9,
                ref / ours);
    add_record("opencl_gemm", gemm_name(c), 0, flops / ours * 1e-9, flops / ref * 1e-9, "clblast", "GFLOP/s");
  }
}

}  // namespace sf::bench
#endif  // SF_OPENCL
