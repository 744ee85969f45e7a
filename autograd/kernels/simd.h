// A thin float vector type for the fast kernels: 16 lanes with AVX-512, 8 with
// AVX2 + FMA, 4 with NEON (every AArch64 CPU has it), 1 (plain float)
// otherwise — chosen at compile time from the target flags (-march=native by
// default). Kernels are written once against
// `Vec` and loop `for (; i + Vec::width <= n; i += Vec::width)` with a scalar tail.
#pragma once
#include <cmath>
#include <cstdint>

#include "bf16.h"

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#elif defined(__aarch64__)
#include <arm_neon.h>
#endif

// GCC 12's AVX-512 intrinsics read an "undefined" register as a pass-through
// value and then warn about it (GCC bug 105593, fixed in GCC 13): a false alarm.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace sf::kernels::simd {

// max and min, on floats and on every Vec below, let a NaN in either operand
// through, as torch.maximum and torch.minimum do. (The x86 instructions return
// their second operand when either is NaN, so a NaN would vanish or not
// depending on operand order; std::max likewise.)
inline float max(float a, float b) { return a > b || a != a ? a : b; }
inline float min(float a, float b) { return a < b || a != a ? a : b; }

#if defined(__AVX512F__)
struct Vec {
  static constexpr int width = 16;
  __m512 v;
  static Vec load(const float* p) { return {_mm512_loadu_ps(p)}; }
  static Vec set1(float x) { return {_mm512_set1_ps(x)}; }
  void store(float* p) const { _mm512_storeu_ps(p, v); }
  friend Vec operator+(Vec a, Vec b) { return {_mm512_add_ps(a.v, b.v)}; }
  friend Vec operator-(Vec a, Vec b) { return {_mm512_sub_ps(a.v, b.v)}; }
  friend Vec operator*(Vec a, Vec b) { return {_mm512_mul_ps(a.v, b.v)}; }
  friend Vec operator/(Vec a, Vec b) { return {_mm512_div_ps(a.v, b.v)}; }
  friend Vec fma(Vec a, Vec b, Vec c) { return {_mm512_fmadd_ps(a.v, b.v, c.v)}; }
  // The instructions return b where either lane is NaN; a's NaN lanes are put back.
  friend Vec max(Vec a, Vec b) { return {_mm512_mask_mov_ps(_mm512_max_ps(a.v, b.v), nan_lanes(a), a.v)}; }
  friend Vec min(Vec a, Vec b) { return {_mm512_mask_mov_ps(_mm512_min_ps(a.v, b.v), nan_lanes(a), a.v)}; }
  static __mmask16 nan_lanes(Vec a) { return _mm512_cmp_ps_mask(a.v, a.v, _CMP_UNORD_Q); }
  friend Vec round(Vec a) { return {_mm512_roundscale_ps(a.v, _MM_FROUND_TO_NEAREST_INT)}; }
  friend Vec sqrt(Vec a) { return {_mm512_sqrt_ps(a.v)}; }
  // 2^n for integral-valued n in [-126, 127], built in the exponent bits.
  friend Vec exp2_int(Vec n) {
    __m512i bits = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n.v),
                                                      _mm512_set1_epi32(127)), 23);
    return {_mm512_castsi512_ps(bits)};
  }
  // Lanes where a > 0 keep b, others become 0.
  friend Vec select_positive(Vec a, Vec b) {
    return {_mm512_maskz_mov_ps(_mm512_cmp_ps_mask(a.v, _mm512_setzero_ps(), _CMP_GT_OQ), b.v)};
  }
  // bf16.h's to_bf16 widened back: the low 16 bits rounded off to nearest
  // even, a NaN kept as a quiet NaN.
  friend Vec round_to_bf16(Vec a) {
    const __m512i u = _mm512_castps_si512(a.v), high = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7FFF), odd));
    r = _mm512_mask_or_epi32(r, nan_lanes(a), u, _mm512_set1_epi32(0x00400000));
    return {_mm512_castsi512_ps(_mm512_and_si512(r, high))};
  }
  float sum() const { return _mm512_reduce_add_ps(v); }
};
#elif defined(__AVX2__) && defined(__FMA__)
struct Vec {
  static constexpr int width = 8;
  __m256 v;
  static Vec load(const float* p) { return {_mm256_loadu_ps(p)}; }
  static Vec set1(float x) { return {_mm256_set1_ps(x)}; }
  void store(float* p) const { _mm256_storeu_ps(p, v); }
  friend Vec operator+(Vec a, Vec b) { return {_mm256_add_ps(a.v, b.v)}; }
  friend Vec operator-(Vec a, Vec b) { return {_mm256_sub_ps(a.v, b.v)}; }
  friend Vec operator*(Vec a, Vec b) { return {_mm256_mul_ps(a.v, b.v)}; }
  friend Vec operator/(Vec a, Vec b) { return {_mm256_div_ps(a.v, b.v)}; }
  friend Vec fma(Vec a, Vec b, Vec c) { return {_mm256_fmadd_ps(a.v, b.v, c.v)}; }
  // As above: b where either lane is NaN, then a's NaN lanes put back.
  friend Vec max(Vec a, Vec b) { return {_mm256_blendv_ps(_mm256_max_ps(a.v, b.v), a.v, nan_lanes(a))}; }
  friend Vec min(Vec a, Vec b) { return {_mm256_blendv_ps(_mm256_min_ps(a.v, b.v), a.v, nan_lanes(a))}; }
  static __m256 nan_lanes(Vec a) { return _mm256_cmp_ps(a.v, a.v, _CMP_UNORD_Q); }
  friend Vec round(Vec a) { return {_mm256_round_ps(a.v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)}; }
  friend Vec sqrt(Vec a) { return {_mm256_sqrt_ps(a.v)}; }
  friend Vec exp2_int(Vec n) {
    __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n.v),
                                                      _mm256_set1_epi32(127)), 23);
    return {_mm256_castsi256_ps(bits)};
  }
  friend Vec select_positive(Vec a, Vec b) {
    return {_mm256_and_ps(_mm256_cmp_ps(a.v, _mm256_setzero_ps(), _CMP_GT_OQ), b.v)};
  }
  friend Vec round_to_bf16(Vec a) {
    const __m256i u = _mm256_castps_si256(a.v), high = _mm256_set1_epi32(static_cast<int>(0xFFFF0000u));
    const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    const __m256i r = _mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7FFF), odd));
    const __m256i quiet = _mm256_or_si256(u, _mm256_set1_epi32(0x00400000));
    const __m256i out = _mm256_blendv_epi8(r, quiet, _mm256_castps_si256(nan_lanes(a)));
    return {_mm256_castsi256_ps(_mm256_and_si256(out, high))};
  }
  float sum() const {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
};
#elif defined(__aarch64__)
struct Vec {
  static constexpr int width = 4;
  float32x4_t v;
  static Vec load(const float* p) { return {vld1q_f32(p)}; }
  static Vec set1(float x) { return {vdupq_n_f32(x)}; }
  void store(float* p) const { vst1q_f32(p, v); }
  friend Vec operator+(Vec a, Vec b) { return {vaddq_f32(a.v, b.v)}; }
  friend Vec operator-(Vec a, Vec b) { return {vsubq_f32(a.v, b.v)}; }
  friend Vec operator*(Vec a, Vec b) { return {vmulq_f32(a.v, b.v)}; }
  friend Vec operator/(Vec a, Vec b) { return {vdivq_f32(a.v, b.v)}; }
  friend Vec fma(Vec a, Vec b, Vec c) { return {vfmaq_f32(c.v, a.v, b.v)}; }
  // FMAX and FMIN let NaN through too, but give +0 for max(+0, -0) either
  // way round where the float versions above give b: a compare and a select
  // keep their definition exactly, "a where a > b (a < b) or a is NaN, else b".
  friend Vec max(Vec a, Vec b) { return select(vornq_u32(vcgtq_f32(a.v, b.v), not_nan(a)), a, b); }
  friend Vec min(Vec a, Vec b) { return select(vornq_u32(vcltq_f32(a.v, b.v), not_nan(a)), a, b); }
  static uint32x4_t not_nan(Vec a) { return vceqq_f32(a.v, a.v); }
  static Vec select(uint32x4_t mask, Vec a, Vec b) { return {vbslq_f32(mask, a.v, b.v)}; }
  friend Vec round(Vec a) { return {vrndnq_f32(a.v)}; }  // FRINTN: to nearest, ties to even
  friend Vec sqrt(Vec a) { return {vsqrtq_f32(a.v)}; }
  friend Vec exp2_int(Vec n) {
    const int32x4_t bits = vshlq_n_s32(vaddq_s32(vcvtnq_s32_f32(n.v), vdupq_n_s32(127)), 23);
    return {vreinterpretq_f32_s32(bits)};
  }
  friend Vec select_positive(Vec a, Vec b) {
    return {vreinterpretq_f32_u32(vandq_u32(vcgtzq_f32(a.v), vreinterpretq_u32_f32(b.v)))};
  }
  friend Vec round_to_bf16(Vec a) {
    const uint32x4_t u = vreinterpretq_u32_f32(a.v);
    const uint32x4_t odd = vandq_u32(vshrq_n_u32(u, 16), vdupq_n_u32(1));
    const uint32x4_t r = vaddq_u32(u, vaddq_u32(vdupq_n_u32(0x7FFF), odd));
    const uint32x4_t quiet = vorrq_u32(u, vdupq_n_u32(0x00400000));
    const uint32x4_t out = vbslq_u32(not_nan(a), r, quiet);
    return {vreinterpretq_f32_u32(vandq_u32(out, vdupq_n_u32(0xFFFF0000u)))};
  }
  float sum() const { return vaddvq_f32(v); }
};
#else
struct Vec {
  static constexpr int width = 1;
  float v;
  static Vec load(const float* p) { return {*p}; }
  static Vec set1(float x) { return {x}; }
  void store(float* p) const { *p = v; }
  friend Vec operator+(Vec a, Vec b) { return {a.v + b.v}; }
  friend Vec operator-(Vec a, Vec b) { return {a.v - b.v}; }
  friend Vec operator*(Vec a, Vec b) { return {a.v * b.v}; }
  friend Vec operator/(Vec a, Vec b) { return {a.v / b.v}; }
  friend Vec fma(Vec a, Vec b, Vec c) { return {a.v * b.v + c.v}; }
  friend Vec max(Vec a, Vec b) { return {simd::max(a.v, b.v)}; }
  friend Vec min(Vec a, Vec b) { return {simd::min(a.v, b.v)}; }
  friend Vec round(Vec a) { return {std::nearbyint(a.v)}; }
  friend Vec sqrt(Vec a) { return {std::sqrt(a.v)}; }
  friend Vec exp2_int(Vec n) { return {std::exp2(n.v)}; }  // exact; NaN stays NaN
  friend Vec select_positive(Vec a, Vec b) { return {a.v > 0.0f ? b.v : 0.0f}; }
  friend Vec round_to_bf16(Vec a) { return {kernels::round_to_bf16(a.v)}; }
  float sum() const { return v; }
};
#endif

// The largest lane; NaN if any lane is NaN. (Once per row: a plain loop.)
inline float reduce_max(Vec v) {
  float lanes[Vec::width];
  v.store(lanes);
  float best = lanes[0];
  for (int i = 1; i < Vec::width; ++i) best = max(best, lanes[i]);
  return best;
}

// e^x to about 2 ulp, with std::exp's edge values: NaN stays NaN, +inf and
// x above ~88.72 give +inf, -inf and x below ~-103.97 give 0, and results
// between are subnormal floats as they should be. x = n ln2 + r with
// |r| <= ln2/2, e^r by a degree-6 polynomial (Taylor coefficients), times 2^n.
// x is first clamped to [-120, 120] (NaN passes: see max and min), beyond
// which e^x is 0 or infinity in float anyway, so |n| <= 174; 2^n is applied as
// two factors 2^n1 2^n2 that are each a normal float, and only the last
// multiply rounds, to infinity, a subnormal or 0 as the exact value would.
inline Vec exp(Vec x) {
  x = min(max(x, Vec::set1(-120.0f)), Vec::set1(120.0f));
  Vec n = round(x * Vec::set1(1.44269504f));
  // ln2 split in two so n * ln2_hi is exact.
  Vec r = fma(n, Vec::set1(-0.693145752f), x);
  r = fma(n, Vec::set1(-1.42860677e-6f), r);
  Vec p = Vec::set1(1.0f / 720);
  p = fma(p, r, Vec::set1(1.0f / 120));
  p = fma(p, r, Vec::set1(1.0f / 24));
  p = fma(p, r, Vec::set1(1.0f / 6));
  p = fma(p, r, Vec::set1(0.5f));
  p = fma(p, r, Vec::set1(1.0f));
  p = fma(p, r, Vec::set1(1.0f));
  Vec n1 = round(n * Vec::set1(0.5f));
  return p * exp2_int(n1) * exp2_int(n - n1);
}

}  // namespace sf::kernels::simd
