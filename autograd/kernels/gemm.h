// Single-precision matrix multiply, the contract of `Table::gemm` (kernels.h):
//
//   C[m,n] = alpha * op(A)[m,k] op(B)[k,n] + beta * C        (row-major)
//
// op(A) is A ([m,k], leading dimension lda) or, with trans_a, A^T where A is
// stored [k,m]; likewise op(B) is B ([k,n]) or, with trans_b, B^T with B stored
// [n,k]. `batch` independent products, operand i at base + i * stride; a stride
// may be 0 (e.g. a weight shared by the batch). beta == 0 never reads C, so C
// may hold NaN or uninitialised memory. k == 0 or alpha == 0 gives C = beta * C.
#pragma once
#include <cstdint>

namespace sf::kernels {

// Cache-blocked, packed, SIMD, multi-threaded (uses the kernels thread pool).
// The reference, scalar::gemm (kernels.h), is the plain triple loop.
namespace fast {
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          int64_t stride_a, const float* b, int64_t ldb, int64_t stride_b, float beta, float* c, int64_t ldc,
          int64_t stride_c, int64_t batch);
}  // namespace fast

}  // namespace sf::kernels
