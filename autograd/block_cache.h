// A cache of freed device buffers, shared by the backends' allocators.
//
// A training step allocates the same tensor sizes every step. Freed buffers are
// kept per size class and handed out again, so from the second step on a step
// needs no allocation from the system (or the OpenCL driver). Size classes are
// quarter steps between powers of two (2^k, 1.25 2^k, 1.5 2^k, 1.75 2^k):
// batches of varying lengths (bucketing) then share buffers, at most 25% larger
// than asked for. The cache is bounded; past the bound buffers go back to the
// system. Built with SF_NO_CACHING_ALLOCATOR (the sanitizer build) it keeps
// nothing, so every buffer goes to the system and the sanitizers see each one.
#pragma once
#include <algorithm>
#include <bit>
#include <cstddef>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace sf {

class BlockCache {
 public:
  explicit BlockCache(size_t limit_bytes) : limit_(limit_bytes) {}

  // The size a request of `bytes` is served with (its size class).
  static size_t size_class(size_t bytes, size_t alignment) {
    size_t size = std::max(bytes, alignment);
    size_t power = std::bit_floor(size), quarter = std::max(power / 4, alignment);
    return (size + quarter - 1) / quarter * quarter;
  }

  // A cached buffer of exactly `size` bytes (a size class), or nullptr.
  void* take(size_t size) {
#ifdef SF_NO_CACHING_ALLOCATOR
    (void)size;
    return nullptr;
#endif
    std::lock_guard lock(mutex_);
    auto it = free_.find(size);
    if (it == free_.end() || it->second.empty()) return nullptr;
    void* buffer = it->second.back();
    it->second.pop_back();
    cached_bytes_ -= size;
    return buffer;
  }

  // Keeps `buffer` (of a size class) for reuse; false when the cache is full
  // and the caller should free it.
  bool keep(void* buffer, size_t size) {
#ifdef SF_NO_CACHING_ALLOCATOR
    (void)buffer, (void)size;
    return false;
#endif
    std::lock_guard lock(mutex_);
    if (cached_bytes_ + size > limit_) return false;
    free_[size].push_back(buffer);
    cached_bytes_ += size;
    return true;
  }

  // Hands every cached buffer to `free_buffer(buffer, size)` and empties the cache.
  template <class Free>
  void clear(Free free_buffer) {
    std::lock_guard lock(mutex_);
    for (auto& [size, buffers] : free_)
      for (void* b : buffers) free_buffer(b, size);
    free_.clear();
    cached_bytes_ = 0;
  }

 private:
  size_t limit_;
  std::mutex mutex_;
  std::unordered_map<size_t, std::vector<void*>> free_;
  size_t cached_bytes_ = 0;
};

}  // namespace sf
