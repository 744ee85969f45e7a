// The tiled GEMM kernel, for GPU shapes (runtime.h: Shapes; launched by
// gemm_launch.cpp; CPU shapes run gemm_blocked.cl's kernel instead):
//
//   C[m,n] = alpha * op(A)[m,k] op(B)[k,n] + beta * C      (row-major, batched)
//
// Operands are addressed by strides, so transposes cost nothing:
// op(A)[i, p] = a[i * a_rs + p * a_cs], op(B)[p, j] = b[p * b_rs + j * b_cs].
// The batch element is the grid's third dimension. beta == 0 never reads C
// (it may hold NaN).
//
// `gemm` handles any shape. Each work-group computes a TM x TN tile of C,
// walking k in steps of TK with op(A)'s TM x TK panel and op(B)'s TK x TN
// panel staged in local memory; each item keeps a WM x WN block of C in
// registers: rows ly + LY i and columns lx + LX j, so neighbouring items read
// neighbouring columns of the B panel and the same A value (coalesced on a
// GPU). Panels are loaded with bounds checks, zeros outside the matrices.
//
// Built with the tiling (gemm.h: Tiled) as -D options LX, LY, WM, WN and TK.

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
