// The OpenCL runtime: one device, its context and in-order queue, and the
// programs built from the kernel sources (each built once per process, its
// kernels created once and looked up by name).
#pragma once
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "errors.h"

namespace sf::opencl_backend {

// A program's OpenCL C source, the concatenation of `texts` (sources.cpp),
// and the options it is built with.
struct Source {
  std::vector<const char*> texts;
  std::string options;
};

// How the row and column kernels and the GEMM cut their work (kernels/common.cl
// and kernels/gemm_*.cl describe both ways). CPU shapes suit a CPU device
// (PoCL), which runs a work-group's items as one loop: one item per row or per
// 16 columns, each with float16 vectors, and the register-blocked GEMM. GPU
// shapes suit a device that runs a group's items side by side: a work-group
// per row with its reductions in local memory, one item per column, and the
// tiled GEMM. Every program is built with lanes, row_items and column_items
// as LANES, ROW_ITEMS and COLUMN_ITEMS.
struct Shapes {
  const char* name;  // "cpu" or "gpu"
  int lanes;         // floats per item of a row or column kernel: 16 or 1
  int row_items;     // items per row of a row kernel, a power of 2
  int column_items;  // items per work-group of a column kernel
  bool tiled_gemm;   // the tiled GEMM, else the blocked one
};
inline constexpr Shapes kCpuShapes{"cpu", 16, 1, 1, false};
inline constexpr Shapes kGpuShapes{"gpu", 1, 128, 64, true};

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

  // The kernel `name` of the program built from `source` (compared by address).
  cl_kernel kernel(const Source& source, const char* name);

  // A device buffer of at least `bytes` bytes for a kernel's scratch results
  // (e.g. dot's partial sums); valid until the next call.
  cl_mem scratch(size_t bytes);

 private:
  Runtime();
  cl_program build(const Source& source);

  cl_device_id device_ = nullptr;
  cl_context context_ = nullptr;
  cl_command_queue queue_ = nullptr;
  const Shapes* shapes_ = nullptr;
  std::string description_;

  std::mutex mutex_;
  std::map<const Source*, cl_program> programs_;
  std::map<std::pair<const Source*, std::string>, cl_kernel> kernels_;
  cl_mem scratch_ = nullptr;
  size_t scratch_bytes_ = 0;
};

}  // namespace sf::opencl_backend
