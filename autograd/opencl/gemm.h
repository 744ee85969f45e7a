// The OpenCL GEMM: the tilings of its kernels (shared by their programs, as -D
// options, and the launcher) and the table entry.
#pragma once
#include <cstdint>

#include "../kernels/kernels.h"

namespace sf::opencl_backend {

using kernels::Mem;

// The tiled kernel (kernels/gemm_tiled.cl), for GPU shapes: a work-group of LX x LY items
// computes a TM x TN tile of C, each item a WM x WN block of it, stepping
// through k TK at a time with both panels in local memory.
struct Tiled {
  static constexpr int LX = 16, LY = 16, WM = 4, WN = 4, TK = 16;
  static constexpr int TM = LY * WM, TN = LX * WN;
};

// The blocked kernel (kernels/gemm_blocked.cl), for CPU shapes: one work-item per
// RM x BN block of C, kept in RM x NV vectors of VW floats (VW = 16: one
// AVX-512 register). The accumulators, NV vectors of op(B) and one broadcast
// value of op(A) must fit the 32 vector registers: RM NV + NV + 1 <= 32.
struct Blocked {
  static constexpr int VW = 16;
  int rm, nv;
  constexpr int bn() const { return nv * VW; }
};

// The blockings the launcher chooses from, by n: wide for most products,
// medium and narrow for C's of at most a few vectors per row (attention's
// per-head products), where a wide block would mostly compute padding.
enum BlockingIndex { kWide, kMedium, kNarrow };
inline constexpr Blocked kBlockings[] = {{6, 4}, {8, 2}, {16, 1}};

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, Mem<const float> a,
          int64_t lda, int64_t stride_a, Mem<const float> b, int64_t ldb, int64_t stride_b, float beta,
          Mem<float> c, int64_t ldc, int64_t stride_c, int64_t batch);

}  // namespace sf::opencl_backend
