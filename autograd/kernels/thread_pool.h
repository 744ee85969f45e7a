// A small fork-join thread pool for the compute kernels.
//
// `parallel_for` splits [begin, end) into at most num_threads() contiguous chunks
// and runs them on the pool's workers plus the calling thread, returning when all
// are done. Design points:
//  * Idle workers sleep on a condition variable (no spinning), so the cores are
//    free for other code (another library, the Python process, ...).
//  * A range no larger than `grain`, a 1-thread pool, or a call made from inside a
//    running parallel_for (nested) runs inline on the caller: no locking, no
//    type erasure, no wake-ups. Nested calls therefore never deadlock.
//  * If two unrelated threads call parallel_for at once, the second one simply
//    runs its range serially instead of waiting for the pool.
#pragma once
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
  void worker_loop();
  // Claims and runs chunks of the current job until none are left. Takes and
  // returns with `lock` held.
  void run_chunks(std::unique_lock<std::mutex>& lock);

  std::vector<std::thread> workers_;
  std::mutex region_;  // held by the one caller whose job is using the pool

  // The current job, all guarded by mutex_. Chunk i is
  // [begin + i * chunk, min(begin + (i + 1) * chunk, end)).
  std::mutex mutex_;
  std::condition_variable work_ready_;  // workers wait here for chunks
  std::condition_variable job_done_;    // the caller waits here for `pending_ == 0`
  ChunkFn call_ = nullptr;
  const void* ctx_ = nullptr;
  int64_t begin_ = 0, end_ = 0, chunk_ = 0;
  int64_t next_chunk_ = 0, num_chunks_ = 0;
  int64_t pending_ = 0;  // chunks claimed or not yet claimed, but not finished
  bool stop_ = false;
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
