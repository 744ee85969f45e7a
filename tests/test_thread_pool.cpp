// The kernels' thread pool: every index runs exactly once, chunks respect the
// grain, nested and concurrent calls run inline, and jobs issued back to back
// (workers spinning) or after a pause (workers asleep) all complete.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "autograd/kernels/thread_pool.h"

using sf::kernels::ThreadPool;

namespace {

// Runs parallel_for over [begin, end) and checks every index was visited once.
void expect_each_index_once(ThreadPool& pool, int64_t begin, int64_t end, int64_t grain) {
  std::vector<std::atomic<int>> visits(static_cast<size_t>(end));
  std::atomic<int64_t> short_chunks = 0;
  pool.parallel_for(begin, end, grain, [&](int64_t b, int64_t e) {
    if (e - b < grain && e != end) ++short_chunks;  // only the last chunk may be short
    for (int64_t i = b; i < e; ++i) ++visits[static_cast<size_t>(i)];
  });
  for (int64_t i = 0; i < end; ++i) REQUIRE(visits[static_cast<size_t>(i)].load() == (i >= begin ? 1 : 0));
  CHECK(short_chunks.load() == 0);
}

}  // namespace

TEST_CASE("thread pool: every index once, for many ranges, grains and thread counts") {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    CHECK(pool.num_threads() == threads);
    for (int64_t end : {0, 1, 2, 7, 64, 1000})
      for (int64_t grain : {1, 3, 100}) expect_each_index_once(pool, end / 3, end, grain);
  }
}

TEST_CASE("thread pool: thousands of back-to-back jobs, then jobs after the workers slept") {
  ThreadPool pool(3);
  std::atomic<int64_t> total = 0;
  auto add_range = [&](int64_t b, int64_t e) { total += (e - b); };
  for (int job = 0; job < 5000; ++job) pool.parallel_for(0, 12, 1, add_range);
  CHECK(total.load() == 5000 * 12);
  // Long enough for the workers to stop spinning and sleep.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  for (int job = 0; job < 10; ++job) pool.parallel_for(0, 12, 1, add_range);
  CHECK(total.load() == 5010 * 12);
  pool.set_num_threads(2);
  pool.parallel_for(0, 12, 1, add_range);
  CHECK(total.load() == 5011 * 12);
}

TEST_CASE("thread pool: nested calls run inline on the thread that makes them") {
  ThreadPool pool(2);
  std::atomic<int> mismatched = 0, inner_total = 0;
  pool.parallel_for(0, 4, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const auto outer = std::this_thread::get_id();
      pool.parallel_for(0, 100, 1, [&](int64_t ib, int64_t ie) {
        if (std::this_thread::get_id() != outer) ++mismatched;
        inner_total += static_cast<int>(ie - ib);
      });
    }
  });
  CHECK(mismatched.load() == 0);
  CHECK(inner_total.load() == 400);
}

TEST_CASE("thread pool: two threads calling at once both complete") {
  ThreadPool pool(2);
  std::atomic<int64_t> total = 0;
  auto caller = [&] {
    for (int job = 0; job < 2000; ++job)
      pool.parallel_for(0, 10, 1, [&](int64_t b, int64_t e) { total += e - b; });
  };
  std::thread other(caller);
  caller();
  other.join();
  CHECK(total.load() == 2 * 2000 * 10);
}
