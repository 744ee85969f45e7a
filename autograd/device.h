// Where tensor memory lives. A tensor's bytes sit in a `Storage` owned by a
// `Device`; ops reach the device's kernels through `Device::kernels()`. The CPU
// device is the only one built in; another backend (e.g. OpenCL) implements this
// interface and nothing in nn/ or train/ changes.
#pragma once
#include <cstddef>
#include <memory>

#include "kernels/kernels.h"

namespace sf {

class Device {
 public:
  virtual ~Device() = default;
  virtual const char* name() const = 0;
  virtual void* allocate(size_t bytes) = 0;
  virtual void release(void* ptr, size_t bytes) = 0;
  virtual const kernels::Table& kernels() const = 0;
};

Device& cpu();

// Counts of the CPU device's allocations: served by the system, or reused from
// its cache of freed blocks.
struct AllocationStats {
  int64_t system_allocations = 0;
  int64_t cache_hits = 0;
};
AllocationStats cpu_allocation_stats();

// A block of device memory, freed by its device when the last tensor using it goes.
class Storage {
 public:
  Storage(Device& device, size_t bytes);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  Device& device() const { return device_; }

 private:
  Device& device_;
  size_t bytes_;
  void* ptr_;
};

}  // namespace sf
