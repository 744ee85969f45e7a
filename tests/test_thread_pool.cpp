// The kernels' thread pool: every index runs exactly once, chunks respect the
// grain, nested and concurrent calls run inline, and jobs issued back to back
// (workers spinning) or after a pause (workers asleep) all complete.
#include <doctest/doctest.h>

#include <atomic>
#include <cmath>
#include <chrono>
#include <thread>
#include <vector>

#include "autograd/kernels/thread_pool.h"
#include "test_nn_helpers.h"

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

// The kernels split large products and row-wise ops across threads: a training
// step's loss and gradients must not depend on how many threads share it.
// (Also what `make SANITIZE=thread test` runs the threaded kernels with.)
TEST_CASE("thread pool: a Transformer step gives the same loss and gradients on 1 and 2 threads") {
  sf::nn::TransformerConfig c = sf::testing::tiny_config();
  c.src_seq_len = c.tgt_seq_len = 32;
  c.d_model = 128;
  c.h = 4;
  c.d_ff = 256;
  c.src_vocab_size = c.tgt_vocab_size = 64;
  c.dropout = 0.0f;
  auto model = sf::testing::tiny_model(c);
  sf::Rng rng(3);
  std::vector<std::vector<int32_t>> sources(16), targets(16);
  for (size_t i = 0; i < sources.size(); ++i) {
    for (uint64_t n = 10 + rng.below(20); n > 0; --n) sources[i].push_back(4 + static_cast<int32_t>(rng.below(60)));
    for (uint64_t n = 10 + rng.below(20); n > 0; --n) targets[i].push_back(4 + static_cast<int32_t>(rng.below(60)));
  }
  sf::testing::Batch batch = sf::testing::make_batch(sources, targets, 32);
  auto step = [&](int threads) {
    sf::kernels::set_num_threads(threads);
    model->zero_grad();
    sf::Tensor loss = sf::testing::batch_loss(*model, batch);
    loss.backward();
    std::vector<float> values{loss.item()};
    for (const sf::Tensor& p : model->parameters())
      for (float g : p.grad().to_vector()) values.push_back(g);
    return values;
  };
  std::vector<float> one = step(1), two = step(2);
  sf::kernels::set_num_threads(0);
  REQUIRE(one.size() == two.size());
  int differ = 0;
  for (size_t i = 0; i < one.size(); ++i)
    if (std::fabs(one[i] - two[i]) > 1e-6f + 1e-4f * std::fabs(one[i])) ++differ;
  CHECK(differ == 0);
}
