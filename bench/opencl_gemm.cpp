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
#include "bench_util.h"

namespace sf::bench {
namespace {

// A device buffer holding `values`, released at the end of the scope.
class DeviceArray {
 public:
  DeviceArray(Device& device, const std::vector<float>& values)
      : device_(device), bytes_(values.size() * sizeof(float)), buffer_(device.allocate(bytes_)) {
    device.write(values.data(), {buffer_, 0}, bytes_);
  }
  ~DeviceArray() { device_.release(buffer_, bytes_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  Mem<float> mem() const { return {buffer_, 0}; }
  cl_mem handle() const { return static_cast<cl_mem>(buffer_); }

 private:
  Device& device_;
  size_t bytes_;
  void* buffer_;
};

}  // namespace

void bench_opencl_gemm() {
  Device& device = opencl();
  cl_command_queue queue = opencl_backend::Runtime::get().queue();
  std::printf("\nOpenCL GEMM on %s (GFLOP/s)\n%-28s %9s %9s %7s\n", device.description().c_str(), "case",
              "ours", "clblast", "ratio");
  for (const GemmCase& c : gemm_cases({256, 1024})) {
    int64_t lda = c.trans_a ? c.m : c.k, ldb = c.trans_b ? c.k : c.n;
    DeviceArray a(device, random_vector(c.m * c.k, 1)), b(device, random_vector(c.k * c.n, 2)),
        out(device, std::vector<float>(c.m * c.n));
    auto [ours, ref] = interleaved(
        [&] {
          device.kernels().gemm(c.trans_a, c.trans_b, c.m, c.n, c.k, 1.0f, a.mem(), lda, 0, b.mem(), ldb, 0,
                                0.0f, out.mem(), c.n, 0, 1);
          device.synchronize();
        },
        [&] {
          CLBlastStatusCode status = CLBlastSgemm(
              CLBlastLayoutRowMajor, c.trans_a ? CLBlastTransposeYes : CLBlastTransposeNo,
              c.trans_b ? CLBlastTransposeYes : CLBlastTransposeNo, c.m, c.n, c.k, 1.0f, a.handle(), 0, lda,
              b.handle(), 0, ldb, 0.0f, out.handle(), 0, c.n, &queue, nullptr);
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
