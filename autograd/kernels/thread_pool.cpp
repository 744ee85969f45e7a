#include "thread_pool.h"

#include <algorithm>
#include <chrono>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace sf::kernels {

namespace {
// True on pool workers (always) and on a caller while its job runs: any
// parallel_for issued from such a thread is nested and must run inline.
thread_local bool t_in_region = false;

// How long an idle worker keeps watching for the next job before it sleeps.
// Measured on a 2-core Zen 4 machine: a tiny model's training step issues a
// job every ~20 us on average, greedy decoding one every ~5 us, so 200 us
// covers the gaps inside a step or a decode while a worker idle between
// steps of a data loader or a user's program still goes to sleep.
constexpr auto kSpin = std::chrono::microseconds(200);

// A hint to the core that this is a spin loop (x86's PAUSE, ARM's YIELD), so
// the spinning thread yields pipeline resources to its hyperthread sibling.
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Spins until `ready()` or for kSpin, whichever comes first; returns ready().
// The clock is read every 64 turns: a read costs more than a turn.
template <class Ready>
bool spin_until(const Ready& ready) {
  const auto deadline = std::chrono::steady_clock::now() + kSpin;
  for (int i = 0;; ++i) {
    if (ready()) return true;
    cpu_relax();
    if (i % 64 == 63 && std::chrono::steady_clock::now() > deadline) return false;
  }
}

int resolve(int n) {
  if (n > 0) return n;
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}
}  // namespace

// Job numbers: job_ is even while a job's fields are stable and odd while the
// caller rewrites them (a sequence lock). A worker registers in readers_ and
// then re-checks job_ before reading the fields; the caller makes job_ odd and
// then waits for readers_ to drain before writing. With both sides sequentially
// consistent, either the worker sees the odd number and backs off, or the
// caller sees the reader and waits, so fields are never read while written.

ThreadPool::ThreadPool(int n) { start_workers(resolve(n) - 1); }

ThreadPool::~ThreadPool() { stop_workers(); }

void ThreadPool::set_num_threads(int n) {
  std::lock_guard<std::mutex> region(region_);
  stop_workers();
  start_workers(resolve(n) - 1);
}

bool ThreadPool::in_parallel_region() { return t_in_region; }

void ThreadPool::start_workers(int count) {
  stop_.store(false);
  // Workers start from the job number of now: a stop signalled before a new
  // thread first runs is then still a new number to it.
  const uint64_t now = job_.load();
  for (int i = 0; i < count; ++i) workers_.emplace_back([this, now] { worker_loop(now); });
}

void ThreadPool::stop_workers() {
  stop_.store(true);
  job_.fetch_add(2);  // a new job number wakes spinning workers; wake_all sleeping ones
  wake_all();
  for (auto& t : workers_) t.join();
  workers_.clear();
}

void ThreadPool::wake_all() {
  // Taking the mutex orders this wake-up after any sleeper's last look at job_.
  { std::lock_guard<std::mutex> lock(sleep_mutex_); }
  wake_.notify_all();
}

uint64_t ThreadPool::wait_for_job(uint64_t seen) {
  uint64_t job = seen;
  auto published = [&] {  // a job newer than `seen`, its fields written
    job = job_.load();
    return job != seen && job % 2 == 0;
  };
  if (spin_until(published)) return job;
  std::unique_lock<std::mutex> lock(sleep_mutex_);
  sleepers_.fetch_add(1);
  while (!published()) wake_.wait(lock);
  sleepers_.fetch_sub(1);
  return job;
}

void ThreadPool::run_chunks() {
  for (int64_t i = next_chunk_.fetch_add(1); i < num_chunks_; i = next_chunk_.fetch_add(1)) {
    const int64_t b = begin_ + i * chunk_;
    call_(ctx_, b, std::min(b + chunk_, end_));
    unfinished_.fetch_sub(1, std::memory_order_release);
  }
}

void ThreadPool::worker_loop(uint64_t seen) {
  t_in_region = true;
  for (;;) {
    seen = wait_for_job(seen);
    if (stop_.load()) return;
    readers_.fetch_add(1);
    if (job_.load() == seen) run_chunks();
    readers_.fetch_sub(1);
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

  const uint64_t job = job_.fetch_add(1) + 1;  // odd: the fields are being written
  while (readers_.load() != 0) cpu_relax();    // late readers of the last job leave
  call_ = call;
  ctx_ = ctx;
  begin_ = begin;
  end_ = end;
  chunk_ = (n + chunks - 1) / chunks;
  num_chunks_ = (n + chunk_ - 1) / chunk_;
  if (num_chunks_ > 1) {
    split_calls_.fetch_add(1, std::memory_order_relaxed);
    split_chunks_.fetch_add(num_chunks_, std::memory_order_relaxed);
  }
  next_chunk_.store(0);
  unfinished_.store(num_chunks_);
  job_.store(job + 1);  // even: published
  if (sleepers_.load() > 0) wake_all();

  t_in_region = true;
  run_chunks();
  // Only chunks a worker has claimed can still be running; they are about as
  // long as the caller's own, so the caller spins, yielding its core only if
  // the wait grows long (a worker descheduled on a busy machine).
  auto finished = [this] { return unfinished_.load(std::memory_order_acquire) == 0; };
  if (!spin_until(finished))
    while (!finished()) std::this_thread::yield();
  t_in_region = false;
}

ThreadPool& pool() {
  static ThreadPool instance;
  return instance;
}

void set_num_threads(int n) { pool().set_num_threads(n); }

int num_threads() { return pool().num_threads(); }

}  // namespace sf::kernels
