// The kernel table's cases (kernel_cases.h) timed on each backend, as ggml's
// test-backend-ops times its cases in its "perf" mode: a measurement, not a
// test, so its suite is skipped unless asked for by name, as "mpi" is:
//
//   build/tests -ts=kernel-timing --no-skip          (scalar reference, fast table)
//   build/opencl/tests -ts=kernel-timing --no-skip   (and OpenCL, in the shapes in use)
//
// Each entry is a subcase, so `-sc=layer_norm*` times only those entries.
// One line per case: the time per call in microseconds on the scalar
// reference, the fast table (at the pool's default thread count) and OpenCL
// where there is a device, each but the reference's also as a multiple of
// it, so that a kernel slow on a backend shows up under the name of the case
// that checks it. The arrays are uploaded once (Placement); each backend is
// called once to warm up, then in batches that double, each waited for,
// until kSeconds have passed: about a millisecond per case and backend, since
// the table has some ten thousand cases (about half a minute for all of them
// on two cores, without OpenCL). An entry that updates in place (gemm's beta,
// scatter_add_rows, the optimizer steps) drifts in value over the calls:
// only the time is kept.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <vector>

#include "autograd/kernels/kernels.h"
#include "kernel_cases.h"
#include "kernel_conformance.h"
#include "opencl_helpers.h"

using namespace sf;
using namespace sf::kernels;
using namespace sf::testing;

namespace {

constexpr double kSeconds = 0.001;

// Seconds per call of `c` on `device` (through its table: on the host,
// kernels::active()): the least of the batches' times per call, since a
// batch that the machine interrupts only takes longer.
double seconds_per_call(const KernelCase& c, Device& device) {
  using Clock = std::chrono::steady_clock;
  Placement placement(c, device, 0);
  placement.call();
  device.synchronize();
  double spent = 0, best = INFINITY;
  for (int64_t batch = 1; spent < kSeconds; batch *= 2) {
    const Clock::time_point start = Clock::now();
    for (int64_t i = 0; i < batch; ++i) placement.call();
    device.synchronize();
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    spent += seconds;
    best = std::min(best, seconds / batch);
  }
  return best;
}

// The first is the reference the others are measured against.
struct Backend {
  const char* name;
  Device& device;
  const HostTable* table;  // the host's table to make active, or nullptr
};

}  // namespace

TEST_SUITE("kernel-timing" * doctest::skip()) {
  TEST_CASE("kernel-timing: every case of the kernel table, timed on each backend") {
    std::vector<Backend> backends = {{"scalar", host_device(), &scalar_table()},
                                     {"fast", host_device(), &fast_table()}};
    if (Device* opencl = opencl_device()) backends.push_back({"opencl", *opencl, nullptr});
    const HostTable& before = active();
    for (const EntryCases& entry : every_entry_cases())
      SUBCASE(entry.entry) {
        std::printf("%s: time per call in microseconds, and as a multiple of the scalar reference's\n%12s",
                    entry.entry, backends[0].name);
        for (size_t i = 1; i < backends.size(); ++i) std::printf("%23s", backends[i].name);
        std::printf("   entry: case\n");
        for (const KernelCase& c : entry.make()) {
          double reference = 0;
          for (const Backend& b : backends) {
            if (b.table) set_active(*b.table);
            const double us = 1e6 * seconds_per_call(c, b.device);
            if (&b == &backends[0]) {
              reference = us;
              std::printf("%12.2f", us);
            } else {
              std::printf("%12.2f %9.2fx", us, us / reference);
            }
          }
          std::printf("   %s: %s\n", entry.entry, c.name.c_str());
          std::fflush(stdout);
        }
      }
    set_active(before);
  }
}
