// The blocked GEMM kernels, for CPU shapes (runtime.h: Shapes; PoCL), launched
// by gemm_launch.cpp:
//
//   C[m,n] = alpha * op(A)[m,k] op(B)[k,n] + beta * C      (row-major, batched)
//
// with op(A)[i, p] = a[i * a_rs + p * a_cs] and op(B)[p, j] = b[p * b_rs + j],
// its rows contiguous (the launcher packs op(B) with `gemm_pack` when they are
// not). The batch element is the grid's third dimension. beta == 0 never reads
// C (it may hold NaN).
//
// PoCL compiles explicit vector types to SIMD registers well but vectorises a
// work-group's items around a k loop poorly, so `gemm_blocked` is a BLAS-style
// micro-kernel: each work-item (in work-groups of one) computes an RM x (NV VW)
// block of C as RM x NV floatV accumulators, and for each p multiplies NV
// vectors of op(B)'s row p by RM broadcast values of op(A)'s column p. The
// loops over the block are unrolled, so the accumulators live in registers.
//
// Edges keep the hot loop branch-free: op(B) is zero-padded to whole blocks of
// columns (by the launcher), a block's rows past m re-read op(A)'s last row,
// and only the stores check bounds.
//
// The program is built once per blocking (gemm.h: kBlockings), with VW, NV
// and RM as -D options.

// floatV: a vector of VW floats, with its load and store.
#define CONCAT_(a, b) a##b
#define CONCAT(a, b) CONCAT_(a, b)
#define floatV CONCAT(float, VW)
#define vloadV CONCAT(vload, VW)
#define vstoreV CONCAT(vstore, VW)
#define BN (NV * VW)

// out[j] = alpha acc[j] + beta out[j] for j < cols (all VW of them when cols >= VW).
void store(__global float* out, floatV acc, float alpha, float beta, long cols) {
  if (cols >= VW) {
    vstoreV(beta == 0.0f ? alpha * acc : alpha * acc + beta * vloadV(0, out), 0, out);
    return;
  }
  float v[VW];
  vstoreV(alpha * acc, 0, v);
  for (int j = 0; j < cols; ++j) out[j] = beta == 0.0f ? v[j] : v[j] + beta * out[j];
}

// One item per RM x BN block of C: block columns along the grid's first
// dimension, so consecutive items share op(A)'s rows (the operand read with a
// stride along k) while they are in cache. op(B)'s rows hold whole blocks.
__kernel __attribute__((reqd_work_group_size(1, 1, 1)))
void gemm_blocked(long m, long n, long k, float alpha,
                  __global const float* a, long a_off, long a_rs, long a_cs, long stride_a,
                  __global const float* b, long b_off, long b_rs, long stride_b,
                  float beta, __global float* c, long c_off, long ldc, long stride_c) {
  long col0 = get_global_id(0) * BN, row0 = get_global_id(1) * RM, e = get_global_id(2);
  long rows = min(m - row0, (long)RM);
  a += a_off + e * stride_a + row0 * a_rs;
  b += b_off + e * stride_b + col0;
  c += c_off + e * stride_c + row0 * ldc + col0;

  // Rows past m repeat the last one (computed, never stored).
  long a_row[RM];
#pragma unroll
  for (int i = 0; i < RM; ++i) a_row[i] = min((long)i, rows - 1) * a_rs;

  floatV acc[RM][NV];
#pragma unroll
  for (int i = 0; i < RM; ++i)
#pragma unroll
    for (int j = 0; j < NV; ++j) acc[i][j] = (floatV)(0.0f);

  for (long p = 0; p < k; ++p) {
    floatV bv[NV];
#pragma unroll
    for (int j = 0; j < NV; ++j) bv[j] = vloadV(j, b + p * b_rs);
#pragma unroll
    for (int i = 0; i < RM; ++i) {
      floatV av = (floatV)(a[a_row[i] + p * a_cs]);
#pragma unroll
      for (int j = 0; j < NV; ++j) acc[i][j] = fma(av, bv[j], acc[i][j]);
    }
  }

#pragma unroll
  for (int i = 0; i < RM; ++i)
    if (i < rows)
#pragma unroll
      for (int j = 0; j < NV; ++j) store(c + i * ldc + j * VW, acc[i][j], alpha, beta, n - col0 - j * VW);
}

// out[p, j] = op(B)[p, j] (element at b[p * b_rs + j * b_cs]) for j < n, and 0
// from n to the end of the item's VW columns: one item per VW columns of a
// batch element, walking down op(B)'s rows.
__kernel __attribute__((reqd_work_group_size(1, 1, 1)))
void gemm_pack(long n, long k, __global const float* b, long b_off, long b_rs, long b_cs, long stride_b,
               __global float* out, long out_off, long ldo, long stride_out) {
  long col0 = get_global_id(0) * VW, e = get_global_id(1);
  long cols = min(n - col0, (long)VW);
  b += b_off + e * stride_b + col0 * b_cs;
  out += out_off + e * stride_out + col0;
  for (long p = 0; p < k; ++p) {
    float v[VW];
    for (int j = 0; j < VW; ++j) v[j] = j < cols ? b[p * b_rs + j * b_cs] : 0.0f;
    vstoreV(vloadV(0, v), 0, out + p * ldo);
  }
}
