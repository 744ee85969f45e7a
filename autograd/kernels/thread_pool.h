// A small fork-join thread pool for the compute kernels.
//
// `parallel_for` splits [begin, end) into at most num_threads() contiguous chunks
// and runs them on the pool's workers plus the calling thread, returning when all
// are done. Design points:
//  * A training step or a decoded token is hundreds of kernels, many of them a
//    few microseconds long, issued back to back. A worker woken from a sleep
//    (a futex) starts 5-15 us late, longer than such a kernel, so after each job
//    workers spin for a short while (kSpin in thread_pool.cpp) watching for the
//    next one, as OpenMP runtimes do, and only then sleep on a condition variable. Idle for longer, they
//    leave the cores to other code.
//  * Jobs are published and chunks claimed with atomics; the caller takes
//    chunks too, so a chunk no worker has claimed yet runs on the caller.
//  * A range no larger than `grain`, a 1-thread pool, or a call made from inside a
//    running parallel_for (nested) runs inline on the caller: no type erasure,
//    no wake-ups. Nested calls therefore never deadlock.
//  * If two unrelated threads call parallel_for at once, the second one simply
//    runs its range serially instead of waiting for the pool.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace sf::kernels {

class ThreadPool {
 public:
  // n <= 0 means std::thread::hardware_concurrency().
  explicit ThreadPool(int n = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Threads used by parallel_for, counting the caller (so workers = n - 1).
  // Must not be called while a parallel_for is running.
  void set_num_threads(int n);
  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }

  // The parallel_for calls cut into more than one chunk since the pool was
  // made, and their chunks: a test reads them to know that its shapes really
  // were split, so that a grain grown past them fails it instead of leaving
  // the split untested.
  struct SplitCount {
    int64_t calls = 0, chunks = 0;
  };
  SplitCount split_count() const { return {split_calls_.load(), split_chunks_.load()}; }

  // Calls fn(chunk_begin, chunk_end) over disjoint chunks covering [begin, end),
  // each at least `grain` long (except when the range itself is shorter).
  // `fn` runs concurrently on several threads, so it is called as const and
  // must not throw.
  template <class Fn>
  void parallel_for(int64_t begin, int64_t end, int64_t grain, const Fn& fn) {
    if (end - begin <= grain || workers_.empty() || in_parallel_region()) {
      if (end > begin) fn(begin, end);
      return;
    }
    // Type-erase through a plain function pointer: no std::function allocation.
    auto call = [](const void* ctx, int64_t b, int64_t e) {
      (*static_cast<const Fn*>(ctx))(b, e);
    };
    run(begin, end, grain, call, &fn);
  }

 private:
  using ChunkFn = void (*)(const void* ctx, int64_t begin, int64_t end);

  static bool in_parallel_region();
  void run(int64_t begin, int64_t end, int64_t grain, ChunkFn call, const void* ctx);
  void start_workers(int count);
  void stop_workers();
  void worker_loop(uint64_t seen);
  // Waits for a job newer than `seen` (or stop); returns the newest job's number.
  uint64_t wait_for_job(uint64_t seen);
  // Wakes the sleeping workers after job_ has changed.
  void wake_all();
  // Claims and runs chunks of the current job until none are left.
  void run_chunks();

  std::vector<std::thread> workers_;
  std::mutex region_;  // held by the one caller whose job is using the pool

  // The current job. The caller writes call_ .. num_chunks_, then publishes them
  // by a new even job_ number (thread_pool.cpp says how a worker reads them
  // safely). Chunk i is [begin + i * chunk, min(begin + (i + 1) * chunk, end)).
  ChunkFn call_ = nullptr;
  const void* ctx_ = nullptr;
  int64_t begin_ = 0, end_ = 0, chunk_ = 0, num_chunks_ = 0;
  std::atomic<uint64_t> job_{0};        // number of the latest job; workers wait on it
  std::atomic<int64_t> next_chunk_{0};  // the next chunk to claim
  std::atomic<int64_t> unfinished_{0};  // chunks not yet finished; the caller waits on it
  std::atomic<int> readers_{0};         // workers that may be reading the job's fields
  std::atomic<int> sleepers_{0};        // workers asleep (or about to sleep) on wake_
  std::mutex sleep_mutex_;
  std::condition_variable wake_;        // sleeping workers wait here for a new job
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> split_calls_{0}, split_chunks_{0};
};

// The process-wide pool used by the kernels.
ThreadPool& pool();
void set_num_threads(int n);  // 0 = hardware_concurrency
int num_threads();

template <class Fn>
void parallel_for(int64_t begin, int64_t end, int64_t grain, const Fn& fn) {
  pool().parallel_for(begin, end, grain, fn);
}

}  // namespace sf::kernels
