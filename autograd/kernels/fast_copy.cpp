// The fast kernels that move data: rows copied and gathered, gradient rows
// scattered, and float32 <-> bfloat16 conversions. Tested against scalar.cpp
// in tests/test_kernels.cpp.
#include <algorithm>
#include <cstring>

#include "fast.h"

namespace sf::kernels::fast {

// --- data movement -------------------------------------------------------------------

void copy_rows(const void* src, int64_t src_stride, void* dst, int64_t dst_stride, int64_t rows,
               int64_t row_bytes) {
  parallel_for(0, rows, std::max<int64_t>(1, 4 * kGrainElements / std::max<int64_t>(row_bytes, 1)),
               [&](int64_t b, int64_t e) {
    scalar_table().copy_rows(static_cast<const char*>(src) + b * src_stride, src_stride,
                             static_cast<char*>(dst) + b * dst_stride, dst_stride, e - b, row_bytes);
  });
}

// Copies whole rows where x walks them contiguously (attention's head split and
// merge keep the last dim); others use the reference.
void copy_strided(const float* x, float* y, const Rows& rows) {
  bool done = rows.col_strides[0] == 1 &&
              for_each_row(rows, [&](int64_t ox, int64_t, int64_t n, int64_t, int64_t, int64_t o) {
                std::memcpy(y + o, x + ox, n * sizeof(float));
              });
  if (!done) scalar_table().copy_strided(x, y, rows);
}

void gather_rows(const float* table, const int32_t* ids, int64_t n, int64_t dim, float* out) {
  for_rows(n, dim, [&](int64_t i) { std::memcpy(out + i * dim, table + ids[i] * dim, dim * sizeof(float)); });
}

// Serial over ids (two ids may name the same row), vectorised over the row.
void scatter_add_rows(const float* grad_out, const int32_t* ids, int64_t n, int64_t dim,
                      float* grad_table) {
  for (int64_t i = 0; i < n; ++i) add_row(grad_out + i * dim, grad_table + ids[i] * dim, dim);
}

// --- bfloat16 conversions ------------------------------------------------------------
// bf16.h's rounding, 16 lanes at a time in integer arithmetic (the conversion
// instruction of AVX512-BF16 would read subnormals as zero), and its exact
// widening: a shift of each 16-bit pattern into the top of a float.

void float_to_bf16(const float* x, bf16* y, int64_t n) {
  parallel_for(0, n, kGrainElements, [&](int64_t i, int64_t end) {
#if defined(__AVX512F__)
    const __m512i half = _mm512_set1_epi32(0x7FFF), one = _mm512_set1_epi32(1), quiet = _mm512_set1_epi32(0x40);
    for (; i + 16 <= end; i += 16) {
      const __m512 v = _mm512_loadu_ps(x + i);
      const __m512i u = _mm512_castps_si512(v), top = _mm512_srli_epi32(u, 16);
      __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(half, _mm512_and_si512(top, one))), 16);
      rounded = _mm512_mask_or_epi32(rounded, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), top, quiet);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i), _mm512_cvtepi32_epi16(rounded));
    }
#endif
    for (; i < end; ++i) y[i] = to_bf16(x[i]);
  });
}

void bf16_to_float(const bf16* x, float* y, int64_t n) {
  parallel_for(0, n, kGrainElements, [&](int64_t i, int64_t end) {
#if defined(__AVX512F__)
    for (; i + 16 <= end; i += 16) {
      const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i));
      _mm512_storeu_ps(y + i, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16)));
    }
#endif
    for (; i < end; ++i) y[i] = to_float(x[i]);
  });
}

}  // namespace sf::kernels::fast
