// Backend conformance (in the spirit of ggml's test-backend-ops): every case
// of the kernel table (kernel_cases.h) on the OpenCL device against the
// scalar reference. Inputs are uploaded with Device::write, three elements
// into their buffers (a view into a larger one, as a sliced tensor's, which
// also breaks 16-byte alignment), the entry runs on the device, and its
// results, read back, must match the reference within ten times the fast
// table's tolerance and at least 1e-4 (its own exp, other summation orders);
// what the table asks bit for bit (dropout's masks, the embedding gradient,
// predicates, topk, copies, bf16 conversions) is bit for bit here too.
// `make test` runs this suite in both launch shapes (CPU and GPU, forced by
// SCRATCHFORMER_OPENCL_SHAPES). Without an OpenCL device every test reports
// itself skipped.
#ifdef SF_OPENCL
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "autograd/kernels/kernels.h"
#include "base/error.h"
#include "kernel_cases.h"
#include "kernel_conformance.h"
#include "opencl_helpers.h"

using namespace sf;
using namespace sf::kernels;
using namespace sf::testing;

TEST_SUITE("opencl") {
namespace {

// Bit for bit (any NaN matches any NaN).
template <class T>
void check_equal(const std::vector<T>& got, const std::vector<T>& want) {
  CHECK(got.size() == want.size());
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i)
    if (!(got[i] == want[i] || (std::isnan(double(got[i])) && std::isnan(double(want[i]))))) {
      FAIL_CHECK("element ", i, ": got ", got[i], ", want ", want[i]);
      return;
    }
}

TEST_CASE("opencl: the device moves bytes: write, read, copy and fill with offsets") {
  SF_NEED_OPENCL();
  Device* dev = opencl_device();
  CHECK(std::string(dev->name()) == "opencl");
  CHECK(dev->description().rfind("opencl: ", 0) == 0);
  CHECK_FALSE(dev->host_addressable());
  MESSAGE(dev->description());

  std::vector<float> host = random_vector(65, 1);
  DeviceArray<float> a(host), b(std::vector<float>(65, 0.0f));
  dev->copy(a.mem() + 5, b.mem() + 7, 50 * sizeof(float));
  dev->fill(b.mem() + 60, 0x3f800000u, 5);  // 1.0f
  dev->synchronize();
  std::vector<float> want(65, 0.0f);
  std::copy(host.begin() + 5, host.begin() + 55, want.begin() + 7);
  std::fill(want.begin() + 60, want.end(), 1.0f);
  check_equal(b.read(), want);
  check_equal(a.read(), host);
}

// The shapes come from the device's type unless SCRATCHFORMER_OPENCL_SHAPES
// forces them (make test runs this suite with each); the description says
// which are in use.
TEST_CASE("opencl: the device description names the launch shapes in use") {
  SF_NEED_OPENCL();
  std::string description = opencl_device()->description();
  const char* forced = std::getenv("SCRATCHFORMER_OPENCL_SHAPES");
  if (forced && *forced)
    CHECK(description.ends_with(std::string(", ") + forced + " shapes"));
  else
    CHECK((description.ends_with(", cpu shapes") || description.ends_with(", gpu shapes")));
}

TEST_CASE("opencl: every case of the kernel table against the scalar reference") {
  SF_NEED_OPENCL();
  Device& device = *opencl_device();
  for (const EntryCases& entry : every_entry_cases()) {
    INFO("entry: ", std::string(entry.entry));
    for (const KernelCase& c : entry.make()) {
      INFO("case: ", c.name);
      check_matches(c, run_case(c, device, 3), reference_outputs(c), {.factor = 10, .floor = 1e-4f});
    }
  }
}

// A view beyond the kernels' int32 indexing is a clear error, not a launch.
TEST_CASE("opencl: a view beyond int32 indexing is refused") {
  SF_NEED_OPENCL();
  Rows huge;
  huge.cols = int64_t{1} << 31;
  DeviceArray<float> one(std::vector<float>(1));
  CHECK_THROWS_WITH_AS(opencl_device()->kernels().binary(Binary::Add, one.mem(), one.mem(), one.mem(), huge),
                       doctest::Contains("exceeds the kernels' int32 indexing"), Error);
}

// An id outside the table writes a zero row and reads nothing (the host
// reference would read out of bounds: ops check ids first).
TEST_CASE("opencl: gather_rows with an id outside the table writes zeros") {
  SF_NEED_OPENCL();
  std::vector<float> table = random_vector(4 * 8, 125);
  DeviceArray<float> dt(table), dout(std::vector<float>(3 * 8, 7.0f));
  DeviceArray<int32_t> di(std::vector<int32_t>{2, 1000000, -5});
  opencl_device()->kernels().gather_rows(dt.mem(), di.mem(), 3, 8, dout.mem());
  std::vector<float> want(3 * 8, 0.0f);
  std::copy(table.begin() + 16, table.begin() + 24, want.begin());
  check_equal(dout.read(), want);
}

// An id outside the table adds nowhere, whichever bucket of ids it would
// fall in (the host reference would write out of bounds: ops check ids first).
TEST_CASE("opencl: scatter_add_rows skips ids outside the table") {
  SF_NEED_OPENCL();
  const int64_t rows = 4, dim = 8;
  const std::vector<int32_t> ids{2, 1000000, -5, 2, 0, -1, 3, 4};
  const int64_t n = static_cast<int64_t>(ids.size());
  std::vector<float> grad = random_vector(n * dim, 126), table = random_vector(rows * dim, 127);
  DeviceArray<float> dg(grad), dt(table);
  DeviceArray<int32_t> di(ids);
  opencl_device()->kernels().scatter_add_rows(dg.mem(), di.mem(), n, dim, dt.mem());
  for (int64_t i = 0; i < n; ++i)
    if (ids[i] >= 0 && ids[i] < rows)
      for (int64_t j = 0; j < dim; ++j) table[ids[i] * dim + j] += grad[i * dim + j];
  check_equal(dt.read(), table);
}

}  // namespace
}  // TEST_SUITE("opencl")

#endif  // SF_OPENCL
