// A thin float vector type for the fast kernels: 16 lanes with AVX-512, 8 with
// AVX2 + FMA, 1 (plain float) otherwise — chosen at compile time from the
// target flags (-march=native by default). Kernels are written once against
// `Vec` and loop `for (; i + Vec::width <= n; i += Vec::width)` with a scalar tail.
#pragma once
#include <cmath>
#include <cstdint>

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#endif

// GCC 12's AVX-512 intrinsics read an "undefined" register as a pass-through
// value and then warn about it (GCC bug 105593, fixed in GCC 13): a false alarm.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace sf::kernels::simd {

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
  friend Vec max(Vec a, Vec b) { return {_mm512_max_ps(a.v, b.v)}; }
  friend Vec min(Vec a, Vec b) { return {_mm512_min_ps(a.v, b.v)}; }
  friend Vec round(Vec a) { return {_mm512_roundscale_ps(a.v, _MM_FROUND_TO_NEAREST_INT)}; }
  friend Vec sqrt(Vec a) { return {_mm512_sqrt_ps(a.v)}; }
  // a * 2^floor(n), saturating to 0 or infinity outside float's range.
  friend Vec scalef(Vec a, Vec n) { return {_mm512_scalef_ps(a.v, n.v)}; }
  // 2^n for integral-valued n, built in the exponent bits.
  friend Vec exp2_int(Vec n) {
    __m512i bits = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n.v),
                                                      _mm512_set1_epi32(127)), 23);
    return {_mm512_castsi512_ps(bits)};
  }
  // Lanes where a > 0 keep b, others become 0.
  friend Vec select_positive(Vec a, Vec b) {
    return {_mm512_maskz_mov_ps(_mm512_cmp_ps_mask(a.v, _mm512_setzero_ps(), _CMP_GT_OQ), b.v)};
  }
  float sum() const { return _mm512_reduce_add_ps(v); }
  float max() const { return _mm512_reduce_max_ps(v); }
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
  friend Vec max(Vec a, Vec b) { return {_mm256_max_ps(a.v, b.v)}; }
  friend Vec min(Vec a, Vec b) { return {_mm256_min_ps(a.v, b.v)}; }
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
  float sum() const {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  float max() const {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
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
  friend Vec max(Vec a, Vec b) { return {a.v > b.v ? a.v : b.v}; }
  friend Vec min(Vec a, Vec b) { return {a.v < b.v ? a.v : b.v}; }
  friend Vec round(Vec a) { return {std::nearbyint(a.v)}; }
  friend Vec sqrt(Vec a) { return {std::sqrt(a.v)}; }
  friend Vec exp2_int(Vec n) { return {std::ldexp(1.0f, static_cast<int>(n.v))}; }
  friend Vec select_positive(Vec a, Vec b) { return {a.v > 0.0f ? b.v : 0.0f}; }
  float sum() const { return v; }
  float max() const { return v; }
};
#endif

// e^x to about 2 ulp: x = n ln2 + r with |r| <= ln2/2, e^r by a degree-6
// polynomial (Taylor coefficients), times 2^n.
inline Vec exp_reduced(Vec x, Vec& n) {
  n = round(x * Vec::set1(1.44269504f));
  // ln2 split in two so n * ln2_hi is exact.
  Vec r = fma(n, Vec::set1(-0.693145752f), x);
  r = fma(n, Vec::set1(-1.42860677e-6f), r);
  Vec p = Vec::set1(1.0f / 720);
  p = fma(p, r, Vec::set1(1.0f / 120));
  p = fma(p, r, Vec::set1(1.0f / 24));
  p = fma(p, r, Vec::set1(1.0f / 6));
  p = fma(p, r, Vec::set1(0.5f));
  p = fma(p, r, Vec::set1(1.0f));
  return fma(p, r, Vec::set1(1.0f));
}

#if defined(__AVX512F__)
// scalef applies 2^n over the whole range: e^x underflows to exactly 0 (so
// masked attention weights are exactly 0, as with std::exp) and overflows to
// infinity, with no clamping.
inline Vec exp(Vec x) {
  Vec n;
  Vec p = exp_reduced(x, n);
  return scalef(p, n);
}
#else
// 2^n is built in the exponent bits, valid for normal floats: inputs are
// clamped to [-87.3, 88.3], and below -87.3 the result is forced to exactly 0.
inline Vec exp(Vec x_in) {
  Vec x = min(max(x_in, Vec::set1(-87.3f)), Vec::set1(88.3f));
  Vec n;
  Vec p = exp_reduced(x, n);
  return select_positive(x_in + Vec::set1(87.3f), p * exp2_int(n));
}
#endif

}  // namespace sf::kernels::simd
