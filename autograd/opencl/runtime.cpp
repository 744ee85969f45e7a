#include "runtime.h"

#include <cerrno>
#include <cstdlib>
#include <sstream>
#include <vector>

#include "../device.h"
#include "base/environment.h"
#include "base/error.h"

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

// SCRATCHFORMER_OPENCL_SHAPES=cpu or =gpu, else CPU shapes on a CPU device and
// GPU shapes on any other (a GPU, an accelerator).
const Shapes& choose_shapes(cl_device_id device) {
  if (const char* env = environment::value("SCRATCHFORMER_OPENCL_SHAPES"); env && *env) {
    for (const Shapes* shapes : {&kCpuShapes, &kGpuShapes})
      if (std::string(env) == shapes->name) return *shapes;
    fail("opencl: SCRATCHFORMER_OPENCL_SHAPES=", env, " is not a kind of launch shapes: use cpu or gpu ",
         "(unset: by the device's type)");
  }
  return type_of(device) & CL_DEVICE_TYPE_CPU ? kCpuShapes : kGpuShapes;
}

// "0 = <name> (<platform>, gpu); 1 = ...": what SCRATCHFORMER_OPENCL_DEVICE may pick.
std::string device_list(const std::vector<DeviceInfo>& devices) {
  std::string list;
  for (size_t i = 0; i < devices.size(); ++i)
    list += (i ? "; " : "") + std::to_string(i) + " = " + devices[i].name + " (" + devices[i].platform +
            (devices[i].gpu ? ", gpu)" : ")");
  return list;
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

std::vector<DeviceInfo> describe(const std::vector<Candidate>& candidates) {
  std::vector<DeviceInfo> infos;
  for (const Candidate& c : candidates)
    infos.push_back({info_string(clGetDeviceInfo, c.device, CL_DEVICE_NAME, "clGetDeviceInfo"),
                     info_string(clGetPlatformInfo, c.platform, CL_PLATFORM_NAME, "clGetPlatformInfo"),
                     (type_of(c.device) & CL_DEVICE_TYPE_GPU) != 0});
  return infos;
}

// The first non-blank lines of a build log: enough to name the error on one
// line (some drivers start their logs with blank lines).
std::string first_lines(const std::string& log, int lines) {
  std::istringstream in(log);
  std::string line, out;
  for (int i = 0; i < lines && std::getline(in, line);) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    out += (i++ ? " | " : "") + line;
  }
  return out;
}

// OpenCL C lets a float division be 2.5 ulp off and a square root 3 ulp
// unless the program asks for them correctly rounded, and NVIDIA's driver
// takes that freedom: layer norm's mean of a row of 0.75s came out one ulp
// off 0.75 there, and (x - mean) / (std + eps), with std then about 1e-7 and
// eps 1e-6, made that an error of 0.06 in every output of the row. The CPU
// kernels divide correctly rounded, so the programs ask for the same wherever
// the device offers it (PoCL, NVIDIA's driver).
std::string options_for(const Shapes& shapes, cl_device_id device) {
  const auto single = device_value<cl_device_fp_config>(device, CL_DEVICE_SINGLE_FP_CONFIG);
  return "-cl-std=CL1.2 -DLANES=" + std::to_string(shapes.lanes) + " -DROW_ITEMS=" + std::to_string(shapes.row_items) +
         " -DCOLUMN_ITEMS=" + std::to_string(shapes.column_items) + " -DPIECE=" + std::to_string(shapes.piece) +
         (single & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT ? " -cl-fp32-correctly-rounded-divide-sqrt" : "");
}

}  // namespace

std::vector<DeviceInfo> list_devices() { return describe(all_devices()); }

std::string device_string(cl_device_id device, cl_device_info param) {
  return info_string(clGetDeviceInfo, device, param, "clGetDeviceInfo");
}

size_t choose_device(const std::vector<DeviceInfo>& devices, const char* requested, int local_rank) {
  if (requested && *requested) {
    char* end = nullptr;
    errno = 0;
    long n = std::strtol(requested, &end, 10);
    if (*end != '\0' || errno || n < 0 || static_cast<size_t>(n) >= devices.size())
      fail("opencl: SCRATCHFORMER_OPENCL_DEVICE=", requested, " is not the number of an OpenCL device: ",
           device_list(devices));
    return static_cast<size_t>(n);
  }
  std::vector<size_t> pool;  // the GPUs, else every device
  for (size_t i = 0; i < devices.size(); ++i)
    if (devices[i].gpu) pool.push_back(i);
  if (pool.empty())
    for (size_t i = 0; i < devices.size(); ++i) pool.push_back(i);
  return pool[static_cast<size_t>(local_rank) % pool.size()];
}

Runtime& Runtime::get() {
  static Runtime* runtime = new Runtime;  // intentionally leaked, see runtime.h
  return *runtime;
}

Runtime::Runtime() {
  std::vector<Candidate> candidates = all_devices();
  std::vector<DeviceInfo> infos = describe(candidates);
  size_t chosen = choose_device(infos, environment::value("SCRATCHFORMER_OPENCL_DEVICE"), local_rank());
  device_ = candidates[chosen].device;
  shapes_ = &choose_shapes(device_);
  description_ = infos[chosen].name + " (" + infos[chosen].platform + "), " + shapes_->name + " shapes";
  build_options_ = options_for(*shapes_, device_);
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
  std::string options = build_options_ + " " + source.options;
  status = clBuildProgram(program, 1, &device_, options.c_str(), nullptr, nullptr);
  if (status == CL_BUILD_PROGRAM_FAILURE) {
    std::string log = info_string(
        [&](cl_program p, cl_uint param, size_t size, void* value, size_t* size_ret) {
          return clGetProgramBuildInfo(p, device_, param, size, value, size_ret);
        },
        program, CL_PROGRAM_BUILD_LOG, "clGetProgramBuildInfo");
    clReleaseProgram(program);
    fail("opencl: the program \"", source.name, "\" does not build: ", first_lines(log, 4));
  }
  check(status, "clBuildProgram");
  return program;
}

cl_kernel Runtime::kernel(const Source& source, const char* name) {
  std::lock_guard lock(mutex_);
  cl_program& program = programs_[&source];
  if (!program) {
    program = build(source);
    for (const char* each : source.kernels) {
      cl_int status = CL_SUCCESS;
      cl_kernel kernel = clCreateKernel(program, each, &status);
      if (status != CL_SUCCESS)
        internal_fail("opencl: the program \"", source.name, "\" has no kernel ", each, ": ", error_name(status));
      kernels_[std::make_pair(&source, std::string(each))] = kernel;
    }
  }
  auto it = kernels_.find(std::make_pair(&source, std::string(name)));
  if (it == kernels_.end()) internal_fail("opencl: ", name, " is not among the kernels of \"", source.name, "\"");
  return it->second;
}

cl_mem Runtime::scratch(size_t bytes) {
  std::lock_guard lock(mutex_);
  if (bytes > scratch_bytes_) {
    if (scratch_) check(clReleaseMemObject(scratch_), "clReleaseMemObject");
    // Forgotten first, so that a failed creation leaves no released buffer in use.
    scratch_ = nullptr;
    scratch_bytes_ = 0;
    scratch_ = create_buffer(bytes);
    scratch_bytes_ = bytes;
  }
  return scratch_;
}

cl_mem Runtime::try_create_buffer(size_t bytes, cl_int* status) {
  {
    std::lock_guard lock(buffers_mutex_);
    if (failures_to_inject_ > 0) {
      --failures_to_inject_;
      *status = injected_status_;
      return nullptr;
    }
  }
  cl_mem buffer = clCreateBuffer(context_, CL_MEM_READ_WRITE, bytes, nullptr, status);
  if (*status == CL_SUCCESS) {
    std::lock_guard lock(buffers_mutex_);
    ++buffers_created_;
  }
  return buffer;
}

cl_mem Runtime::create_buffer(size_t bytes) {
  auto out_of_memory = [](cl_int status) {
    return status == CL_MEM_OBJECT_ALLOCATION_FAILURE || status == CL_OUT_OF_RESOURCES;
  };
  cl_int status = CL_SUCCESS;
  cl_mem buffer = try_create_buffer(bytes, &status);
  if (out_of_memory(status)) {
    std::function<void()> handler;
    {
      std::lock_guard lock(buffers_mutex_);
      handler = out_of_memory_handler_;
    }
    if (handler) handler();
    buffer = try_create_buffer(bytes, &status);
    if (out_of_memory(status))
      fail("opencl: the device is out of memory: a buffer of ", bytes, " bytes does not fit even after the ",
           "freed buffers kept for reuse were given back (", error_name(status), ")");
  }
  check(status, "clCreateBuffer");
  return buffer;
}

void Runtime::set_out_of_memory_handler(std::function<void()> handler) {
  std::lock_guard lock(buffers_mutex_);
  out_of_memory_handler_ = std::move(handler);
}

void Runtime::fail_next_buffer_creations(int count, cl_int status) {
  std::lock_guard lock(buffers_mutex_);
  failures_to_inject_ = count;
  injected_status_ = status;
}

int64_t Runtime::buffers_created() {
  std::lock_guard lock(buffers_mutex_);
  return buffers_created_;
}

}  // namespace sf::opencl_backend
