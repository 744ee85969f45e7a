// The OpenCL runtime: one device, its context and in-order queue, and the
// programs built from the kernel sources (each built once per process, its
// kernels created once and looked up by name).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "errors.h"

namespace sf::opencl_backend {

// A program's OpenCL C source, the concatenation of `texts` (sources.cpp),
// and the options it is built with; `name` says which program a build error
// is about.
struct Source {
  std::string name;
  std::vector<const char*> texts;
  std::string options;
  // The kernels it defines: building it creates each one (a name it lacks is
  // an error then), and kernel() hands out only these.
  std::vector<const char*> kernels;
};

// An OpenCL device as the choice of device sees it.
struct DeviceInfo {
  std::string name, platform;
  bool gpu;
};

// Every OpenCL device of the machine, in the order choose_device numbers
// them. Throws sf::Error when there is none.
std::vector<DeviceInfo> list_devices();

// A text property of a device (CL_DEVICE_NAME, CL_DRIVER_VERSION, ...).
std::string device_string(cl_device_id device, cl_device_info param);

// A scalar property of a device (CL_DEVICE_MAX_COMPUTE_UNITS as cl_uint, ...).
template <class T>
T device_value(cl_device_id device, cl_device_info param) {
  T value{};
  check(clGetDeviceInfo(device, param, sizeof value, &value, nullptr), "clGetDeviceInfo");
  return value;
}

// The index in `devices` (every device of every platform: platforms in
// order, then their devices) of the one a process uses. `requested` is
// SCRATCHFORMER_OPENCL_DEVICE (null or empty when unset): a number N picks
// the N-th device, and anything else is an sf::Error naming the variable and
// listing the devices. Unset, a GPU, else any device: for the data-parallel
// ranks sharing a machine, the local_rank-th modulo their number.
size_t choose_device(const std::vector<DeviceInfo>& devices, const char* requested, int local_rank);

// How the row and column kernels and the GEMM cut their work (kernels/common.cl
// and kernels/gemm_*.cl describe both ways). CPU shapes suit a CPU device
// (PoCL), which runs a work-group's items as one loop: one item per row or per
// 16 columns, each with float16 vectors, and the register-blocked GEMM. GPU
// shapes suit a device that runs a group's items side by side: a work-group
// per row with its reductions in local memory, one item per column and block
// of the column's rows, and the tiled GEMM. Every program is built with lanes,
// row_items, column_items and piece as LANES, ROW_ITEMS, COLUMN_ITEMS and PIECE.
struct Shapes {
  const char* name;    // "cpu" or "gpu"
  int lanes;           // floats per item of a row or column kernel: 16 or 1
  int row_items;       // items per row of a row kernel, a power of 2
  int column_items;    // items per work-group of a column kernel
  int piece;           // columns per item of the kernels that go along rows in pieces (launch.h: pieces)
  bool split_columns;  // column sums take a column in blocks, the embedding's backward its ids in buckets
                       // (table.cpp), side by side, else whole
  bool tiled_gemm;     // the tiled GEMM, else the blocked one
};
inline constexpr Shapes kCpuShapes{"cpu", 16, 1, 1, 256, false, false};
inline constexpr Shapes kGpuShapes{"gpu", 1, 128, 64, 16, true, true};

class Runtime {
 public:
  // The process-wide runtime, created on first use (and never destroyed, so
  // buffers released by static objects at exit still find their context).
  // Throws sf::Error when no OpenCL device can be had.
  static Runtime& get();

  cl_context context() const { return context_; }
  cl_command_queue queue() const { return queue_; }
  cl_device_id device() const { return device_; }
  // CPU shapes on a CPU device, GPU shapes on any other;
  // SCRATCHFORMER_OPENCL_SHAPES=cpu or =gpu forces one on any device.
  const Shapes& shapes() const { return *shapes_; }
  // "<device name> (<platform name>), <cpu or gpu> shapes".
  const std::string& description() const { return description_; }

  // The options every program is built with: the OpenCL C version, the
  // shapes' sizes (LANES, ROW_ITEMS, COLUMN_ITEMS, PIECE) and, where the
  // device offers it, correctly rounded division and square root.
  const std::string& build_options() const { return build_options_; }

  // The kernel `name` of the program built from `source` (compared by address).
  cl_kernel kernel(const Source& source, const char* name);

  // A device buffer of at least `bytes` bytes for a kernel's scratch results
  // (e.g. dot's partial sums); valid until the next call.
  cl_mem scratch(size_t bytes);

  // A new buffer of `bytes` bytes. When the device is out of memory the
  // out-of-memory handler runs (the device gives back the freed buffers it
  // keeps) and the creation is tried once more; failing again is an
  // sf::Error that says the device is out of memory.
  cl_mem create_buffer(size_t bytes);
  void set_out_of_memory_handler(std::function<void()> handler);

  // For tests: the next `count` buffer creations fail with `status`, as on a
  // device whose memory is full (CL_MEM_OBJECT_ALLOCATION_FAILURE or
  // CL_OUT_OF_RESOURCES); and the number of buffers created so far.
  void fail_next_buffer_creations(int count, cl_int status);
  int64_t buffers_created();

 private:
  Runtime();
  cl_program build(const Source& source);
  cl_mem try_create_buffer(size_t bytes, cl_int* status);

  cl_device_id device_ = nullptr;
  cl_context context_ = nullptr;
  cl_command_queue queue_ = nullptr;
  const Shapes* shapes_ = nullptr;
  std::string description_;
  std::string build_options_;

  std::mutex mutex_;
  std::map<const Source*, cl_program> programs_;
  std::map<std::pair<const Source*, std::string>, cl_kernel> kernels_;
  cl_mem scratch_ = nullptr;
  size_t scratch_bytes_ = 0;

  // Buffer creation has a lock of its own: the out-of-memory handler may run
  // while scratch() holds mutex_.
  std::mutex buffers_mutex_;
  std::function<void()> out_of_memory_handler_;
  int failures_to_inject_ = 0;
  cl_int injected_status_ = CL_SUCCESS;
  int64_t buffers_created_ = 0;
};

}  // namespace sf::opencl_backend
