// What the float32 GEMM (gemm.cpp) and the bf16 one (gemm_bf16.cpp) share
// around their micro-kernels: block sizes, per-thread packing buffers, and
// the cutting of a batched product into tasks for the thread pool.
#pragma once
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <new>
#include <type_traits>
#include <utility>

#include "thread_pool.h"

namespace sf::kernels::gemm_tasks {

// A grow-only 64-byte-aligned buffer (one per thread and use), so
// steady-state calls never allocate.
template <class T>
class AlignedBuffer {
 public:
  ~AlignedBuffer() { release(); }
  T* get(std::size_t count) {
    if (count > size_) {
      release();
      data_ = static_cast<T*>(::operator new(count * sizeof(T), std::align_val_t(64)));
      size_ = count;
    }
    return data_;
  }

 private:
  void release() {
    if (data_) ::operator delete(data_, std::align_val_t(64));
    data_ = nullptr;
    size_ = 0;
  }
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

// C = beta * C (beta = 0 overwrites, reading nothing): a product with k = 0.
inline void scale_c(int64_t m, int64_t n, float beta, float* c, int64_t ldc, int64_t stride_c, int64_t batch) {
  for (int64_t e = 0; e < batch; ++e)
    for (int64_t i = 0; i < m; ++i) {
      float* row = c + e * stride_c + i * ldc;
      for (int64_t j = 0; j < n; ++j) row[j] = beta == 0.0f ? 0.0f : beta * row[j];
    }
}

// Splits `total` into equal blocks of at most `max_block` (so a remainder block is
// never tiny), rounded up to a multiple of `multiple`.
inline int64_t block_size(int64_t total, int64_t max_block, int64_t multiple) {
  const int64_t blocks = (total + max_block - 1) / max_block;
  const int64_t size = (total + blocks - 1) / blocks;
  return (size + multiple - 1) / multiple * multiple;
}

// A micro-kernel for each tile height, r = 1 .. rows: table[r - 1] is
// make(std::integral_constant<int, r>{}), e.g. [](auto r) { return
// &micro_kernel<r>; }, a kernel whose loops over rows the compiler unrolls.
template <class Kernel, int rows, class Make>
constexpr std::array<Kernel, rows> kernels_by_rows(Make make) {
  return [&]<int... r>(std::integer_sequence<int, r...>) {
    return std::array<Kernel, rows>{make(std::integral_constant<int, r + 1>{})...};
  }(std::make_integer_sequence<int, rows>{});
}

// Threading: the batch x M x N iteration space is cut into tasks, each a
// sub-product with its own packing. Tasks are whole batch entries when there
// are enough of them; otherwise each entry is cut into parts_m x parts_n =
// threads rectangles along the micro-kernel's tile boundaries.
struct Split {
  int64_t parts_m = 1, parts_n = 1;
};

// [begin, end) of part `i` of `parts` when `total` is cut on multiples of `tile`.
inline std::pair<int64_t, int64_t> part_range(int64_t total, int64_t tile, int64_t parts, int64_t i) {
  const int64_t tiles = (total + tile - 1) / tile;
  const int64_t begin = tiles * i / parts * tile, end = tiles * (i + 1) / parts * tile;
  return {std::min(begin, total), std::min(end, total)};
}

// The factorisation of `threads` minimising the largest task's cost(parts_m,
// parts_n), or whole entries when the batch spreads evenly by itself.
template <class Cost>
Split choose_split(int64_t batch, int threads, Cost cost) {
  if (batch % threads == 0 || batch >= 4 * threads) return {};
  Split best{threads, 1};
  for (int64_t pm = threads - 1; pm >= 1; --pm)
    if (threads % pm == 0 && cost(pm, threads / pm) < cost(best.parts_m, best.parts_n))
      best = {pm, threads / pm};
  return best;
}

// Runs product(entry, i0, i1, j0, j1) over every task of `split`, each the rows
// [i0, i1) and columns [j0, j1) of C for one batch entry, cut on mr x nr tiles;
// on the calling thread when `serial`.
template <class Product>
void run_tasks(int64_t m, int64_t n, int64_t batch, int64_t mr, int64_t nr, bool serial, Split split,
               Product product) {
  const int64_t parts = split.parts_m * split.parts_n;
  auto run = [&](int64_t first, int64_t last) {
    for (int64_t t = first; t < last; ++t) {
      const int64_t e = t / parts, part = t % parts;
      const auto [i0, i1] = part_range(m, mr, split.parts_m, part / split.parts_n);
      const auto [j0, j1] = part_range(n, nr, split.parts_n, part % split.parts_n);
      if (i0 != i1 && j0 != j1) product(e, i0, i1, j0, j1);
    }
  };
  if (serial)
    run(0, batch * parts);
  else
    parallel_for(0, batch * parts, 1, run);
}

}  // namespace sf::kernels::gemm_tasks
