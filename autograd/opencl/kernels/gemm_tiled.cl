// The tiled GEMM kernel, for GPU shapes (runtime.h: Shapes; launched by
// gemm_launch.cpp in the tiling gemm_tuning.cpp chose; CPU shapes run
// gemm_blocked.cl's kernel instead):
//
//   C[m,n] = alpha * op(A)[m,k] op(B)[k,n] + beta * C      (row-major, batched)
//
// Operands are addressed by strides, so transposes cost nothing:
// op(A)[i, p] = a[i * a_rs + p * a_cs], op(B)[p, j] = b[p * b_rs + j * b_cs].
// The batch element is the grid's third dimension. beta == 0 never reads C
// (it may hold NaN). Any m, n, k (k may be 0).
//
// The scheme is the usual one of fast GPU SGEMMs (C. Nugteren's "Tutorial:
// OpenCL SGEMM tuning for Kepler" and CLBlast's xgemm; S. Boehm's "How to
// optimize a CUDA matmul kernel for cuBLAS-like performance"), written anew:
//
// - A work-group of LX x LY items computes a TM x TN tile of C, stepping
//   through k TK at a time: op(A)'s TM x TK panel and op(B)'s TK x TN panel
//   are staged in local memory, k-major (panel[p][i]), each row padded by 4
//   floats so that the transposing stores conflict less.
// - Each item keeps a WM x WN block of C in registers (register tiling): per
//   k it reads WM values of the A panel and WN of the B panel and does WM WN
//   FMAs. Its rows and columns come in runs of 4 (float4 reads of the panels;
//   float4 stores of C), the runs of neighbouring items adjacent: item (lx, ly)
//   has columns col0 + 4 lx + 4 LX jj + {0..3} and rows row0 + 4 ly + 4 LY ii
//   + {0..3}, so a wavefront's panel reads are contiguous (no bank conflicts).
// - Panels move in float4s: an item loads its share of the next panels into
//   registers (global memory) while it multiplies the current ones, then
//   stores them into the other of two local buffers (double buffering: one
//   barrier per k step). A panel inside the matrix whose operand is contiguous
//   along one of its dimensions (and 16-byte aligned) is read as float4s along
//   it; edge panels and other strides are read element by element, with bounds
//   checks and zeros outside the matrix.
//
// Built with the tiling (gemm.h: Tiling) as -D options LX, LY, WM, WN and TK.

#define TM (LY * WM)
#define TN (LX * WN)
#define ITEMS (LX * LY)
#define A_STRIDE (TM + 4)  // floats between two k's of the A panel
#define B_STRIDE (TN + 4)
// float4s per item per panel.
#define A_VECS (TM * TK / (4 * ITEMS))
#define B_VECS (TN * TK / (4 * ITEMS))

#if WM % 4 || WN % 4 || TK % 4 || A_VECS * 4 * ITEMS != TM * TK || B_VECS * 4 * ITEMS != TN * TK || !A_VECS || !B_VECS
#error "the tiling does not split into float4s evenly over the items"
#endif

// An operand as a panel loader sees it: element (w, p) at mat[w * ws + p * ks],
// w along the panel's width (i of op(A), j of op(B)) and p along k.
typedef struct {
  __global const float* mat;
  long ws, ks, w_total;
  // Vectors run along k (ks == 1: the panel's stores transpose them), else
  // along w.
  int along_k;
  // float4 reads are possible: contiguous along the vectors' direction and
  // 16-byte aligned at every vector's start.
  int vectors;
} Operand;

Operand operand(__global const float* mat, long ws, long ks, long w_total) {
  Operand o = {mat, ws, ks, w_total, ks == 1, false};
  long other = o.along_k ? ws : ks;
  o.vectors = (o.along_k ? ks : ws) == 1 && other % 4 == 0 && ((ulong)mat & 15) == 0;
  return o;
}

// The vector `slot` of a W x TK panel: its first element (w, p) within the panel.
int2 slot_start(bool along_k, int slot, int width) {
  return along_k ? (int2)(slot / (TK / 4), slot % (TK / 4) * 4) : (int2)(slot % (width / 4) * 4, slot / (width / 4));
}

// This item's VECS float4s of the W x TK panel at (w0, k0) into r.
void load_panel(__private float4* r, int vecs, int width, Operand o, long w0, long k0, long k) {
  int item = get_local_id(1) * LX + get_local_id(0);
  bool inside = w0 + width <= o.w_total && k0 + TK <= k;
  for (int v = 0; v < vecs; ++v) {
    int2 s = slot_start(o.along_k, item + v * ITEMS, width);
    long w = w0 + s.x, p = k0 + s.y;
    if (inside && o.vectors) {
      r[v] = *(__global const float4*)(o.mat + w * o.ws + p * o.ks);
    } else {
      float vals[4];
      for (int c = 0; c < 4; ++c) {
        long wc = o.along_k ? w : w + c, pc = o.along_k ? p + c : p;
        vals[c] = wc < o.w_total && pc < k ? o.mat[wc * o.ws + pc * o.ks] : 0.0f;
      }
      r[v] = (float4)(vals[0], vals[1], vals[2], vals[3]);
    }
  }
}

// The float4s of load_panel into the local panel (panel[p * stride + w]).
void store_panel(__local float* panel, int stride, __private const float4* r, int vecs, int width, bool along_k) {
  int item = get_local_id(1) * LX + get_local_id(0);
  for (int v = 0; v < vecs; ++v) {
    int2 s = slot_start(along_k, item + v * ITEMS, width);
    __local float* at = panel + s.y * stride + s.x;
    if (along_k) {
      at[0] = r[v].x;
      at[stride] = r[v].y;
      at[2 * stride] = r[v].z;
      at[3 * stride] = r[v].w;
    } else {
      vstore4(r[v], 0, at);
    }
  }
}

__kernel __attribute__((reqd_work_group_size(LX, LY, 1)))
void gemm(long m, long n, long k, float alpha,
          __global const float* a, long a_off, long a_rs, long a_cs, long stride_a,
          __global const float* b, long b_off, long b_rs, long b_cs, long stride_b,
          float beta, __global float* c, long c_off, long ldc, long stride_c) {
  __local float a_panels[2][TK * A_STRIDE];  // a_panels[x][p * A_STRIDE + i] = op(A)[row0 + i, k0 + p]
  __local float b_panels[2][TK * B_STRIDE];  // b_panels[x][p * B_STRIDE + j] = op(B)[k0 + p, col0 + j]
  int lx = get_local_id(0), ly = get_local_id(1);
  long row0 = get_group_id(1) * TM, col0 = get_group_id(0) * TN, e = get_global_id(2);
  Operand A = operand(a + a_off + e * stride_a, a_rs, a_cs, m);
  Operand B = operand(b + b_off + e * stride_b, b_cs, b_rs, n);  // op(B)^T: (j, p)
  c += c_off + e * stride_c;

  float acc[WM][WN];
  for (int i = 0; i < WM; ++i)
    for (int j = 0; j < WN; ++j) acc[i][j] = 0.0f;

  float4 ra[A_VECS], rb[B_VECS];
  if (k > 0) {
    load_panel(ra, A_VECS, TM, A, row0, 0, k);
    load_panel(rb, B_VECS, TN, B, col0, 0, k);
    store_panel(a_panels[0], A_STRIDE, ra, A_VECS, TM, A.along_k);
    store_panel(b_panels[0], B_STRIDE, rb, B_VECS, TN, B.along_k);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  for (long k0 = 0, x = 0; k0 < k; k0 += TK, x ^= 1) {
    bool more = k0 + TK < k;
    if (more) {  // the next panels, into registers while this step multiplies
      load_panel(ra, A_VECS, TM, A, row0, k0 + TK, k);
      load_panel(rb, B_VECS, TN, B, col0, k0 + TK, k);
    }
    __local const float* ap = a_panels[x] + 4 * ly;
    __local const float* bp = b_panels[x] + 4 * lx;
#pragma unroll
    for (int p = 0; p < TK; ++p) {
      float av[WM], bv[WN];
#pragma unroll
      for (int ii = 0; ii < WM / 4; ++ii) {
        float4 v = vload4(0, ap + p * A_STRIDE + 4 * LY * ii);
        av[4 * ii] = v.x, av[4 * ii + 1] = v.y, av[4 * ii + 2] = v.z, av[4 * ii + 3] = v.w;
      }
#pragma unroll
      for (int jj = 0; jj < WN / 4; ++jj) {
        float4 v = vload4(0, bp + p * B_STRIDE + 4 * LX * jj);
        bv[4 * jj] = v.x, bv[4 * jj + 1] = v.y, bv[4 * jj + 2] = v.z, bv[4 * jj + 3] = v.w;
      }
#pragma unroll
      for (int i = 0; i < WM; ++i)
#pragma unroll
        for (int j = 0; j < WN; ++j) acc[i][j] = fma(av[i], bv[j], acc[i][j]);
    }
    // The other buffers were last read in the previous step, before its barrier.
    if (more) {
      store_panel(a_panels[x ^ 1], A_STRIDE, ra, A_VECS, TM, A.along_k);
      store_panel(b_panels[x ^ 1], B_STRIDE, rb, B_VECS, TN, B.along_k);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }

  // acc[i][j] is C[row0 + 4 (ly + LY (i / 4)) + i % 4, col0 + 4 (lx + LX (j / 4)) + j % 4].
  // beta == 0 never reads C (it may hold NaN).
  for (int i = 0; i < WM; ++i) {
    long row = row0 + 4 * (ly + LY * (i / 4)) + i % 4;
    if (row >= m) continue;
    for (int jj = 0; jj < WN / 4; ++jj) {
      long col = col0 + 4 * (lx + LX * jj);
      __global float* out = c + row * ldc + col;
      float4 v = alpha * (float4)(acc[i][4 * jj], acc[i][4 * jj + 1], acc[i][4 * jj + 2], acc[i][4 * jj + 3]);
      if (col + 4 <= n) {
        if (beta != 0.0f) v += beta * vload4(0, out);
        vstore4(v, 0, out);
      } else {
        float vals[4] = {v.x, v.y, v.z, v.w};
        for (int d = 0; d < 4 && col + d < n; ++d) out[d] = beta == 0.0f ? vals[d] : vals[d] + beta * out[d];
      }
    }
  }
}

// The second pass of a product whose k was split (gemm_launch.cpp: sliced_k):
// C = alpha * (parts[0] + parts[1] + ... in slice order) + beta * C, where
// parts[s] is slice s's [m, n] product, row-major. One item per element of C;
// beta == 0 never reads C.
__kernel void gemm_split_sum(long m, long n, int slices, float alpha, __global const float* parts, long parts_off,
                             float beta, __global float* c, long c_off, long ldc) {
  long j = get_global_id(0), i = get_global_id(1);
  if (j >= n) return;
  parts += parts_off + i * n + j;
  float sum = 0.0f;
  for (int s = 0; s < slices; ++s) sum += parts[s * m * n];
  __global float* out = c + c_off + i * ldc + j;
  *out = beta == 0.0f ? alpha * sum : alpha * sum + beta * *out;
}
