// The packing into pairs (bf16_pairs.h) with AVX-512, shared by the x86
// levels (gemm_bf16.cpp: AVX512-BF16, gemm_amx.cpp: AMX), compiled on x86-64
// only.
#pragma once
#include "bf16_pairs.h"

#include <immintrin.h>

// GCC 12's AVX-512 intrinsics read an "undefined" register as a pass-through
// value and then warn about it (GCC bug 105593, fixed in GCC 13), as simd.h says.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

// Code compiled for AVX512-BF16 whatever the build's -march (GCC and Clang
// both take the attribute), and called only where CPUID says the CPU has it.
#define SF_AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

namespace sf::kernels::bf16_pairs {

inline SF_AVX512_BF16 __mmask16 first_lanes(int count) {
  if (count >= 16) return 0xFFFF;
  return count <= 0 ? 0 : static_cast<__mmask16>((1u << count) - 1);
}

// Packing into pairs, 16 words (or, for A's 8-row panels, 8) per vector.
// words[q * width + c] = (x[2q, c], x[2q+1, c]) for the pairs q of kc rows and
// the columns c < width of op(X), with a zero bf16 standing in for row kc when
// kc is odd and for the columns from `cols` on.

// op(X) = X: two rows of bf16 become one row of 32-bit pairs, each bf16
// zero-extended and the odd row's shifted into the high half.
template <int width>
SF_AVX512_BF16 void pack_row_pairs(const Operand& x, int64_t kc, int cols, uint32_t* words) {
  for (int64_t q = 0; 2 * q < kc; ++q) {
    const bf16* even = x.at(2 * q, 0);
    const bf16* odd = 2 * q + 1 < kc ? x.at(2 * q + 1, 0) : nullptr;
    uint32_t* out = words + q * width;
    if constexpr (width % 16 == 0) {
      for (int c = 0; c < width; c += 16) {
        const __mmask16 mask = first_lanes(cols - c);
        __m512i pairs = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(mask, even + c));
        if (odd)
          pairs = _mm512_or_si512(pairs, _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(mask, odd + c)), 16));
        _mm512_storeu_si512(out + c, pairs);
      }
    } else {
      static_assert(width == 8);
      const __mmask8 mask = static_cast<__mmask8>(first_lanes(cols));
      __m256i pairs = _mm256_cvtepu16_epi32(_mm_maskz_loadu_epi16(mask, even));
      if (odd) pairs = _mm256_or_si256(pairs, _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_maskz_loadu_epi16(mask, odd)), 16));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), pairs);
    }
  }
}

// Transposes 16 rows of 16 32-bit words in registers (r[i] lane j becomes
// r[j] lane i): pairs of rows interleaved at 32 bits, then at 64, then 128-bit
// lanes exchanged twice.
inline SF_AVX512_BF16 void transpose_16x16(__m512i r[16]) {
  __m512i t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  for (int i = 0; i < 4; ++i) {
    t[i] = _mm512_shuffle_i32x4(r[i], r[i + 4], 0x88);
    t[i + 4] = _mm512_shuffle_i32x4(r[i], r[i + 4], 0xDD);
    t[i + 8] = _mm512_shuffle_i32x4(r[i + 8], r[i + 12], 0x88);
    t[i + 12] = _mm512_shuffle_i32x4(r[i + 8], r[i + 12], 0xDD);
  }
  for (int i = 0; i < 8; ++i) {
    r[i] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0x88);
    r[i + 8] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0xDD);
  }
}

// op(X) = X^T: column c of op(X) is row c of X, so its pair q is the 32-bit
// word at 2q in that row. Sixteen columns' next 16 pairs are 16 row loads,
// transposed in registers (B panels; a gather across the rows measured twice
// as slow); an 8-row A panel gathers. An odd kc's last pair is read as one
// bf16: a word would read past the row.
template <int width>
SF_AVX512_BF16 void pack_column_pairs(const Operand& x, int64_t kc, int cols, uint32_t* words) {
  const int64_t whole_pairs = kc / 2, row_bytes = x.ld * static_cast<int64_t>(sizeof(bf16));
  constexpr int lanes = width % 16 == 0 ? 16 : 8;
  for (int c = 0; c < width; c += lanes) {
    const char* rows = reinterpret_cast<const char*>(x.data + c * x.ld);
    if constexpr (lanes == 16) {
      for (int64_t q0 = 0; q0 < whole_pairs; q0 += 16) {
        const __mmask16 pairs = first_lanes(static_cast<int>(std::min<int64_t>(16, whole_pairs - q0)));
        __m512i r[16];
        for (int i = 0; i < 16; ++i)
          r[i] = i < cols - c ? _mm512_maskz_loadu_epi32(pairs, rows + i * row_bytes + 4 * q0) : _mm512_setzero_si512();
        transpose_16x16(r);
        for (int64_t i = 0; i < 16 && q0 + i < whole_pairs; ++i) _mm512_storeu_si512(words + (q0 + i) * width + c, r[i]);
      }
    } else {
      const __m256i offsets = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                                 _mm256_set1_epi32(static_cast<int>(row_bytes)));
      const __mmask8 mask = static_cast<__mmask8>(first_lanes(cols - c));
      for (int64_t q = 0; q < whole_pairs; ++q)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(words + q * width + c),
                            _mm256_mmask_i32gather_epi32(_mm256_setzero_si256(), mask, offsets, rows + 4 * q, 1));
    }
  }
  if (kc % 2 != 0)
    for (int c = 0; c < width; ++c) words[whole_pairs * width + c] = c < cols ? x.get(kc - 1, c).bits : 0u;
}

// op(X)[0:kc, 0:cols] as pairs, `width` words per pair of k.
template <int width>
SF_AVX512_BF16 void pack_pairs(const Operand& x, int64_t kc, int cols, uint32_t* words) {
  if (x.trans)
    pack_column_pairs<width>(x, kc, cols, words);
  else
    pack_row_pairs<width>(x, kc, cols, words);
}

}  // namespace sf::kernels::bf16_pairs
