// Launching the GEMM kernels (gemm_source.cpp). On CPU devices the whole
// blocks of C go to the blocked kernel and the edges (a right and a bottom
// strip) to the tiled one; elsewhere the tiled kernel computes all of C.
#include "gemm.h"

#include "launch.h"
#include "sources.h"
#include "table.h"

namespace sf::opencl_backend {
namespace {

// A product's operands as the kernels address them:
// op(A)[i, p] = a[i * a_rs + p * a_cs], op(B)[p, j] = b[p * b_rs + j * b_cs].
struct Operands {
  Mem<const float> a;
  int64_t a_rs, a_cs, stride_a;
  Mem<const float> b;
  int64_t b_rs, b_cs, stride_b;
  Mem<float> c;
  int64_t ldc, stride_c;

  // The product restricted to C's rows from `row` and columns from `col` on.
  Operands from(int64_t row, int64_t col) const {
    Operands o = *this;
    o.a = a + row * a_rs;
    o.b = b + col * b_cs;
    o.c = c + row * ldc + col;
    return o;
  }
};

void tiled(int64_t m, int64_t n, int64_t k, float alpha, const Operands& o, float beta, int64_t batch) {
  using T = Tiled;
  size_t tiles_n = (n + T::TN - 1) / T::TN, tiles_m = (m + T::TM - 1) / T::TM;
  Grid grid{3, {tiles_n * T::LX, tiles_m * T::LY, static_cast<size_t>(batch)}, {T::LX, T::LY, 1}};
  launch(Runtime::get().kernel(gemm_source, "gemm"), grid, m, n, k, alpha, o.a, o.a_rs, o.a_cs, o.stride_a, o.b,
         o.b_rs, o.b_cs, o.stride_b, beta, o.c, o.ldc, o.stride_c);
}

// m and n are multiples of the block, and op(B)'s rows are contiguous (b_cs = 1).
void blocked(int64_t m, int64_t n, int64_t k, float alpha, const Operands& o, float beta, int64_t batch) {
  using B = Blocked;
  Grid grid{3,
            {round_up(n / B::BN, B::BX), round_up(m / B::RM, B::BY), static_cast<size_t>(batch)},
            {B::BX, B::BY, 1}};
  launch(Runtime::get().kernel(gemm_source, "gemm_blocked"), grid, m, n, k, alpha, o.a, o.a_rs, o.a_cs,
         o.stride_a, o.b, o.b_rs, o.stride_b, beta, o.c, o.ldc, o.stride_c);
}

// op(B) copied row-major ([k, n] per batch element) into the runtime's scratch buffer.
Operands with_contiguous_b(const Operands& o, int64_t n, int64_t k, int64_t batch) {
  int64_t copies = o.stride_b == 0 ? 1 : batch;
  int64_t shape[3] = {copies, k, n}, strides[3] = {o.stride_b, o.b_rs, o.b_cs};
  Mem<float> copy(Runtime::get().scratch(copies * k * n * sizeof(float)), 0);
  strided_copy(o.b, shape, strides, 3, copy);
  Operands contiguous = o;
  contiguous.b = copy;
  contiguous.b_rs = n;
  contiguous.b_cs = 1;
  contiguous.stride_b = o.stride_b == 0 ? 0 : k * n;
  return contiguous;
}

}  // namespace

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, Mem<const float> a,
          int64_t lda, int64_t stride_a, Mem<const float> b, int64_t ldb, int64_t stride_b, float beta,
          Mem<float> c, int64_t ldc, int64_t stride_c, int64_t batch) {
  if (m <= 0 || n <= 0 || batch <= 0) return;
  Operands o{a,         trans_a ? 1 : lda, trans_a ? lda : 1, stride_a, b, trans_b ? 1 : ldb, trans_b ? ldb : 1,
             stride_b,  c,                 ldc,               stride_c};
  int64_t m_blocks = m / Blocked::RM * Blocked::RM, n_blocks = n / Blocked::BN * Blocked::BN;
  if (!Runtime::get().is_cpu() || m_blocks == 0 || n_blocks == 0) return tiled(m, n, k, alpha, o, beta, batch);

  if (o.b_cs != 1) o = with_contiguous_b(o, n, k, batch);
  blocked(m_blocks, n_blocks, k, alpha, o, beta, batch);
  if (n_blocks < n) tiled(m, n - n_blocks, k, alpha, o.from(0, n_blocks), beta, batch);
  if (m_blocks < m) tiled(m - m_blocks, n_blocks, k, alpha, o.from(m_blocks, 0), beta, batch);
}

}  // namespace sf::opencl_backend
