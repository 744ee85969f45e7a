// The OpenCL runtime's paths that a healthy run on one device never takes:
// which device a process picks, a device out of memory, a kernel source that
// does not compile, and a tensor too large for the kernels' int32 indexing.
// Built only with OPENCL=1 (suite "opencl"). The choice of device is tested
// on made-up device lists (the runtime's choice is a function of one), then
// end to end on whatever device the machine has.
#ifdef SF_OPENCL
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "autograd/init.h"
#include "autograd/opencl/runtime.h"
#include "autograd/ops.h"
#include "base/random.h"
#include "cli_process.h"
#include "opencl_helpers.h"

using namespace sf;
using namespace sf::testing;
using sf::opencl_backend::choose_device;
using sf::opencl_backend::DeviceInfo;
using sf::opencl_backend::Runtime;

namespace {

std::string message_of(const std::vector<DeviceInfo>& devices, const char* requested) {
  try {
    choose_device(devices, requested, 0);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

Tensor random_tensor(const Shape& shape, uint64_t seed) {
  Rng rng(seed);
  return uniform(shape, -1.0f, 1.0f, rng);
}

void check_close(const std::vector<float>& got, const std::vector<float>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= 1e-5f * std::max(1.0f, std::fabs(want[i])))) {
      FAIL_CHECK("element ", i, ": opencl ", got[i], " vs cpu ", want[i]);
      return;
    }
}

}  // namespace

TEST_SUITE("opencl") {
  TEST_CASE("opencl runtime: the device choice takes a GPU first, or SCRATCHFORMER_OPENCL_DEVICE's number") {
    const DeviceInfo cpu{"pthread-cpu", "Portable Computing Language", false},
        nvidia{"RTX 4090", "NVIDIA CUDA", true}, amd{"gfx1100", "AMD Accelerated Parallel Processing", true};
    const std::vector<DeviceInfo> mixed = {cpu, nvidia, amd}, cpus_only = {cpu, cpu};

    // Unset (or empty): the GPUs, a data-parallel rank each, round robin; no GPU, every device.
    CHECK(choose_device(mixed, nullptr, 0) == 1);
    CHECK(choose_device(mixed, "", 0) == 1);
    CHECK(choose_device(mixed, nullptr, 1) == 2);
    CHECK(choose_device(mixed, nullptr, 2) == 1);
    CHECK(choose_device(cpus_only, nullptr, 0) == 0);
    CHECK(choose_device(cpus_only, nullptr, 1) == 1);
    CHECK(choose_device({cpu}, nullptr, 5) == 0);

    // A number picks that device, a CPU too, whatever the rank.
    CHECK(choose_device(mixed, "0", 0) == 0);
    CHECK(choose_device(mixed, "2", 1) == 2);

    // Anything else is one line naming the variable and every device it could pick.
    const std::string devices = "0 = pthread-cpu (Portable Computing Language); 1 = RTX 4090 (NVIDIA CUDA, gpu); "
                                "2 = gfx1100 (AMD Accelerated Parallel Processing, gpu)";
    for (const char* bad : {"3", "-1", "gpu", "1x", "99999999999999999999"}) {
      CAPTURE(bad);
      CHECK(message_of(mixed, bad) == "opencl: SCRATCHFORMER_OPENCL_DEVICE=" + std::string(bad) +
                                          " is not the number of an OpenCL device: " + devices);
    }
  }

  TEST_CASE("opencl runtime: SCRATCHFORMER_OPENCL_DEVICE picks the device of a run; a bad number exits 2 naming it") {
    SF_NEED_OPENCL();
    const std::vector<DeviceInfo> devices = opencl_backend::list_devices();
    TempDir dir;
    std::string config = write_config(dir.path, std::string(R"("data": {"task": "copy", "size": 64}, "lang_src": "a",
      "lang_tgt": "b", "num_epochs": 1, )") + kTiny);
    auto train_with = [&](const std::string& device) {
      std::string command = "SCRATCHFORMER_OPENCL_DEVICE=" + device + " " + scratchformer_binary() +
                            " train --config " + config + " --set device=opencl >" + (dir.path / "log").string() +
                            " 2>&1";
      int status = std::system(command.c_str());
      return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    };
    // A number beyond the devices: exit 2, one line naming the variable and
    // listing the devices (as the child sees them: see below).
    CHECK(train_with(std::to_string(devices.size())) == 2);
    std::string log = read_file(dir.path / "log");
    CHECK_MESSAGE(log.rfind("scratchformer: error: " + config + ": key 'device': opencl: SCRATCHFORMER_OPENCL_DEVICE=" +
                                std::to_string(devices.size()) + " is not the number of an OpenCL device: 0 = ",
                            0) == 0,
                  log);
    CHECK_MESSAGE(std::count(log.begin(), log.end(), '\n') == 1, log);

    // The last device: the one a default choice takes least often. This
    // process holds the device it tests on (the runtime lives as long as the
    // process). A GPU in exclusive-process compute mode is then hidden from
    // the child or refuses it a context, and so was an H200 in default mode
    // on a sandboxed cloud machine: a skip whose reason tools/run-tests
    // checks (an NVIDIA GPU is there), never a pass.
    const size_t last = devices.size() - 1;
    int status = train_with(std::to_string(last));
    log = read_file(dir.path / "log");
    if (status != 0 && (log.find("is not the number of an OpenCL device") != std::string::npos ||
                        log.find("clCreateContext failed") != std::string::npos))
      SF_SKIP("a child process cannot open the NVIDIA GPU this process holds");
    CHECK_MESSAGE(status == 0, log);
    CHECK_MESSAGE(log.find("on opencl: " + devices[last].name + " (" + devices[last].platform + ")") !=
                      std::string::npos,
                  log);
  }

  TEST_CASE("opencl runtime: out of device memory, the cached buffers go back and the allocation is retried") {
    SF_NEED_OPENCL();
    Device& device = *opencl_device();
    Runtime& runtime = Runtime::get();
    // Whatever happens below, the tests after this one allocate as usual.
    struct NoFailuresLeft {
      Runtime& runtime;
      ~NoFailuresLeft() { runtime.fail_next_buffer_creations(0, CL_SUCCESS); }
    } no_failures_left{runtime};

    // n values uploaded, and their exp on the CPU. Each n is a size class of
    // its own, larger than any other test's buffers, so exp's output on the
    // device is a buffer created anew, not one from the cache.
    struct Input {
      Tensor on_device;
      std::vector<float> exp;
    };
    auto input = [&](int64_t n) {
      Tensor x = random_tensor({n}, static_cast<uint64_t>(n));
      return Input{x.to(device), exp(x).to_vector()};
    };
    const Shape cached_shape = {50000};
    int64_t n = 2000017;
    for (cl_int status : {CL_MEM_OBJECT_ALLOCATION_FAILURE, CL_OUT_OF_RESOURCES}) {
      CAPTURE(status);
      Input in = input(n += 1000000);
      Tensor::zeros(cached_shape, DType::F32, device);  // freed at once, into the cache
      runtime.fail_next_buffer_creations(1, status);
      int64_t created = runtime.buffers_created();
      check_close(exp(in.on_device).to_vector(), in.exp);
      CHECK(runtime.buffers_created() == created + 1);  // the output, at the second try
      // The cached buffer went back to the device: the next one of its size is new.
      created = runtime.buffers_created();
      Tensor::zeros(cached_shape, DType::F32, device);
      CHECK(runtime.buffers_created() == created + 1);
    }

    // Still out of memory after the retry: an error that says so, and the
    // device works on.
    Input in = input(n += 1000000);
    runtime.fail_next_buffer_creations(2, CL_MEM_OBJECT_ALLOCATION_FAILURE);
    CHECK_THROWS_WITH_AS(exp(in.on_device), doctest::Contains("opencl: the device is out of memory: a buffer of"),
                         Error);
    check_close(exp(in.on_device).to_vector(), in.exp);
  }

  TEST_CASE("opencl runtime: a kernel source that does not build is an error naming the program, with the log") {
    SF_NEED_OPENCL();
    const char* text = "#line 1 \"broken.cl\"\n__kernel void broken(__global float* x) { x[0] = nowhere; }\n";
    static const opencl_backend::Source broken{"broken for the test", {text}, "", {"broken"}};
    std::string message;
    try {
      Runtime::get().kernel(broken, "broken");
    } catch (const Error& e) {
      message = e.what();
    }
    CHECK_MESSAGE(message.rfind("opencl: the program \"broken for the test\" does not build: ", 0) == 0, message);
    // The driver's log follows, whatever its format (PoCL's "broken.cl:1:...",
    // NVIDIA's "<kernel>:2:50: error: ..."): its first non-blank line, as the
    // driver gives it for the same source (named by its #line: PoCL's log
    // would otherwise name a temporary file, a new one each build).
    Runtime& runtime = Runtime::get();
    cl_device_id device = runtime.device();
    cl_program program = clCreateProgramWithSource(runtime.context(), 1, &text, nullptr, nullptr);
    REQUIRE(program != nullptr);
    CHECK(clBuildProgram(program, 1, &device, "-cl-std=CL1.2", nullptr, nullptr) == CL_BUILD_PROGRAM_FAILURE);
    size_t size = 0;
    clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, 0, nullptr, &size);
    std::string log(size, '\0');
    clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, size, log.data(), nullptr);
    while (!log.empty() && log.back() == '\0') log.pop_back();
    clReleaseProgram(program);
    std::istringstream lines(log);
    std::string first;
    while (std::getline(lines, first) && first.find_first_not_of(" \t\r") == std::string::npos) {
    }
    REQUIRE_FALSE(first.empty());
    CHECK_MESSAGE(message.find(first) != std::string::npos, message, "\nlog: ", log);
  }

  TEST_CASE("opencl runtime: programs divide and take square roots correctly rounded where the device can") {
    SF_NEED_OPENCL();
    // OpenCL C's default float division may be 2.5 ulp off (NVIDIA's is):
    // layer norm's mean of a constant row would then miss it, and the row's
    // outputs by far more (runtime.cpp: options_for).
    cl_device_fp_config single = 0;
    REQUIRE(clGetDeviceInfo(Runtime::get().device(), CL_DEVICE_SINGLE_FP_CONFIG, sizeof single, &single, nullptr) ==
            CL_SUCCESS);
    const bool asked = Runtime::get().build_options().find(" -cl-fp32-correctly-rounded-divide-sqrt") != std::string::npos;
    CHECK(asked == ((single & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT) != 0));
  }

  TEST_CASE("opencl runtime: a program without a kernel its list names fails as it loads, naming the kernel") {
    SF_NEED_OPENCL();
    static const opencl_backend::Source misspelt{
        "misspelt for the test", {"__kernel void scale(__global float* x) { x[0] *= 2.0f; }\n"}, "", {"scale", "scael"}};
    // Asked for the kernel it has, it still creates every one it lists.
    CHECK_THROWS_WITH_AS(Runtime::get().kernel(misspelt, "scale"),
                         doctest::Contains("opencl: the program \"misspelt for the test\" has no kernel scael"),
                         InternalError);
  }

  TEST_CASE("opencl runtime: a tensor beyond the kernels' int32 indexing is refused before it is allocated") {
    SF_NEED_OPENCL();
    Device& device = *opencl_device();
    Runtime& runtime = Runtime::get();
    const int64_t created = runtime.buffers_created();
    const char* refused = "is beyond the kernels' int32 indexing (at most 2147483647 elements of 4 bytes)";
    // 2^31 + 2^16 elements, one more column than the limit allows.
    CHECK_THROWS_WITH_AS(Tensor::empty({65536, 32769}, DType::F32, device), doctest::Contains(refused), Error);
    // An op whose result would be that large fails before its kernel runs.
    Tensor column = Tensor::zeros({65536, 1}, DType::F32, device), row = Tensor::zeros({1, 32769}, DType::F32, device);
    CHECK_THROWS_WITH_AS(column + row, doctest::Contains(refused), Error);
    CHECK(runtime.buffers_created() <= created + 2);  // the two operands at most
  }
}
#endif  // SF_OPENCL
