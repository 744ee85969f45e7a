// The autograd engine: no-grad scope, graph freeing, views, and bad use.
#include <doctest/doctest.h>

#include <chrono>
#include <thread>

#include "autograd/block_cache.h"
#include "autograd/engine.h"
#include "autograd/init.h"
#include "autograd/ops.h"
#include "base/address_sanitizer.h"
#include "base/error.h"
#include "base/random.h"
#include "skip.h"

using namespace sf;

TEST_CASE("engine: no-grad scope records nothing") {
  Tensor x = Tensor::ones({2}).set_requires_grad();
  {
    NoGradGuard no_grad;
    Tensor y = x * 3.0f;
    CHECK_FALSE(y.requires_grad());
    CHECK(y.is_leaf());
  }
  CHECK((x * 3.0f).requires_grad());
  CHECK_FALSE((Tensor::ones({2}) * 3.0f).requires_grad());
}

TEST_CASE("engine: backward frees the graph") {
  Tensor x = Tensor::ones({2}).set_requires_grad();
  Tensor y = sum(exp(x) * x);
  std::weak_ptr<Node> node = y.grad_fn();
  y.backward();
  CHECK(node.lock()->inputs.empty());  // saved tensors released
  CHECK_THROWS_WITH_AS(y.backward(), doctest::Contains("already freed"), InternalError);
}

TEST_CASE("engine: reshape and detach alias storage; clone copies") {
  Tensor x = Tensor::from({1, 2, 3, 4}, {2, 2});
  Tensor r = reshape(x, {4});
  CHECK(r.same_storage(x));
  CHECK(x.detach().same_storage(x));
  Tensor c = x.clone();
  CHECK_FALSE(c.same_storage(x));
  c.data()[0] = 9;
  CHECK(x.data()[0] == 1);
  CHECK_FALSE(transpose(x, 0, 1).same_storage(x));
}

TEST_CASE("engine: a gradient slot set in place is overwritten after zero_grad, and reads zeros where none came") {
  // As data parallelism's buckets use it: each slot a view of one buffer.
  Tensor buffer = Tensor::from({9, 9, 9, 9}, {4});
  Tensor x = Tensor::from({1, 2}, {2}).set_requires_grad(), unused = Tensor::ones({2}).set_requires_grad();
  x.set_grad(buffer.view(0, {2}));
  unused.set_grad(buffer.view(2, {2}));
  x.zero_grad();
  unused.zero_grad();
  sum(x * x).backward();
  sum(x * x).backward();  // accumulates onto the first
  CHECK(buffer.to_vector() == std::vector<float>{4, 8, 9, 9});  // written once, not zeroed first
  CHECK(unused.grad().to_vector() == std::vector<float>{0, 0});  // zeroed when read
  CHECK(buffer.to_vector() == std::vector<float>{4, 8, 0, 0});
  x.zero_grad();
  CHECK(x.grad().to_vector() == std::vector<float>{0, 0});
  CHECK(x.grad().same_storage(buffer));
}

TEST_CASE("errors: broadcast and matmul shape mismatches") {
  Tensor a = Tensor::ones({2, 3}), b = Tensor::ones({4});
  CHECK_THROWS_WITH_AS(a + b, doctest::Contains("add: shapes [2, 3] and [4] do not broadcast"),
                       InternalError);
  CHECK_THROWS_WITH_AS(matmul(Tensor::ones({2, 3}), Tensor::ones({4, 5})),
                       doctest::Contains("matmul: shapes [2, 3] and [4, 5] do not multiply"), InternalError);
  CHECK_THROWS_WITH_AS(matmul(Tensor::ones({2, 2, 3}), Tensor::ones({3, 3, 4})),
                       doctest::Contains("do not broadcast"), InternalError);
  CHECK_THROWS_AS(matmul(Tensor::ones({3}), Tensor::ones({3, 1})), InternalError);
  CHECK_THROWS_WITH_AS(reshape(a, {4, -1}), doctest::Contains("cannot view [2, 3]"), InternalError);
  CHECK_THROWS_AS(concat({a, b}, 0), InternalError);
  CHECK_THROWS_AS(slice(a, 1, 2, 5), InternalError);
  CHECK_THROWS_AS(sum(a, 2), InternalError);
}

TEST_CASE("errors: backward on a non-scalar without a gradient") {
  Tensor x = Tensor::ones({2, 3}).set_requires_grad();
  Tensor y = x * 2.0f;
  CHECK_THROWS_WITH_AS(y.backward(), doctest::Contains("needs a gradient argument"), InternalError);
  CHECK_THROWS_WITH_AS(y.backward(Tensor::ones({3})), doctest::Contains("gradient of shape [3]"),
                       InternalError);
  CHECK_THROWS_WITH_AS(Tensor::ones({1}).backward(), doctest::Contains("does not require grad"),
                       InternalError);
}

TEST_CASE("errors: embedding index out of range") {
  Tensor table = Tensor::ones({10, 4});
  CHECK_THROWS_WITH_AS(embedding(table, Tensor::from_ints({3, 12}, {2})),
                       doctest::Contains("index 12 out of range for a table of 10 rows"), InternalError);
  CHECK_THROWS_AS(embedding(table, Tensor::from_ints({-1}, {1})), InternalError);
  CHECK_THROWS_AS(embedding(table, Tensor::ones({2})), InternalError);  // float ids
}

TEST_CASE("errors: wrong dtypes and bad arguments") {
  Tensor ids = Tensor::from_ints({1, 2}, {2});
  CHECK_THROWS_WITH_AS(exp(ids), doctest::Contains("expected a float32 tensor"), InternalError);
  CHECK_THROWS_AS(ids.data(), InternalError);
  CHECK_THROWS_AS(ids.set_requires_grad(), InternalError);
  CHECK_THROWS_AS(cross_entropy(Tensor::ones({2, 3}), Tensor::from_ints({0, 3}, {2})), InternalError);
  CHECK_THROWS_AS(cross_entropy(Tensor::ones({2, 3}), Tensor::from_ints({0}, {1})), InternalError);
  Rng rng(1);
  CHECK_THROWS_AS(dropout(Tensor::ones({2}), 1.0f, rng), InternalError);
  CHECK_THROWS_AS(topk(Tensor::ones({2, 3}), 4), InternalError);
  CHECK_THROWS_AS(Tensor().shape(), InternalError);
  CHECK_THROWS_AS(eq(ids, Tensor::ones({2})), InternalError);
}

TEST_CASE("allocator: a steady-state training step makes no system allocation") {
  // A two-layer MLP trained by hand-written SGD: the same step, repeated.
  Rng rng(3);
  Tensor w1 = xavier_uniform({16, 8}, rng).set_requires_grad();
  Tensor b1 = Tensor::zeros({16}).set_requires_grad();
  Tensor w2 = xavier_uniform({4, 16}, rng).set_requires_grad();
  Tensor x = uniform({32, 8}, -1, 1, rng);
  Tensor y = Tensor::from_ints(std::vector<int32_t>(32, 2), {32});
  auto step = [&] {
    Tensor h = bias_relu(matmul(x, w1, {.trans_b = true}), b1);
    Tensor loss = cross_entropy(matmul(dropout(h, 0.1f, rng), w2, {.trans_b = true}), y, -100, 0.1f);
    loss.backward();
    NoGradGuard no_grad;
    for (Tensor* p : {&w1, &b1, &w2}) {
      float* d = p->data();
      const float* g = p->grad().data();
      for (int64_t i = 0; i < p->numel(); ++i) d[i] -= 0.1f * g[i];
      p->zero_grad();
    }
  };
  step();
  step();
  int64_t before = cpu_allocation_stats().system_allocations;
  for (int i = 0; i < 3; ++i) step();
  CHECK(cpu_allocation_stats().system_allocations == before);
  CHECK(cpu_allocation_stats().cache_hits > 0);
}

TEST_CASE("engine: the graph keeps only what backward needs, not every intermediate") {
  // log_softmax's backward needs its output, not its input: once the caller
  // drops the logits, their memory is free although the graph still exists.
  Tensor w = Tensor::ones({256, 256}).set_requires_grad();
  Tensor x = Tensor::ones({512, 256});
  const int64_t logits_bytes = 512 * 256 * 4;
  int64_t before = cpu_allocation_stats().live_bytes;
  Tensor log_probs = log_softmax(matmul(x, w));  // the logits are a temporary
  int64_t held = cpu_allocation_stats().live_bytes - before;
  CHECK(held >= logits_bytes);      // the log-probabilities
  CHECK(held < 2 * logits_bytes);   // but not the logits as well
  sum(log_probs).backward();
  CHECK(w.grad().defined());
}

namespace {
// A cache of buffers from ::operator new that counts the ones it frees.
int freed_by_cache;
BlockCache counting_cache(std::chrono::milliseconds max_idle) {
  freed_by_cache = 0;
  return BlockCache(64, size_t{1} << 30, [](void* buffer, size_t) { ::operator delete(buffer); ++freed_by_cache; },
                    max_idle);
}
}  // namespace

TEST_CASE("allocator: the block cache frees buffers left idle, keeps those in use") {
  int& freed = freed_by_cache;
  BlockCache cache = counting_cache(std::chrono::milliseconds(40));
  const size_t size = cache.size_class(1000);
  CHECK(size == 1024);
  CHECK(cache.size_class(1100) == 1280);  // quarter steps between powers of two
  cache.give_back(::operator new(size), size);
  cache.give_back(::operator new(size), size);
  CHECK(cache.cached_bytes() == 2 * size);
  void* reused = cache.take(size);  // served from the cache
  REQUIRE(reused != nullptr);
  CHECK(cache.cached_bytes() == size);
  // The buffer in use comes back now and then; the other one sits idle.
  for (int i = 0; i < 12; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    cache.give_back(reused, size);
    reused = cache.take(size);
  }
  CHECK(freed == 1);  // the idle one went back to the system
  CHECK(cache.cached_bytes() == 0);
  cache.give_back(reused, size);
  cache.clear();
  CHECK(freed == 2);

  // A request takes a buffer up to two classes larger (1024 -> 1280 -> 1536),
  // which goes back to its own class when freed.
  void* big = ::operator new(1536);
  cache.give_back(big, 1536);
  CHECK(cache.take(1024) == big);
  cache.give_back(big, 1024);
  CHECK(cache.cached_bytes() == 1536);
  CHECK(cache.take(768) == nullptr);  // four classes below it: 768, 896, 1024, 1280, 1536
  CHECK(cache.take(1536) == big);
  ::operator delete(big);
}

TEST_CASE("allocator: under AddressSanitizer a tensor's bytes past its end and a freed tensor's buffer are poisoned") {
#ifndef SF_ADDRESS_SANITIZER
  SF_SKIP("this build has no AddressSanitizer (SANITIZE=1 has)");
#else
  // The first poisoned byte of [begin, begin + n), or nullptr.
  auto first_poisoned = [](char* begin, size_t n) { return static_cast<char*>(__asan_region_is_poisoned(begin, n)); };
  // 5 floats, 20 bytes, served from the 64-byte size class: the 44 after them
  // are poisoned, as malloc's redzone would be.
  char* bytes;
  {
    Tensor five = Tensor::ones({5});
    bytes = reinterpret_cast<char*>(five.data());
    CHECK(first_poisoned(bytes, 20) == nullptr);
    CHECK(first_poisoned(bytes, 64) == bytes + 20);
  }
  // Freed into the cache: every byte poisoned while it waits there.
  CHECK(first_poisoned(bytes, 64) == bytes);
  // Handed out again (the class's most recent buffer): addressable as far as asked.
  Tensor three = Tensor::zeros({3});
  REQUIRE(reinterpret_cast<char*>(three.data()) == bytes);
  CHECK(first_poisoned(bytes, 64) == bytes + 12);
#endif
}

TEST_CASE("allocator: a size class that asks the system again for what it gave back keeps its buffers longer") {
  int& freed = freed_by_cache;
  BlockCache cache = counting_cache(std::chrono::milliseconds(100));
  // Buffers are freed when a buffer comes back: this one, of a class of its own.
  void* ticker = ::operator new(64);
  auto wait_then_sweep = [&](int ms) {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    cache.give_back(ticker, 64);
    ticker = cache.take(64);
  };
  // A long batch's buffer, idle past 100 ms: given back to the system.
  cache.give_back(::operator new(1024), 1024);
  wait_then_sweep(150);
  CHECK(freed == 1);
  // The next long batch asks again: a miss that doubles its class's idle time.
  CHECK(cache.take(1024) == nullptr);
  void* again = ::operator new(1024);
  cache.give_back(again, 1024);
  wait_then_sweep(150);
  CHECK(freed == 1);  // 150 ms idle, within the class's 200 ms
  REQUIRE(cache.take(1024) == again);
  ::operator delete(again);

  // clear() frees every buffer on purpose: no sign that a class keeps too few.
  cache.give_back(::operator new(4096), 4096);
  cache.clear();
  CHECK(freed == 2);
  CHECK(cache.take(4096) == nullptr);
  cache.give_back(::operator new(4096), 4096);
  wait_then_sweep(150);
  CHECK(freed == 3);  // still 100 ms
  ::operator delete(ticker);
}
