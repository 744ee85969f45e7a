// The OpenCL GEMM: the tilings of its two kernels (shared by their source, as
// -D options, and the launcher) and the table entry.
#pragma once
#include <cstdint>

#include "../kernels/kernels.h"

namespace sf::opencl_backend {

using kernels::Mem;

// The tiled kernel, for any shape (and all of C on GPUs): a work-group of
// LX x LY items computes a TM x TN tile of C, each item a WM x WN block of it,
// stepping through k TK at a time with both panels in local memory.
struct Tiled {
  static constexpr int LX = 16, LY = 16, WM = 4, WN = 4, TK = 16;
  static constexpr int TM = LY * WM, TN = LX * WN;
};

// The blocked kernel, for the whole RM x BN blocks of C on CPU devices: each
// item keeps an RM x BN block in NV vectors of VW floats (VW = 16: one AVX-512
// register) per row, in work-groups of BX x BY items.
struct Blocked {
  static constexpr int VW = 16, NV = 4, RM = 6, BX = 2, BY = 4;
  static constexpr int BN = VW * NV;
};

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, Mem<const float> a,
          int64_t lda, int64_t stride_a, Mem<const float> b, int64_t ldb, int64_t stride_b, float beta,
          Mem<float> c, int64_t ldc, int64_t stride_c, int64_t batch);

}  // namespace sf::opencl_backend
