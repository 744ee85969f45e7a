// A cache of freed device buffers, shared by the backends' allocators.
//
// A training step allocates the same tensor sizes every step. Freed buffers are
// kept per size class and handed out again, so from the second step on a step
// needs little or no allocation from the system (or the OpenCL driver). Size
// classes are quarter steps between powers of two (2^k, 1.25 2^k, 1.5 2^k,
// 1.75 2^k): batches of varying lengths (bucketing) then share buffers, at most
// 25% larger than asked for.
//
// A request the exact class cannot serve takes a cached buffer of one of the
// next two classes (at most 1.5x as large) before asking the system: batches
// of bucketed lengths ask for many nearby sizes, and without this each size
// would keep buffers of its own (a Multi30k run held over a gigabyte so).
//
// The cache holds what the work keeps asking for, not what it once needed: a
// buffer that sits unused for a while (kMaxIdle) goes back to the system. After a batch
// of long sentences, the extra buffers it needed are returned a moment later
// instead of being held for the rest of the run; a steady training loop reuses
// its buffers every step and keeps them. A hard bound (the constructor's limit)
// caps the cache in any case.
//
// But long sentences come back: one batch in eight or so needs a larger logits
// buffer than the others, every few seconds. A size class that has to ask the
// system again for what it gave back keeps its buffers twice as long from
// then on (up to kMaxIdleGrowth times kMaxIdle), so such a buffer soon stays.
// Asking again costs more than the memory: fresh pages fault in one at a time
// (the kernel zeroes each), ~130 ms for 56 MiB on a cloud VM, and in data
// parallelism every rank waits for the one that pays it.
//
// Under AddressSanitizer the host allocator poisons the buffers it keeps here
// (autograd/device.cpp), so the cache is on in every build.
#pragma once
#include <algorithm>
#include <bit>
#include <chrono>
#include <cstddef>
#include <deque>
#include <mutex>
#include <new>
#include <unordered_map>

namespace sf {

class BlockCache {
 public:
  using Clock = std::chrono::steady_clock;
  // How long a cached buffer may go unused before it is freed, by default. A
  // training step of the models this project trains takes 10 ms to 2 s.
  static constexpr Clock::duration kMaxIdle = std::chrono::seconds(2);
  static constexpr int kMaxIdleGrowth = 32;

  // Buffers are multiples of `alignment` (a power of two); `free_buffer(buffer,
  // size)` returns one to the system.
  using FreeFn = void (*)(void* buffer, size_t size);
  BlockCache(size_t alignment, size_t limit_bytes, FreeFn free_buffer, Clock::duration max_idle = kMaxIdle)
      : alignment_(alignment), limit_(limit_bytes), free_buffer_(free_buffer), max_idle_(max_idle) {}
  ~BlockCache() { clear(); }

  // The size a request of `bytes` is served with (its size class).
  size_t size_class(size_t bytes) const {
    size_t size = std::max(bytes, alignment_);
    size_t power = std::bit_floor(size), quarter = std::max(power / 4, alignment_);
    return (size + quarter - 1) / quarter * quarter;
  }

  // A cached buffer for a request of size class `size` (at least that large),
  // or nullptr.
  void* take(size_t size) {
    std::lock_guard lock(mutex_);
    size_t served = size;
    for (int larger = 0; larger <= 2; ++larger, served = size_class(served + 1)) {
      auto it = free_.find(served);
      if (it == free_.end() || it->second.empty()) continue;
      void* buffer = it->second.back().buffer;  // the most recently freed: likely still in cache
      it->second.pop_back();
      cached_bytes_ -= served;
      if (served != size) larger_[buffer] = served;
      return buffer;
    }
    // A miss where a buffer was given back to the system: this class's
    // buffers are wanted again, so it keeps them longer.
    if (auto it = idle_of_.find(size); it != idle_of_.end() && it->second.evicted) {
      it->second.evicted = false;
      it->second.max_idle = std::min(2 * it->second.max_idle, kMaxIdleGrowth * max_idle_);
    }
    return nullptr;
  }

  // Takes back `buffer`, handed out for size class `size`: keeps it for reuse,
  // or frees it when the cache is full. Also frees the buffers that have been
  // idle too long.
  void give_back(void* buffer, size_t size) {
    std::lock_guard lock(mutex_);
    if (auto it = larger_.find(buffer); it != larger_.end()) {  // served from a larger class
      size = it->second;
      larger_.erase(it);
    }
    const Clock::time_point now = Clock::now();
    if (now - last_sweep_ > max_idle_ / 8) sweep(now);
    if (cached_bytes_ + size > limit_) {
      free_buffer_(buffer, size);
      return;
    }
    // Keeping a buffer may itself need memory; this runs in destructors,
    // possibly while an allocation failure unwinds, so it must not throw.
    try {
      free_[size].push_back({buffer, now});
    } catch (const std::bad_alloc&) {
      free_buffer_(buffer, size);
      return;
    }
    cached_bytes_ += size;
  }

  // Frees every cached buffer.
  void clear() {
    std::lock_guard lock(mutex_);
    sweep(Clock::time_point::max());
  }

  size_t cached_bytes() const {
    std::lock_guard lock(mutex_);
    return cached_bytes_;
  }

 private:
  struct Cached {
    void* buffer;
    Clock::time_point freed_at;
  };

  // How long a size class's buffers may sit unused, and whether the class
  // has given one back to the system since its last miss.
  struct Idle {
    Clock::duration max_idle;
    bool evicted = false;
  };

  // Frees the buffers unused for longer than their class allows at `now`, or
  // (Clock::time_point::max(), clear()) every buffer, which is no sign that
  // a class keeps too few. Each size class's list is in the order the buffers
  // came back, so the idle ones are at its front.
  void sweep(Clock::time_point now) {
    const bool clearing = now == Clock::time_point::max();
    for (auto& [size, buffers] : free_) {
      Idle& idle = idle_of_.try_emplace(size, Idle{max_idle_}).first->second;
      const Clock::time_point cutoff = clearing ? now : now - idle.max_idle;
      while (!buffers.empty() && buffers.front().freed_at < cutoff) {
        free_buffer_(buffers.front().buffer, size);
        buffers.pop_front();
        cached_bytes_ -= size;
        idle.evicted = !clearing;
      }
    }
    last_sweep_ = Clock::now();
  }

  size_t alignment_;
  size_t limit_;
  FreeFn free_buffer_;
  Clock::duration max_idle_;
  mutable std::mutex mutex_;
  std::unordered_map<size_t, std::deque<Cached>> free_;
  std::unordered_map<void*, size_t> larger_;  // buffers in use that are larger than their request
  std::unordered_map<size_t, Idle> idle_of_;  // per size class
  size_t cached_bytes_ = 0;
  Clock::time_point last_sweep_ = Clock::now();
};

}  // namespace sf
