// The OpenCL runtime: one device, its context and in-order queue, and the
// programs built from the kernel sources (each built once per process, its
// kernels created once and looked up by name).
#pragma once
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "errors.h"

namespace sf::opencl_backend {

// OpenCL C source of a program and the options it is built with.
struct Source {
  const char* text;
  std::string options;
};

class Runtime {
 public:
  // The process-wide runtime, created on first use (and never destroyed, so
  // buffers released by static objects at exit still find their context).
  // Throws sf::Error when no OpenCL device can be had.
  static Runtime& get();

  cl_context context() const { return context_; }
  cl_command_queue queue() const { return queue_; }
  cl_device_id device() const { return device_; }
  // A CPU device (PoCL's): kernels may choose code that suits CPUs.
  bool is_cpu() const { return is_cpu_; }
  // "<device name> (<platform name>)".
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
  bool is_cpu_ = false;
  std::string description_;

  std::mutex mutex_;
  std::map<const Source*, cl_program> programs_;
  std::map<std::pair<const Source*, std::string>, cl_kernel> kernels_;
  cl_mem scratch_ = nullptr;
  size_t scratch_bytes_ = 0;
};

}  // namespace sf::opencl_backend
