// Running the kernel cases (kernel_cases.h) on a device and comparing what
// they wrote. Each run uploads a case's arrays with Device::write, calls the
// entry through the device's kernel table and reads every output back, so the
// scalar reference, the fast table and OpenCL are all driven through the
// same interface the ops use.
//
// Each array sits in a buffer of its own between guards, as ggml's
// test-backend-ops puts a sentinel tensor after each tensor: the `offset`
// elements before it and kGuardBytes after it hold 0xDEADBEEF words, written
// with Device::write like the data. A write outside an array changes a guard
// (an output compared element by element never shows it), so every run reads
// them back, on every backend.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "autograd/device.h"
#include "kernel_cases.h"

namespace sf::testing {

// Host memory allocated to the byte (the CPU device rounds up to size
// classes and recycles blocks), so that under AddressSanitizer, which also
// watches the guards (Placement), a kernel that reads past an array, or reads
// an empty one at all, is an error. It computes through the CPU device's
// table, i.e. kernels::active().
class HostDevice final : public Device {
 public:
  const char* name() const override { return "host"; }
  bool host_addressable() const override { return true; }
  void* allocate(size_t bytes) override;
  void release(void* buffer, size_t bytes) override;
  void write(const void* host, Mem<void> dst, size_t bytes) override;
  void read(Mem<const void> src, void* host, size_t bytes) override;
  void copy(Mem<const void> src, Mem<void> dst, size_t bytes) override;
  void fill(Mem<void> dst, uint32_t pattern, size_t count) override;
  void synchronize() override {}
  const kernels::Table& kernels() const override { return cpu().kernels(); }
};
HostDevice& host_device();

// Each output array's bytes after a run, in the case's order of outputs.
using Outputs = std::vector<std::vector<unsigned char>>;

inline constexpr size_t kGuardBytes = 64;

// A guard that a run changed: the array's index in the case, and the first
// changed byte, counted from the array's first byte (negative: before it).
struct Clobbered {
  size_t array;
  int64_t byte;
};

// What a run left: each output array's bytes, and every changed guard.
struct Run {
  Outputs outputs;
  std::vector<Clobbered> clobbered;
};

// A case's arrays on a device, each `offset` elements into its own buffer,
// between guards; the buffers are released with it. Under AddressSanitizer
// the guards of host memory are also poisoned until read(), so that a kernel
// that reads one stops the run there too.
class Placement {
 public:
  Placement(const KernelCase& c, Device& device, int64_t offset);
  ~Placement();
  Placement(const Placement&) = delete;
  Placement& operator=(const Placement&) = delete;

  // One call of the case's entry through the device's table.
  void call() const { case_.call(device_.kernels(), placed_); }
  // What the calls so far left.
  Run read();

 private:
  struct Buffer {
    void* buffer;
    size_t skip, size;  // the guard before the array, the array
  };
  void unpoison();

  const KernelCase& case_;
  Device& device_;
  std::vector<Buffer> buffers_;
  Placed placed_;
};

// Runs `c` once on `device`, each array `offset` elements into its own buffer.
Run run_guarded(const KernelCase& c, Device& device, int64_t offset);

// run_guarded's outputs; a changed guard fails the test, naming the case,
// the array and the first changed byte.
Outputs run_case(const KernelCase& c, Device& device, int64_t offset);

// The scalar reference's outputs (on host_device()), checked against the
// values the case expects where it names them.
Outputs reference_outputs(const KernelCase& c);

// How much looser than a case's tolerance a backend is held to, where the
// tolerance is not exact: `factor` times it, and at least `floor` (relative
// and absolute). OpenCL's float math (its own exp, other summation orders)
// gets ten times the fast table's, and 1e-4 at least.
struct Looseness {
  float factor = 1, floor = 0;
};

// `got` matches `want` within each output's tolerance, loosened as given;
// reports the first element that differs in each output.
void check_matches(const KernelCase& c, const Outputs& got, const Outputs& want, Looseness looseness = {});

// `got` is `want` bit for bit, NaN payloads and signed zeros included.
void check_bit_identical(const KernelCase& c, const Outputs& got, const Outputs& want);

}  // namespace sf::testing
