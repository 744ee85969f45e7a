#include "thread_pool.h"

#include <algorithm>

namespace sf::kernels {

namespace {
// True on pool workers (always) and on a caller while its job runs: any
// parallel_for issued from such a thread is nested and must run inline.
thread_local bool t_in_region = false;

int resolve(int n) {
  if (n > 0) return n;
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}
}  // namespace

ThreadPool::ThreadPool(int n) { start_workers(resolve(n) - 1); }

ThreadPool::~ThreadPool() { stop_workers(); }

void ThreadPool::set_num_threads(int n) {
  std::lock_guard<std::mutex> region(region_);
  stop_workers();
  start_workers(resolve(n) - 1);
}

bool ThreadPool::in_parallel_region() { return t_in_region; }

void ThreadPool::start_workers(int count) {
  stop_ = false;
  for (int i = 0; i < count; ++i) workers_.emplace_back([this] { worker_loop(); });
}

void ThreadPool::stop_workers() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  work_ready_.notify_all();
  for (auto& t : workers_) t.join();
  workers_.clear();
}

void ThreadPool::run_chunks(std::unique_lock<std::mutex>& lock) {
  while (next_chunk_ < num_chunks_) {
    const int64_t b = begin_ + next_chunk_ * chunk_;
    const int64_t e = std::min(b + chunk_, end_);
    ++next_chunk_;
    ChunkFn call = call_;
    const void* ctx = ctx_;
    lock.unlock();
    call(ctx, b, e);
    lock.lock();
    if (--pending_ == 0) job_done_.notify_one();
  }
}

void ThreadPool::worker_loop() {
  t_in_region = true;
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    work_ready_.wait(lock, [this] { return stop_ || next_chunk_ < num_chunks_; });
    if (stop_) return;
    run_chunks(lock);
  }
}

void ThreadPool::run(int64_t begin, int64_t end, int64_t grain, ChunkFn call, const void* ctx) {
  std::unique_lock<std::mutex> region(region_, std::try_to_lock);
  if (!region.owns_lock()) {  // another thread's job owns the pool: go serial
    call(ctx, begin, end);
    return;
  }
  // As many equal chunks as threads, but none shorter than `grain`.
  const int64_t n = end - begin;
  const int64_t max_chunks = std::max<int64_t>(1, n / std::max<int64_t>(1, grain));
  const int64_t chunks = std::min<int64_t>(num_threads(), max_chunks);
  std::unique_lock<std::mutex> lock(mutex_);
  call_ = call;
  ctx_ = ctx;
  begin_ = begin;
  end_ = end;
  chunk_ = (n + chunks - 1) / chunks;
  num_chunks_ = (n + chunk_ - 1) / chunk_;
  next_chunk_ = 0;
  pending_ = num_chunks_;
  // Wake only as many workers as there are chunks beyond the caller's own.
  for (int64_t i = 1; i < num_chunks_; ++i) work_ready_.notify_one();
  t_in_region = true;
  run_chunks(lock);
  job_done_.wait(lock, [this] { return pending_ == 0; });
  t_in_region = false;
}

ThreadPool& pool() {
  static ThreadPool instance;
  return instance;
}

void set_num_threads(int n) { pool().set_num_threads(n); }

int num_threads() { return pool().num_threads(); }

}  // namespace sf::kernels
