// What the bf16 GEMM levels that multiply pairs share (gemm_bf16.cpp:
// AVX512-BF16 and gemm_amx.cpp: AMX on x86-64; gemm_bf16_neon.cpp: BFDOT on
// AArch64): operands read through op() and the threaded driver around a
// level's single-thread product. The packing into pairs is each instruction
// set's own (bf16_pairs_avx512.h; gemm_bf16_neon.cpp).
//
// Each of those instructions multiplies PAIRS of bf16 along k and adds the
// two products into one float32 lane, so all want B "in pairs": for each pair
// q of k and column c, the 32-bit word (op(B)[2q, c], op(B)[2q+1, c]) (Intel
// calls this the VNNI layout). An odd k's last pair ends in a zero, so no
// element past the matrix is ever read. Packing changes layout only, never
// value: a bf16 is moved as its 16 bits.
#pragma once
#include <algorithm>
#include <cstdint>

#include "bf16.h"
#include "gemm_tasks.h"
#include "kernels.h"

namespace sf::kernels::bf16_pairs {

// A matrix read through op(), as gemm.cpp's Operand.
struct Operand {
  const bf16* data;
  int64_t ld;
  bool trans;

  const bf16* at(int64_t i, int64_t j) const { return trans ? data + j * ld + i : data + i * ld + j; }
  bf16 get(int64_t i, int64_t j) const { return *at(i, j); }
  Operand sub(int64_t i, int64_t j) const { return {at(i, j), ld, trans}; }
};

// The B blocks of blocked_product, one buffer a thread.
inline thread_local gemm_tasks::AlignedBuffer<uint32_t> t_b_block;

// gemm.cpp's blocking, for a level's product on one thread (k > 0): for each
// block of op(B), at most nc columns by kc rows (gemm_tasks::block_size:
// whole panels of nr columns, whole pairs of k), the block is packed into
// pairs, nr words per pair for each panel (pack_b(panel, rows, cols,
// words)), and then row_panel(ir, rows, pc, kc, jc, nc, beta, block)
// multiplies op(A)'s panel of rows ir .. ir + rows (mr at most) by it, with
// the beta of C: the product's for the first block of k, 1 for the later
// ones, which accumulate.
template <class PackB, class RowPanel>
void blocked_product(const Operand& b, int64_t m, int64_t n, int64_t k, int64_t mr, int64_t nr, int64_t kc,
                     int64_t nc, float beta, PackB pack_b, RowPanel row_panel) {
  const int64_t nc_max = gemm_tasks::block_size(n, nc, nr), kc_max = gemm_tasks::block_size(k, kc, 2);
  uint32_t* block = t_b_block.get((kc_max / 2 + 1) * nc_max);
  for (int64_t jc = 0; jc < n; jc += nc_max) {
    const int64_t cols = std::min(nc_max, n - jc);
    for (int64_t pc = 0; pc < k; pc += kc_max) {
      const int64_t rows = std::min(kc_max, k - pc), pairs = (rows + 1) / 2;
      for (int64_t jr = 0; jr < cols; jr += nr)
        pack_b(b.sub(pc, jc + jr), rows, static_cast<int>(std::min(nr, cols - jr)), block + jr * pairs);
      for (int64_t ir = 0; ir < m; ir += mr)
        row_panel(ir, static_cast<int>(std::min(mr, m - ir)), pc, rows, jc, cols, pc == 0 ? beta : 1.0f,
                  static_cast<const uint32_t*>(block));
    }
  }
}

// A level's product on one thread: C[0:m, 0:n] = alpha op(A) op(B) + beta C, k > 0.
using SerialProduct = void (*)(const Operand& a, const Operand& b, int64_t m, int64_t n, int64_t k, float alpha,
                               float beta, float* c, int64_t ldc);

// gemm.h's batched contract on top of `serial`, with tiles of mr x nr: on the
// calling thread below `parallel_work` multiply-adds, else cut into tasks for
// the thread pool. Each task packs its own columns of B: their cost is counted
// 4x per word beside the tile's multiply-adds, as gemm.cpp weighs its packing.
inline void run_threaded(SerialProduct serial, int64_t mr, int64_t nr, int64_t parallel_work, bool trans_a,
                         bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const bf16* a, int64_t lda,
                         int64_t stride_a, const bf16* b, int64_t ldb, int64_t stride_b, float beta, float* c,
                         int64_t ldc, int64_t stride_c, int64_t batch) {
  const int threads = num_threads();
  const bool one_thread = threads == 1 || batch * m * n * k < parallel_work;
  const gemm_tasks::Split split =
      one_thread ? gemm_tasks::Split{} : gemm_tasks::choose_split(batch, threads, [&](int64_t pm, int64_t pn) {
        const int64_t rows = ((m + mr - 1) / mr + pm - 1) / pm * mr;
        const int64_t cols = ((n + nr - 1) / nr + pn - 1) / pn * nr;
        return rows * cols + 4 * cols;
      });
  gemm_tasks::run_tasks(m, n, batch, mr, nr, one_thread, split,
                        [&](int64_t e, int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
    const Operand op_a{a + e * stride_a, lda, trans_a}, op_b{b + e * stride_b, ldb, trans_b};
    serial(op_a.sub(i0, 0), op_b.sub(0, j0), i1 - i0, j1 - j0, k, alpha, beta, c + e * stride_c + i0 * ldc + j0,
           ldc);
  });
}

}  // namespace sf::kernels::bf16_pairs
