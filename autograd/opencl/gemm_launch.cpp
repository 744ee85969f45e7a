// Launching the GEMM kernels. With CPU shapes the blocked kernel
// (kernels/gemm_blocked.cl) computes all of C, in the blocking that suits n,
// after op(B) is packed when its rows are not contiguous whole blocks; with GPU
// shapes the tiled kernel (kernels/gemm_tiled.cl) does, in the tiling the
// tuner chose for the device (gemm_tuning.h), k cut into slices where C has
// too few tiles to keep the device busy (k_slices).
#include "gemm.h"

#include "gemm_tuning.h"
#include "launch.h"
#include "sources.h"

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
};

size_t blocks(int64_t n, int64_t block) { return static_cast<size_t>((n + block - 1) / block); }

void whole_k(const Tiling& t, const Source& source, int64_t m, int64_t n, int64_t k, float alpha, const Operands& o,
             float beta, int64_t batch) {
  Grid grid{3,
            {blocks(n, t.tn()) * t.lx, blocks(m, t.tm()) * t.ly, static_cast<size_t>(batch)},
            {static_cast<size_t>(t.lx), static_cast<size_t>(t.ly), 1}};
  launch(Runtime::get().kernel(source, "gemm"), grid, m, n, k, alpha, o.a, o.a_rs, o.a_cs, o.stride_a, o.b, o.b_rs,
         o.b_cs, o.stride_b, beta, o.c, o.ldc, o.stride_c);
}

cl_uint compute_units() {
  static const cl_uint units = device_value<cl_uint>(Runtime::get().device(), CL_DEVICE_MAX_COMPUTE_UNITS);
  return units;
}

// A product of one matrix by the tiled kernel, k cut into `slices`: slice s
// (op(A)'s columns and op(B)'s rows s k/S to (s + 1) k/S) runs as batch
// element s of the same kernel, its partial product written to the
// runtime's scratch buffer; gemm_split_sum then adds the partial products in
// slice order and applies alpha and beta. A fixed order: the bits of a
// product do not change from run to run.
void sliced_k(const Tiling& t, const Source& source, int64_t m, int64_t n, int64_t k, float alpha, const Operands& o,
              float beta, int64_t slices) {
  const int64_t slice = k / slices;
  Mem<float> parts(Runtime::get().scratch(size_t(slices * m * n) * sizeof(float)), 0);
  Operands s = o;
  s.stride_a = slice * o.a_cs;
  s.stride_b = slice * o.b_rs;
  s.c = parts;
  s.ldc = n;
  s.stride_c = m * n;
  whole_k(t, source, m, n, slice, 1.0f, s, 0.0f, slices);
  Grid grid{2, {round_up(size_t(n), 64), size_t(m), 1}, {64, 1, 1}};
  launch(Runtime::get().kernel(source, "gemm_split_sum"), grid, m, n, int32(slices), alpha, Mem<const float>(parts),
         beta, o.c, o.ldc);
}

void tiled(const Tiling& t, const Source& source, int64_t m, int64_t n, int64_t k, float alpha, const Operands& o,
           float beta, int64_t batch) {
  const int64_t tiles = int64_t(blocks(m, t.tm()) * blocks(n, t.tn()));
  if (int64_t slices = k_slices(tiles, k, batch, compute_units()); slices > 1)
    sliced_k(t, source, m, n, k, alpha, o, beta, slices);
  else
    whole_k(t, source, m, n, k, alpha, o, beta, batch);
}

// The blocking for C's width n: the wide one, unless C is at most four wide
// blocks wide and not a multiple of one, where medium or narrow blocks waste
// less on padding.
BlockingIndex blocking_for(int64_t n) {
  const int64_t wide = kBlockings[kWide].bn();
  if (n % wide == 0 || n > 4 * wide) return kWide;
  return n % kBlockings[kMedium].bn() == 0 ? kMedium : kNarrow;
}

// op(B) copied into the runtime's scratch buffer, row-major [k, ldo] per batch
// element with zeros from column n on (ldo a multiple of Blocked::VW).
Operands with_packed_b(const Operands& o, int64_t n, int64_t k, int64_t ldo, int64_t batch, const Source& source) {
  int64_t copies = o.stride_b == 0 ? 1 : batch;
  Mem<float> packed(Runtime::get().scratch(copies * k * ldo * sizeof(float)), 0);
  Grid grid{2, {static_cast<size_t>(ldo / Blocked::VW), static_cast<size_t>(copies), 1}, {1, 1, 1}};
  launch(Runtime::get().kernel(source, "gemm_pack"), grid, n, k, o.b, o.b_rs, o.b_cs, o.stride_b, packed, ldo,
         k * ldo);
  Operands p = o;
  p.b = packed;
  p.b_rs = ldo;
  p.b_cs = 1;
  p.stride_b = o.stride_b == 0 ? 0 : k * ldo;
  return p;
}

// One work-item per block of C; op(B) packed unless its rows are already
// contiguous and hold whole blocks.
void blocked(int64_t m, int64_t n, int64_t k, float alpha, Operands o, float beta, int64_t batch) {
  BlockingIndex index = blocking_for(n);
  const Blocked& blocking = kBlockings[index];
  const Source& source = blocked_source(index);
  int64_t bn = blocking.bn();
  if (k > 0 && (o.b_cs != 1 || n % bn != 0)) o = with_packed_b(o, n, k, blocks(n, bn) * bn, batch, source);
  Grid grid{3, {blocks(n, bn), blocks(m, blocking.rm), static_cast<size_t>(batch)}, {1, 1, 1}};
  launch(Runtime::get().kernel(source, "gemm_blocked"), grid, m, n, k, alpha, o.a, o.a_rs, o.a_cs, o.stride_a, o.b,
         o.b_rs, o.stride_b, beta, o.c, o.ldc, o.stride_c);
}

Operands operands(bool trans_a, bool trans_b, Mem<const float> a, int64_t lda, int64_t stride_a,
                  Mem<const float> b, int64_t ldb, int64_t stride_b, Mem<float> c, int64_t ldc, int64_t stride_c) {
  return {a,        trans_a ? 1 : lda, trans_a ? lda : 1, stride_a, b, trans_b ? 1 : ldb, trans_b ? ldb : 1,
          stride_b, c,                 ldc,               stride_c};
}

}  // namespace

int64_t k_slices(int64_t tiles, int64_t k, int64_t batch, int64_t compute_units) {
  if (batch != 1 || tiles >= 2 * compute_units) return 1;
  const int64_t wanted = (8 * compute_units + tiles - 1) / tiles;
  int64_t slices = 1;
  while (2 * slices <= wanted && k % (2 * slices * 4) == 0 && k / (2 * slices) >= kMinSliceK) slices *= 2;
  return slices;
}

std::string tiling_name(const Tiling& t) {
  return std::to_string(t.tm()) + "x" + std::to_string(t.tn()) + "x" + std::to_string(t.tk) + "-" +
         std::to_string(t.wm) + "x" + std::to_string(t.wn);
}

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, Mem<const float> a,
          int64_t lda, int64_t stride_a, Mem<const float> b, int64_t ldb, int64_t stride_b, float beta,
          Mem<float> c, int64_t ldc, int64_t stride_c, int64_t batch) {
  if (m <= 0 || n <= 0 || batch <= 0) return;
  Operands o = operands(trans_a, trans_b, a, lda, stride_a, b, ldb, stride_b, c, ldc, stride_c);
  if (Runtime::get().shapes().tiled_gemm) {
    size_t index = gemm_tiling();
    tiled(kTilings[index], tiled_source(index), m, n, k, alpha, o, beta, batch);
  } else {
    blocked(m, n, k, alpha, o, beta, batch);
  }
}

void tiled_gemm(size_t tiling, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                Mem<const float> a, int64_t lda, int64_t stride_a, Mem<const float> b, int64_t ldb,
                int64_t stride_b, float beta, Mem<float> c, int64_t ldc, int64_t stride_c, int64_t batch) {
  if (m <= 0 || n <= 0 || batch <= 0) return;
  tiled(kTilings[tiling], tiled_source(tiling), m, n, k, alpha,
        operands(trans_a, trans_b, a, lda, stride_a, b, ldb, stride_b, c, ldc, stride_c), beta, batch);
}

}  // namespace sf::opencl_backend
