#include "runtime.h"

#include <cerrno>
#include <cstdlib>
#include <sstream>
#include <vector>

#include "../device.h"
#include "../error.h"

namespace sf::opencl_backend {
namespace {

struct Candidate {
  cl_platform_id platform;
  cl_device_id device;
};

// Every device of every platform, platforms in order, then their devices.
std::vector<Candidate> all_devices() {
  cl_uint count = 0;
  cl_int status = clGetPlatformIDs(0, nullptr, &count);
  if (status == -1001 /* CL_PLATFORM_NOT_FOUND_KHR */ || (status == CL_SUCCESS && count == 0))
    fail("opencl: no OpenCL platform found (install pocl-opencl-icd or a GPU driver)");
  check(status, "clGetPlatformIDs");
  std::vector<cl_platform_id> platforms(count);
  check(clGetPlatformIDs(count, platforms.data(), nullptr), "clGetPlatformIDs");

  std::vector<Candidate> found;
  for (cl_platform_id platform : platforms) {
    cl_uint n = 0;
    status = clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 0, nullptr, &n);
    if (status == CL_DEVICE_NOT_FOUND || n == 0) continue;
    check(status, "clGetDeviceIDs");
    std::vector<cl_device_id> devices(n);
    check(clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, n, devices.data(), nullptr), "clGetDeviceIDs");
    for (cl_device_id device : devices) found.push_back({platform, device});
  }
  if (found.empty()) fail("opencl: no OpenCL device found (install pocl-opencl-icd or a GPU driver)");
  return found;
}

cl_device_type type_of(cl_device_id device) {
  cl_device_type type = 0;
  check(clGetDeviceInfo(device, CL_DEVICE_TYPE, sizeof type, &type, nullptr), "clGetDeviceInfo");
  return type;
}

// SCRATCHFORMER_OPENCL_DEVICE=N, else a GPU, else any device: the first, or
// for the data-parallel ranks of one machine, the local_rank()-th modulo
// their number (autograd/device.h).
Candidate choose(const std::vector<Candidate>& devices) {
  if (const char* env = std::getenv("SCRATCHFORMER_OPENCL_DEVICE"); env && *env) {
    char* end = nullptr;
    errno = 0;
    long n = std::strtol(env, &end, 10);
    if (*end != '\0' || errno || n < 0)
      fail("opencl: SCRATCHFORMER_OPENCL_DEVICE=", env, " is not a device number (0, 1, ...)");
    if (static_cast<size_t>(n) >= devices.size())
      fail("opencl: SCRATCHFORMER_OPENCL_DEVICE=", env, " but only ", devices.size(),
           " OpenCL device", devices.size() == 1 ? "" : "s", " exist", devices.size() == 1 ? "s" : "");
    return devices[n];
  }
  std::vector<Candidate> gpus;
  for (const Candidate& c : devices)
    if (type_of(c.device) & CL_DEVICE_TYPE_GPU) gpus.push_back(c);
  const std::vector<Candidate>& pool = gpus.empty() ? devices : gpus;
  return pool[static_cast<size_t>(local_rank()) % pool.size()];
}

// SCRATCHFORMER_OPENCL_SHAPES=cpu or =gpu, else CPU shapes on a CPU device and
// GPU shapes on any other (a GPU, an accelerator).
const Shapes& choose_shapes(cl_device_id device) {
  if (const char* env = std::getenv("SCRATCHFORMER_OPENCL_SHAPES"); env && *env) {
    for (const Shapes* shapes : {&kCpuShapes, &kGpuShapes})
      if (std::string(env) == shapes->name) return *shapes;
    fail("opencl: SCRATCHFORMER_OPENCL_SHAPES=", env, " is not a kind of launch shapes: use cpu or gpu ",
         "(unset: by the device's type)");
  }
  return type_of(device) & CL_DEVICE_TYPE_CPU ? kCpuShapes : kGpuShapes;
}

template <class Info, class Object>
std::string info_string(Info info, Object object, cl_uint param, const char* call) {
  size_t size = 0;
  check(info(object, param, 0, nullptr, &size), call);
  std::string text(size, '\0');
  check(info(object, param, size, text.data(), nullptr), call);
  while (!text.empty() && text.back() == '\0') text.pop_back();
  return text;
}

// The first lines of a build log: enough to name the error on one line.
std::string first_lines(const std::string& log, int lines) {
  std::istringstream in(log);
  std::string line, out;
  for (int i = 0; i < lines && std::getline(in, line); ++i) out += (i ? " | " : "") + line;
  return out;
}

}  // namespace

Runtime& Runtime::get() {
  static Runtime* runtime = new Runtime;  // intentionally leaked, see runtime.h
  return *runtime;
}

Runtime::Runtime() {
  Candidate chosen = choose(all_devices());
  device_ = chosen.device;
  shapes_ = &choose_shapes(device_);
  description_ = info_string(clGetDeviceInfo, device_, CL_DEVICE_NAME, "clGetDeviceInfo") + " (" +
                 info_string(clGetPlatformInfo, chosen.platform, CL_PLATFORM_NAME, "clGetPlatformInfo") + "), " +
                 shapes_->name + " shapes";
  cl_int status = CL_SUCCESS;
  context_ = clCreateContext(nullptr, 1, &device_, nullptr, nullptr, &status);
  check(status, "clCreateContext");
  queue_ = clCreateCommandQueue(context_, device_, 0, &status);  // in order
  check(status, "clCreateCommandQueue");
}

cl_program Runtime::build(const Source& source) {
  cl_int status = CL_SUCCESS;
  cl_program program = clCreateProgramWithSource(context_, static_cast<cl_uint>(source.texts.size()),
                                                 const_cast<const char**>(source.texts.data()), nullptr, &status);
  check(status, "clCreateProgramWithSource");
  std::string options = "-cl-std=CL1.2 -DLANES=" + std::to_string(shapes_->lanes) +
                        " -DROW_ITEMS=" + std::to_string(shapes_->row_items) +
                        " -DCOLUMN_ITEMS=" + std::to_string(shapes_->column_items) + " " + source.options;
  status = clBuildProgram(program, 1, &device_, options.c_str(), nullptr, nullptr);
  if (status == CL_BUILD_PROGRAM_FAILURE) {
    std::string log = info_string(
        [&](cl_program p, cl_uint param, size_t size, void* value, size_t* size_ret) {
          return clGetProgramBuildInfo(p, device_, param, size, value, size_ret);
        },
        program, CL_PROGRAM_BUILD_LOG, "clGetProgramBuildInfo");
    clReleaseProgram(program);
    fail("opencl: clBuildProgram failed: ", first_lines(log, 4));
  }
  check(status, "clBuildProgram");
  return program;
}

cl_kernel Runtime::kernel(const Source& source, const char* name) {
  std::lock_guard lock(mutex_);
  auto key = std::make_pair(&source, std::string(name));
  if (auto it = kernels_.find(key); it != kernels_.end()) return it->second;
  cl_program& program = programs_[&source];
  if (!program) program = build(source);
  cl_int status = CL_SUCCESS;
  cl_kernel kernel = clCreateKernel(program, name, &status);
  if (status != CL_SUCCESS) internal_fail("opencl: clCreateKernel(", name, ") failed: ", error_name(status));
  return kernels_[key] = kernel;
}

cl_mem Runtime::scratch(size_t bytes) {
  std::lock_guard lock(mutex_);
  if (bytes > scratch_bytes_) {
    if (scratch_) check(clReleaseMemObject(scratch_), "clReleaseMemObject");
    cl_int status = CL_SUCCESS;
    scratch_ = clCreateBuffer(context_, CL_MEM_READ_WRITE, bytes, nullptr, &status);
    check(status, "clCreateBuffer");
    scratch_bytes_ = bytes;
  }
  return scratch_;
}

}  // namespace sf::opencl_backend
