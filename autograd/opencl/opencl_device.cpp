// The OpenCL `Device`: buffers are cl_mem objects, cached for reuse by a
// BlockCache, and every copy is a command on the runtime's in-order queue.
#include <algorithm>
#include <cstdint>
#include <limits>

#include "../block_cache.h"
#include "base/error.h"
#include "opencl.h"
#include "runtime.h"
#include "table.h"

namespace sf {
namespace {

using opencl_backend::check;
using opencl_backend::Runtime;

cl_mem mem(void* buffer) { return static_cast<cl_mem>(buffer); }

// Runs while tensors are destroyed, so it cannot throw; clReleaseMemObject
// fails only for an object that is not a live buffer, which we never pass.
void release_buffer(void* buffer, size_t) { clReleaseMemObject(mem(buffer)); }

class OpenCLDevice final : public Device {
 public:
  explicit OpenCLDevice(Runtime& runtime)
      : runtime_(runtime),
        cache_(kAlignment, cache_limit(runtime), release_buffer),
        description_("opencl: " + runtime.description()) {
    // Out of device memory, the buffers kept for reuse go back first.
    runtime.set_out_of_memory_handler([this] { cache_.clear(); });
  }

  const char* name() const override { return "opencl"; }
  std::string description() const override { return description_; }
  bool host_addressable() const override { return false; }

  // Refuses a tensor beyond the kernels' int32 indexing (kernels/common.cl)
  // here, before any kernel could be launched on it.
  void* allocate(size_t bytes) override {
    if (bytes > kMaxBytes)
      fail("opencl: a tensor of ", bytes, " bytes is beyond the kernels' int32 indexing (at most ",
           std::numeric_limits<int32_t>::max(), " elements of 4 bytes)");
    size_t size = cache_.size_class(bytes);
    if (void* buffer = cache_.take(size)) return buffer;
    return runtime_.create_buffer(size);
  }

  void release(void* buffer, size_t bytes) override {
    cache_.give_back(buffer, cache_.size_class(bytes));
  }

  // Blocking: the caller's host memory may be gone as soon as write returns.
  void write(const void* host, Mem<void> dst, size_t bytes) override {
    if (bytes == 0) return;
    check(clEnqueueWriteBuffer(runtime_.queue(), mem(dst.buffer), CL_TRUE, dst.offset, bytes, host, 0,
                               nullptr, nullptr),
          "clEnqueueWriteBuffer");
  }

  void read(Mem<const void> src, void* host, size_t bytes) override {
    if (bytes == 0) return;
    check(clEnqueueReadBuffer(runtime_.queue(), mem(src.buffer), CL_TRUE, src.offset, bytes, host, 0,
                              nullptr, nullptr),
          "clEnqueueReadBuffer");
  }

  void copy(Mem<const void> src, Mem<void> dst, size_t bytes) override {
    if (bytes == 0) return;
    check(clEnqueueCopyBuffer(runtime_.queue(), mem(src.buffer), mem(dst.buffer), src.offset, dst.offset,
                              bytes, 0, nullptr, nullptr),
          "clEnqueueCopyBuffer");
  }

  void fill(Mem<void> dst, uint32_t pattern, size_t count) override {
    if (count == 0) return;
    check(clEnqueueFillBuffer(runtime_.queue(), mem(dst.buffer), &pattern, sizeof pattern, dst.offset,
                              count * sizeof pattern, 0, nullptr, nullptr),
          "clEnqueueFillBuffer");
  }

  void synchronize() override { check(clFinish(runtime_.queue()), "clFinish"); }

  const kernels::Table& kernels() const override { return opencl_backend::table(); }

 private:
  // The smallest size class; sizes are multiples of it.
  static constexpr size_t kAlignment = 256;
  static constexpr size_t kMaxBytes = size_t{std::numeric_limits<int32_t>::max()} * 4;

  // A quarter of the device's memory may sit in the cache of freed buffers.
  static size_t cache_limit(Runtime& runtime) {
    return static_cast<size_t>(opencl_backend::device_value<cl_ulong>(runtime.device(), CL_DEVICE_GLOBAL_MEM_SIZE) / 4);
  }

  Runtime& runtime_;
  BlockCache cache_;
  std::string description_;
};

}  // namespace

Device& opencl() {
  static OpenCLDevice* device = new OpenCLDevice(Runtime::get());  // leaked like the runtime
  return *device;
}

}  // namespace sf
