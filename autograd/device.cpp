#include "device.h"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

namespace sf {
namespace {

// 64-byte alignment: one cache line, and a full AVX-512 register.
constexpr size_t kAlignment = 64;

// A training step allocates the same tensor sizes every step. Freed blocks are
// kept per size class and handed out again, so from the second step on a step
// needs no system allocation. Size classes are quarter steps between powers of
// two (2^k, 1.25 2^k, 1.5 2^k, 1.75 2^k): batches of varying lengths (bucketing)
// then share blocks, at most 25% larger than asked for. The cache is bounded;
// past the bound blocks go back to the system. Built with
// SF_NO_CACHING_ALLOCATOR (the sanitizer build) every block goes straight to
// the system, so the sanitizers see each one.
class CpuDevice final : public Device {
 public:
  const char* name() const override { return "cpu"; }

  void* allocate(size_t bytes) override {
    size_t size = rounded(bytes);
#ifndef SF_NO_CACHING_ALLOCATOR
    {
      std::lock_guard lock(mutex_);
      auto it = free_.find(size);
      if (it != free_.end() && !it->second.empty()) {
        void* ptr = it->second.back();
        it->second.pop_back();
        cached_bytes_ -= size;
        ++stats_.cache_hits;
        return ptr;
      }
      ++stats_.system_allocations;
    }
#endif
    void* ptr = std::aligned_alloc(kAlignment, size);
    if (!ptr) throw std::bad_alloc();
    return ptr;
  }

  void release(void* ptr, size_t bytes) override {
#ifndef SF_NO_CACHING_ALLOCATOR
    size_t size = rounded(bytes);
    std::lock_guard lock(mutex_);
    if (cached_bytes_ + size <= kCacheLimit) {
      free_[size].push_back(ptr);
      cached_bytes_ += size;
      return;
    }
#else
    (void)bytes;
#endif
    std::free(ptr);
  }

  AllocationStats stats() {
    std::lock_guard lock(mutex_);
    return stats_;
  }

  const kernels::Table& kernels() const override { return kernels::active(); }

 private:
  static constexpr size_t kCacheLimit = size_t{2} << 30;
  static size_t rounded(size_t bytes) {
    size_t size = std::max<size_t>(bytes, kAlignment);
    size_t power = std::bit_floor(size), quarter = std::max<size_t>(power / 4, kAlignment);
    return (size + quarter - 1) / quarter * quarter;
  }

  std::mutex mutex_;
  std::unordered_map<size_t, std::vector<void*>> free_;
  size_t cached_bytes_ = 0;
  AllocationStats stats_;
};

CpuDevice& cpu_device() {
  static CpuDevice device;
  return device;
}

}  // namespace

Device& cpu() { return cpu_device(); }

AllocationStats cpu_allocation_stats() { return cpu_device().stats(); }

Storage::Storage(Device& device, size_t bytes)
    : device_(device), bytes_(bytes), ptr_(device.allocate(bytes)) {}

Storage::~Storage() { device_.release(ptr_, bytes_); }

}  // namespace sf
