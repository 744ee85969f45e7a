// Where tensor memory lives, and the narrow interface a backend implements.
//
// A tensor's bytes sit in a `Storage`: an opaque buffer owned by a `Device`.
// Only the device knows what the buffer is (a host address on the CPU, a cl_mem
// on OpenCL); everything else moves bytes through the device's copy functions
// and computes through its kernel table (kernels/kernels.h), addressing memory
// as (buffer, byte offset). Adding a backend means implementing this class and
// a kernel table; nothing in nn/, optim/ or the rooms above them changes (docs/11-devices.md).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/kernels.h"

namespace sf {

using kernels::Mem;

class Device {
 public:
  virtual ~Device() = default;
  // "cpu", "opencl"; a longer description for logs (e.g. the OpenCL device's name).
  virtual const char* name() const = 0;
  virtual std::string description() const { return name(); }
  // True when buffers are host addresses, so Tensor::data() may read them.
  virtual bool host_addressable() const = 0;

  // An opaque buffer of at least `bytes` bytes, and its release.
  virtual void* allocate(size_t bytes) = 0;
  virtual void release(void* buffer, size_t bytes) = 0;

  // Byte copies. `read` returns once the bytes are on the host; the others may
  // run asynchronously, in order with the kernels.
  virtual void write(const void* host, Mem<void> dst, size_t bytes) = 0;
  virtual void read(Mem<const void> src, void* host, size_t bytes) = 0;
  virtual void copy(Mem<const void> src, Mem<void> dst, size_t bytes) = 0;
  // Sets `count` 4-byte words to `pattern` (the bits of a float or an int32).
  virtual void fill(Mem<void> dst, uint32_t pattern, size_t count) = 0;
  // Waits until everything queued on the device has finished.
  virtual void synchronize() = 0;

  virtual const kernels::Table& kernels() const = 0;
  // Whether its bf16 matrix products beat its float32 ones. Where they do not,
  // autocast keeps bf16's rounding but multiplies in float32 (ops.h).
  virtual bool multiplies_bf16_faster() const { return false; }
};

Device& cpu();

// The device a config names: "cpu", or "opencl" in a build with the OpenCL
// backend (make OPENCL=1). Throws sf::Error naming what is missing otherwise.
Device& device_named(const std::string& name);
// Every name device_named knows (what a config's "device" may be).
std::vector<std::string> device_names();

// Processes that share a machine (data-parallel ranks) spread over its
// devices: the process numbered `local_rank` among them takes device
// local_rank mod (the machine's GPUs, or all its devices when it has no GPU).
// Call before the first tensor goes to such a device; a single process is 0.
void set_local_rank(int local_rank);
int local_rank();

// The CPU device's allocations: how many were served by the system or reused
// from its cache of freed blocks, and bytes (counted in size classes) held by
// tensors now, at most so far, and kept in the cache.
struct AllocationStats {
  int64_t system_allocations = 0;
  int64_t cache_hits = 0;
  int64_t live_bytes = 0;
  int64_t peak_live_bytes = 0;
  int64_t cached_bytes = 0;
};
AllocationStats cpu_allocation_stats();
// Gives the CPU device's cached blocks back to the system: before a large
// allocation that the cache cannot serve, so that it does not raise the
// process's peak memory (the blocks are allocated anew when next needed).
void release_cached_cpu_memory();

// A block of device memory, freed by its device when the last tensor using it goes.
class Storage {
 public:
  Storage(Device& device, size_t bytes);
  // Host memory that someone else owns, frees, and keeps alive while it is
  // in use (the CPU device's; see Tensor::over).
  Storage(void* borrowed, size_t bytes);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* buffer() const { return buffer_; }
  size_t bytes() const { return bytes_; }
  Device& device() const { return device_; }

 private:
  Device& device_;
  size_t bytes_;
  void* buffer_;
  bool owned_ = true;  // false: borrowed, not ours to free
};

}  // namespace sf
