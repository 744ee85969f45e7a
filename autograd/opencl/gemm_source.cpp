// The OpenCL C GEMM kernels (launched by gemm_launch.cpp):
//
//   C[m,n] = alpha * op(A)[m,k] op(B)[k,n] + beta * C      (row-major, batched)
//
// Operands are addressed by strides, so transposes cost nothing:
// op(A)[i, p] = a[i * a_rs + p * a_cs], op(B)[p, j] = b[p * b_rs + j * b_cs].
// The batch element is the grid's third dimension. beta == 0 never reads C
// (it may hold NaN).
//
// `gemm` (tiled) handles any shape. Each work-group computes a TM x TN tile of
// C, walking k in steps of TK with op(A)'s TM x TK panel and op(B)'s TK x TN
// panel staged in local memory; each item keeps a WM x WN block of C in
// registers: rows ly + LY i and columns lx + LX j, so neighbouring items read
// neighbouring columns of the B panel and the same A value (coalesced on a
// GPU). Panels are loaded with bounds checks, zeros outside the matrices.
//
// `gemm_blocked` is for CPU devices (PoCL), whose compiler vectorises explicit
// vector types well but not a work-group's items around a k loop: each item
// computes an RM x (NV VW) block of C as RM x NV float16 accumulators, and for
// each p multiplies NV vectors of op(B)'s row p by RM broadcast values of
// op(A)'s column p (the register blocking of BLAS micro-kernels). It needs
// op(B)'s rows contiguous (b_cs = 1) and whole blocks; the launcher transposes
// op(B) when needed and leaves the edges of C to `gemm`.
#include <string>

#include "gemm.h"
#include "sources.h"

namespace sf::opencl_backend {
namespace {

std::string define(const char* name, int value) { return " -D" + std::string(name) + "=" + std::to_string(value); }

std::string tiling_options() {
  return define("LX", Tiled::LX) + define("LY", Tiled::LY) + define("WM", Tiled::WM) + define("WN", Tiled::WN) +
         define("TK", Tiled::TK) + define("VW", Blocked::VW) + define("NV", Blocked::NV) +
         define("RM", Blocked::RM) + define("BX", Blocked::BX) + define("BY", Blocked::BY);
}

}  // namespace

const Source gemm_source{R"CLC(

#define TM (LY * WM)
#define TN (LX * WN)

// Copies the rows x cols panel of a matrix at (row0, col0), element (i, p) at
// m[i * rs + p * cs], into panel[p][i] (so panel is cols x rows, "k-major"),
// zero outside the matrix's [rows_total, cols_total]. Items walk the panel in
// the matrix's memory order (along p when cs == 1), so reads are contiguous.
void load_panel(__local float* panel, int rows, int cols, __global const float* mat, long rs, long cs,
                long row0, long col0, long rows_total, long cols_total) {
  int item = get_local_id(1) * LX + get_local_id(0);
  for (int t = item; t < rows * cols; t += LX * LY) {
    int i = cs == 1 ? t / cols : t % rows;
    int p = cs == 1 ? t % cols : t / rows;
    long row = row0 + i, col = col0 + p;
    panel[p * rows + i] = row < rows_total && col < cols_total ? mat[row * rs + col * cs] : 0.0f;
  }
}

__kernel __attribute__((reqd_work_group_size(LX, LY, 1)))
void gemm(long m, long n, long k, float alpha,
          __global const float* a, long a_off, long a_rs, long a_cs, long stride_a,
          __global const float* b, long b_off, long b_rs, long b_cs, long stride_b,
          float beta, __global float* c, long c_off, long ldc, long stride_c) {
  __local float a_panel[TK * TM];  // a_panel[p * TM + i] = op(A)[row0 + i, k0 + p]
  __local float b_panel[TK * TN];  // b_panel[p * TN + j] = op(B)[k0 + p, col0 + j]
  int lx = get_local_id(0), ly = get_local_id(1);
  long row0 = get_group_id(1) * TM, col0 = get_group_id(0) * TN, e = get_global_id(2);
  a += a_off + e * stride_a;
  b += b_off + e * stride_b;
  c += c_off + e * stride_c;

  float acc[WM][WN];
  for (int i = 0; i < WM; ++i)
    for (int j = 0; j < WN; ++j) acc[i][j] = 0.0f;

  for (long k0 = 0; k0 < k; k0 += TK) {
    load_panel(a_panel, TM, TK, a, a_rs, a_cs, row0, k0, m, k);
    // op(B) is [k, n]: its panel is TK x TN, stored transposed by load_panel's
    // convention, so load op(B)^T (element (j, p) at b[p * b_rs + j * b_cs]).
    load_panel(b_panel, TN, TK, b, b_cs, b_rs, col0, k0, n, k);
    barrier(CLK_LOCAL_MEM_FENCE);
#pragma unroll
    for (int p = 0; p < TK; ++p) {
      float av[WM], bv[WN];
      for (int i = 0; i < WM; ++i) av[i] = a_panel[p * TM + ly + LY * i];
      for (int j = 0; j < WN; ++j) bv[j] = b_panel[p * TN + lx + LX * j];
      for (int i = 0; i < WM; ++i)
        for (int j = 0; j < WN; ++j) acc[i][j] = fma(av[i], bv[j], acc[i][j]);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }

  // beta == 0 never reads C (it may hold NaN).
  for (int i = 0; i < WM; ++i)
    for (int j = 0; j < WN; ++j) {
      long row = row0 + ly + LY * i, col = col0 + lx + LX * j;
      if (row < m && col < n) {
        __global float* out = c + row * ldc + col;
        *out = beta == 0.0f ? alpha * acc[i][j] : alpha * acc[i][j] + beta * *out;
      }
    }
}

// floatV: a vector of VW floats, with its load and store.
#define CONCAT_(a, b) a##b
#define CONCAT(a, b) CONCAT_(a, b)
#define floatV CONCAT(float, VW)
#define vloadV CONCAT(vload, VW)
#define vstoreV CONCAT(vstore, VW)

// One item per RM x (NV VW) block of C; m and n are multiples of the block.
__kernel __attribute__((reqd_work_group_size(BX, BY, 1)))
void gemm_blocked(long m, long n, long k, float alpha,
                  __global const float* a, long a_off, long a_rs, long a_cs, long stride_a,
                  __global const float* b, long b_off, long b_rs, long stride_b,
                  float beta, __global float* c, long c_off, long ldc, long stride_c) {
  long col0 = get_global_id(0) * (NV * VW), row0 = get_global_id(1) * RM, e = get_global_id(2);
  if (row0 >= m || col0 >= n) return;
  a += a_off + e * stride_a + row0 * a_rs;
  b += b_off + e * stride_b + col0;
  c += c_off + e * stride_c + row0 * ldc + col0;

  floatV acc[RM][NV];
  for (int i = 0; i < RM; ++i)
    for (int j = 0; j < NV; ++j) acc[i][j] = (floatV)(0.0f);

  for (long p = 0; p < k; ++p) {
    floatV bv[NV];
    for (int j = 0; j < NV; ++j) bv[j] = vloadV(j, b + p * b_rs);
    for (int i = 0; i < RM; ++i) {
      floatV av = (floatV)(a[i * a_rs + p * a_cs]);
      for (int j = 0; j < NV; ++j) acc[i][j] = fma(av, bv[j], acc[i][j]);
    }
  }

  for (int i = 0; i < RM; ++i)
    for (int j = 0; j < NV; ++j) {
      __global float* out = c + i * ldc + j * VW;
      vstoreV(beta == 0.0f ? alpha * acc[i][j] : alpha * acc[i][j] + beta * vloadV(0, out), 0, out);
    }
}

)CLC",
                                tiling_options()};

}  // namespace sf::opencl_backend
