// The GEMM of gemm.h for products whose op(A) has at most kFewRows rows, as in
// decoding (one new token per sentence): B is read in place, once, with no
// packing (gemm_few_rows.cpp says why).
#pragma once
#include <cstdint>

namespace sf::kernels {

inline constexpr int64_t kFewRows = 4;

// Same contract as fast::gemm, for 1 <= m <= kFewRows and k >= 1; with
// `round`, fast::gemm_rounded_bf16's (each element of A and B rounded to bf16
// as it is read).
void gemm_few_rows(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                   const float* a, int64_t lda, int64_t stride_a, const float* b, int64_t ldb,
                   int64_t stride_b, float beta, float* c, int64_t ldc, int64_t stride_c,
                   int64_t batch, bool round);

}  // namespace sf::kernels
