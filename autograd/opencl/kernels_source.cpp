// The OpenCL C kernels of every table entry but GEMM. Each one computes what
// the entry of the same name in kernels/scalar.cpp computes (the formulas are
// the comments in kernels/kernels.h). Sums down a column (sum_to, sum_axis,
// the layer norm parameter gradients) add in the CPU's order; sums along a row
// run as 16 partial sums, one per vector lane, so they match within rounding.
//
// Conventions: every array arrives as (pointer to the buffer's start, offset in
// elements) and is advanced by its offset first; sizes are long (ints where an
// index is decomposed, which is cheaper and enough: sizes fit in int32).
// Launches may pad the number of work items up to a multiple of the work-group
// size, so each kernel first checks that its item is in range.
//
// Why explicit float16 vectors, and three shapes of work (see launch.h): the
// CPU device these kernels are tuned on (PoCL) vectorises a kernel only across
// the work items of a group, and gives up on kernels with a switch, integer
// division per element, private arrays or loops of variable trip count: such
// kernels ran one scalar element at a time. So each kernel does its own
// vectorising, with float16 (one AVX-512 register) and vload16 / vstore16:
//   - elementwise kernels: each item handles 16 consecutive elements
//     (launch.h: vectors) or a few vectors along a row (launch.h: pieces), in
//     work-groups of 64 items;
//   - row-wise kernels (softmax, layer norm, cross-entropy...): one item per
//     row, looping over it 16 columns at a time, each item its own work-group
//     of one (launch.h: singles), which PoCL runs as a plain loop;
//   - column sums: one item per 16 columns, looping down the rows, also in
//     work-groups of one, so that the few items spread over the cores.
#include <string>

#include "launch.h"
#include "sources.h"

namespace sf::opencl_backend {

const Source kernels_source{R"CLC(

// ---- vectors of 16 -----------------------------------------------------------

// A kernel whose items are each a work-group of one (launch.h: singles).
#define ONE_ITEM_PER_GROUP __attribute__((reqd_work_group_size(1, 1, 1)))

// 0, 1, ..., 15: each lane's index within its vector.
int16 lane_indices(void) { return (int16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15); }

float hsum16(float16 v) {
  float8 a = v.lo + v.hi;
  float4 b = a.lo + a.hi;
  float2 c = b.lo + b.hi;
  return c.x + c.y;
}

float hmax16(float16 v) {
  float8 a = fmax(v.lo, v.hi);
  float4 b = fmax(a.lo, a.hi);
  float2 c = fmax(b.lo, b.hi);
  return fmax(c.x, c.y);
}

// Lanes k of a vector are elements c + k of a row of n elements, element j at
// p[j * stride] (stride 1: contiguous, 0: one value broadcast). load16 reads
// `pad` into the lanes past the row's end; store16 writes only those before it.
// The whole contiguous vector is one vload16 / vstore16; the row's last,
// partial vector and strided rows go one lane at a time.
#define VECTOR_ACCESS(T, T16, suffix)                                                      \
  T16 load16##suffix(__global const T* p, int stride, int c, int n, T pad) {               \
    if (c + 16 <= n) {                                                                     \
      if (stride == 1) return vload16(0, p + c);                                           \
      if (stride == 0) return (T16)(p[0]);                                                 \
    }                                                                                      \
    T lanes[16];                                                                           \
    for (int k = 0; k < 16; ++k) lanes[k] = c + k < n ? p[(c + k) * stride] : pad;        \
    return vload16(0, lanes);                                                              \
  }                                                                                        \
  void store16##suffix(T16 v, __global T* p, int stride, int c, int n) {                   \
    if (stride == 1 && c + 16 <= n) {                                                      \
      vstore16(v, 0, p + c);                                                               \
      return;                                                                              \
    }                                                                                      \
    T lanes[16];                                                                           \
    vstore16(v, 0, lanes);                                                                 \
    for (int k = 0; k < 16 && c + k < n; ++k) p[(c + k) * stride] = lanes[k];              \
  }
VECTOR_ACCESS(float, float16, )
VECTOR_ACCESS(int, int16, _int)

// ---- broadcasting ----------------------------------------------------------
// A broadcasting op gets its output shape (after the host has dropped size-1
// dims and merged contiguous ones) and each operand's strides, 0 along
// broadcast dims. The output is seen as rows of its innermost dim (cols
// elements); the outer dims (ndim <= 7 of them) come as int8 vectors of sizes
// and strides, the innermost strides as plain ints.

// The offsets of element i (row-major over shape) in two strided operands.
// One dim (operands of the same shape, or a scalar), two (a row or column
// broadcast) and three (the rows of attention's head split and merge) are
// most ops; they skip the general loop.
int2 broadcast_offsets(int i, int ndim, int8 shape, int8 strides_a, int8 strides_b) {
  if (ndim == 0) return (int2)(0, 0);
  if (ndim == 1) return i * (int2)(strides_a.s0, strides_b.s0);
  if (ndim == 2) {
    int row = i / shape.s1, col = i - row * shape.s1;
    return row * (int2)(strides_a.s0, strides_b.s0) + col * (int2)(strides_a.s1, strides_b.s1);
  }
  if (ndim == 3) {
    int rest = i / shape.s2, i2 = i - rest * shape.s2, i0 = rest / shape.s1, i1 = rest - i0 * shape.s1;
    return i0 * (int2)(strides_a.s0, strides_b.s0) + i1 * (int2)(strides_a.s1, strides_b.s1) +
           i2 * (int2)(strides_a.s2, strides_b.s2);
  }
  int s[8], sa[8], sb[8];
  vstore8(shape, 0, s);
  vstore8(strides_a, 0, sa);
  vstore8(strides_b, 0, sb);
  int2 offset = (int2)(0, 0);
  for (int d = ndim - 1; d >= 0; --d) {
    int index = i % s[d];
    i /= s[d];
    offset += index * (int2)(sa[d], sb[d]);
  }
  return offset;
}

// Row pieces: item g of a [rows, cols] launch (launch.h: pieces) covers
// `width` columns (a multiple of 16) of one row, the row's pieces side by
// side; the row's last piece may be shorter. Sets the item's row and its
// columns [first, end); false for the items that pad the launch. Kernels go
// PIECE columns at a time (launch.h: kPiece), enough to amortise the item's
// division and broadcast offsets, or 16 for column sums.
bool row_piece(int rows, int cols, int width, int* row, int* first, int* end) {
  int pieces = (cols + width - 1) / width, g = get_global_id(0);
  *row = g / pieces;
  *first = (g - *row * pieces) * width;
  *end = min(*first + width, cols);
  return *row < rows;
}

// Binary: 0 add, 1 sub, 2 mul, 3 div (kernels::Binary), over columns
// [first, end) of a row.
void binary_piece(int op, __global const float* a, int col_a, __global const float* b, int col_b,
                  __global float* out, int first, int end, int cols) {
  for (int c = first; c < end; c += 16) {
    float16 x = load16(a, col_a, c, cols, 0.0f), y = load16(b, col_b, c, cols, 0.0f), r;
    switch (op) {
      case 0: r = x + y; break;
      case 1: r = x - y; break;
      case 2: r = x * y; break;
      default: r = x / y; break;
    }
    store16(r, out, 1, c, cols);
  }
}

__kernel void binary(int op, __global const float* a, long a_off, __global const float* b, long b_off,
                     __global float* out, long out_off, int rows, int cols, int ndim, int8 shape, int8 sa,
                     int8 sb, int col_a, int col_b) {
  int row, first, end;
  if (!row_piece(rows, cols, PIECE, &row, &first, &end)) return;
  int2 o = broadcast_offsets(row, ndim, shape, sa, sb);
  a += a_off + o.x;
  b += b_off + o.y;
  out += out_off + (long)row * cols;
  // Contiguous rows, the common case, with the strides as constants.
  if (col_a == 1 && col_b == 1)
    binary_piece(op, a, 1, b, 1, out, first, end, cols);
  else
    binary_piece(op, a, col_a, b, col_b, out, first, end, cols);
}

// Predicates (kernels::Predicate): 0 ==, 1 !=, 2 <, 3 <=, 4 >, 5 >=, 6 and, 7 or;
// 1 or 0 as int32. And/or treat nonzero as true. (Vector comparisons give -1
// for true, hence the negation.)
#define PREDICATE_KERNEL(name, T, T16, suffix)                                                    \
  __kernel void name(int op, __global const T* a, long a_off, __global const T* b, long b_off,    \
                     __global int* out, long out_off, int rows, int cols, int ndim, int8 shape,   \
                     int8 sa, int8 sb, int col_a, int col_b) {                                    \
    int row, first, end;                                                                          \
    if (!row_piece(rows, cols, PIECE, &row, &first, &end)) return;                                \
    int2 o = broadcast_offsets(row, ndim, shape, sa, sb);                                         \
    a += a_off + o.x;                                                                             \
    b += b_off + o.y;                                                                             \
    out += out_off + (long)row * cols;                                                            \
    for (int c = first; c < end; c += 16) {                                                       \
      T16 x = load16##suffix(a, col_a, c, cols, 0), y = load16##suffix(b, col_b, c, cols, 0);     \
      int16 r;                                                                                    \
      switch (op) {                                                                               \
        case 0: r = x == y; break;                                                                \
        case 1: r = x != y; break;                                                                \
        case 2: r = x < y; break;                                                                 \
        case 3: r = x <= y; break;                                                                \
        case 4: r = x > y; break;                                                                 \
        case 5: r = x >= y; break;                                                                \
        case 6: r = x != 0 && y != 0; break;                                                      \
        default: r = x != 0 || y != 0; break;                                                     \
      }                                                                                           \
      store16_int(-r, out, 1, c, cols);                                                           \
    }                                                                                             \
  }
PREDICATE_KERNEL(predicate, float, float16, )
PREDICATE_KERNEL(predicate_int, int, int16, _int)

// out = where != 0 ? value : x.
__kernel void fill_where(__global const float* x, long x_off, __global const int* where, long where_off,
                         float value, __global float* out, long out_off, int rows, int cols, int ndim,
                         int8 shape, int8 sx, int8 sw, int col_x, int col_w) {
  int row, first, end;
  if (!row_piece(rows, cols, PIECE, &row, &first, &end)) return;
  int2 o = broadcast_offsets(row, ndim, shape, sx, sw);
  x += x_off + o.x;
  where += where_off + o.y;
  out += out_off + (long)row * cols;
  for (int c = first; c < end; c += 16) {
    float16 v = load16(x, col_x, c, cols, 0.0f);
    store16(select(v, (float16)(value), load16_int(where, col_w, c, cols, 0) != 0), out, 1, c, cols);
  }
}

// y = x read through strides (a permute: y's shape and, per y dim, the stride
// of the x dim it reads).
__kernel void strided_copy(__global const float* x, long x_off, __global float* y, long y_off, int rows,
                           int cols, int ndim, int8 shape, int8 strides, int col_stride) {
  int row, first, end;
  if (!row_piece(rows, cols, PIECE, &row, &first, &end)) return;
  x += x_off + broadcast_offsets(row, ndim, shape, strides, strides).x;
  y += y_off + (long)row * cols;
  for (int c = first; c < end; c += 16) store16(load16(x, col_stride, c, cols, 0.0f), y, 1, c, cols);
}

// out = x summed over the dims out is broadcast along, in the CPU's order:
// each output element adds its x elements (the "reduced" indices) in
// row-major order. The kept dims are rows of cols elements (cols strides
// col_x in x, col_out in out); one item per 16 of them (a column sum), so no
// two items write the same element.
__kernel ONE_ITEM_PER_GROUP
void sum_to(__global const float* x, long x_off, __global float* out, long out_off, int rows, int cols,
            int ndim, int8 shape, int8 kept_x, int8 kept_out, int col_x, int col_out, int reduced,
            int reduced_ndim, int8 reduced_shape, int8 reduced_x) {
  int row, c, end;
  if (!row_piece(rows, cols, 16, &row, &c, &end)) return;
  int2 o = broadcast_offsets(row, ndim, shape, kept_x, kept_out);
  x += x_off + o.x;
  out += out_off + o.y;
  float16 acc = (float16)(0.0f);
  for (int r = 0; r < reduced; ++r)
    acc += load16(x + broadcast_offsets(r, reduced_ndim, reduced_shape, reduced_x, reduced_x).x, col_x, c,
                  cols, 0.0f);
  store16(acc, out, col_out, c, cols);
}

// ---- elementwise -----------------------------------------------------------
// Each item handles elements [16 g, 16 g + 16) of n (launch.h: vectors).

// The first element of this item and how many of its 16 lanes are in range.
bool vector_item(long n, long* first, int* count) {
  *first = get_global_id(0) * 16L;
  *count = (int)min(n - *first, 16L);
  return *first < n;
}

// y = f(x), kernels::Unary in order: -x, exp, log, sqrt, relu, tanh, sigmoid,
// x + s, x * s, x^s, s - x, s / x.
__kernel void unary(int op, __global const float* x, long x_off, __global float* y, long y_off, long n,
                    float s) {
  long i;
  int count;
  if (!vector_item(n, &i, &count)) return;
  float16 v = load16(x + x_off + i, 1, 0, count, 1.0f), r;
  switch (op) {
    case 0: r = -v; break;
    case 1: r = exp(v); break;
    case 2: r = log(v); break;
    case 3: r = sqrt(v); break;
    case 4: r = select((float16)(0.0f), v, (v > 0.0f) | isnan(v)); break;  // NaN stays, as torch.relu
    case 5: r = tanh(v); break;
    case 6: r = 1.0f / (1.0f + exp(-v)); break;
    case 7: r = v + s; break;
    case 8: r = v * s; break;
    case 9: r = pow(v, s); break;
    case 10: r = s - v; break;
    default: r = s / v; break;
  }
  store16(r, y + y_off + i, 1, 0, count);
}

// y = relu(x + bias[column]) over [rows, cols], in row pieces.
__kernel void bias_relu(__global const float* x, long x_off, __global const float* bias, long bias_off,
                        int rows, int cols, __global float* y, long y_off) {
  int row, first, end;
  if (!row_piece(rows, cols, PIECE, &row, &first, &end)) return;
  x += x_off + (long)row * cols;
  y += y_off + (long)row * cols;
  bias += bias_off;
  for (int c = first; c < end; c += 16) {
    float16 v = load16(x, 1, c, cols, 0.0f) + load16(bias, 1, c, cols, 0.0f);
    store16(select((float16)(0.0f), v, (v > 0.0f) | isnan(v)), y, 1, c, cols);  // NaN stays
  }
}

// dx = y > 0 ? dy : 0.
__kernel void relu_backward(__global const float* y, long y_off, __global const float* dy, long dy_off,
                            __global float* dx, long dx_off, long n) {
  long i;
  int count;
  if (!vector_item(n, &i, &count)) return;
  float16 v = load16(y + y_off + i, 1, 0, count, 0.0f), g = load16(dy + dy_off + i, 1, 0, count, 0.0f);
  store16(select((float16)(0.0f), g, v > 0.0f), dx + dx_off + i, 1, 0, count);
}

// y = keep ? x * scale : x - x (0, or NaN where x is NaN or infinite, as the
// reference), keep = lowbias32(i * 0x9E3779B1 + seed) >= threshold:
// the same hash as kernels::dropout_keeps, so the CPU and OpenCL masks agree.
__kernel void dropout(__global const float* x, long x_off, __global float* y, long y_off, long n,
                      float scale, uint seed, uint threshold) {
  long i;
  int count;
  if (!vector_item(n, &i, &count)) return;
  uint16 h = ((uint)i + as_uint16(lane_indices())) * 0x9E3779B1u + seed;
  h ^= h >> 16;
  h *= 0x7feb352du;
  h ^= h >> 15;
  h *= 0x846ca68bu;
  h ^= h >> 16;
  float16 v = load16(x + x_off + i, 1, 0, count, 0.0f);
  store16(select(v - v, v * scale, h >= threshold), y + y_off + i, 1, 0, count);
}

// Partial sums of a . b: item g of `items` adds a[i] b[i] for i = g, g + items,
// ... (Kahan-compensated); sum_partials adds them up.
__kernel void dot_partials(__global const float* a, long a_off, __global const float* b, long b_off,
                           long n, __global float* partials, long partials_off) {
  long g = get_global_id(0), items = get_global_size(0);
  float sum = 0.0f, carry = 0.0f;
  for (long i = g; i < n; i += items) {
    float term = a[a_off + i] * b[b_off + i] - carry;
    float next = sum + term;
    carry = (next - sum) - term;
    sum = next;
  }
  partials[partials_off + g] = sum;
}

// out[0] = the sum of `count` partial sums, Kahan-compensated, by one item.
__kernel ONE_ITEM_PER_GROUP void sum_partials(__global const float* partials, long partials_off, int count,
                                             __global float* out, long out_off) {
  float sum = 0.0f, carry = 0.0f;
  for (int i = 0; i < count; ++i) {
    float term = partials[partials_off + i] - carry;
    float next = sum + term;
    carry = (next - sum) - term;
    sum = next;
  }
  out[out_off] = sum;
}

// torch.optim.Adam / AdamW (kernels.h):
//   p *= 1 - decay; g += l2 p; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
//   p -= step_size * m / (sqrt(v) / sqrt_bc2 + eps).
__kernel void adam_step(__global float* p, long p_off, __global const float* g, long g_off,
                        __global float* m, long m_off, __global float* v, long v_off, long n,
                        float step_size, float b1, float b2, float eps, float sqrt_bc2, float l2,
                        float decay) {
  long i;
  int count;
  if (!vector_item(n, &i, &count)) return;
  p += p_off + i;
  m += m_off + i;
  v += v_off + i;
  float16 param = load16(p, 1, 0, count, 0.0f) * (1.0f - decay);
  float16 grad = load16(g + g_off + i, 1, 0, count, 0.0f) + l2 * param;
  float16 mi = b1 * load16(m, 1, 0, count, 0.0f) + (1.0f - b1) * grad;
  float16 vi = b2 * load16(v, 1, 0, count, 0.0f) + (1.0f - b2) * grad * grad;
  store16(mi, m, 1, 0, count);
  store16(vi, v, 1, 0, count);
  store16(param - step_size * mi / (sqrt(vi) / sqrt_bc2 + eps), p, 1, 0, count);
}

// torch.optim.SGD: g += l2 p; with momentum (has_buf), buf = first ? g :
// momentum buf + g and g = nesterov ? g + momentum buf : buf; p -= lr g.
__kernel void sgd_step(__global float* p, long p_off, __global const float* g, long g_off,
                       __global float* buf, long buf_off, int has_buf, long n, float lr, float momentum,
                       float l2, int nesterov, int first) {
  long i;
  int count;
  if (!vector_item(n, &i, &count)) return;
  p += p_off + i;
  float16 param = load16(p, 1, 0, count, 0.0f);
  float16 grad = load16(g + g_off + i, 1, 0, count, 0.0f) + l2 * param;
  if (has_buf) {
    buf += buf_off + i;
    float16 b = first ? grad : momentum * load16(buf, 1, 0, count, 0.0f) + grad;
    store16(b, buf, 1, 0, count);
    grad = nesterov ? grad + momentum * b : b;
  }
  store16(param - lr * grad, p, 1, 0, count);
}

// ---- reductions over an axis -----------------------------------------------
// x viewed as [outer, n, inner]; one item per 16 output elements (o, j..j+15)
// of the [outer, inner] output, adding down n in order (launch.h: singles).

// out[o, j] = sum_i x[o, i, j].
__kernel ONE_ITEM_PER_GROUP
void sum_axis(__global const float* x, long x_off, int outer, int n, int inner, __global float* out,
              long out_off) {
  int o, j, end;
  if (!row_piece(outer, inner, 16, &o, &j, &end)) return;
  x += x_off + (long)o * n * inner;
  float16 acc = (float16)(0.0f);
  for (int i = 0; i < n; ++i) acc += load16(x + (long)i * inner, 1, j, inner, 0.0f);
  store16(acc, out + out_off + (long)o * inner, 1, j, inner);
}

// out[o, j] = max_i x[o, i, j]; arg (if has_arg) = the first i reaching it.
__kernel void max_axis(__global const float* x, long x_off, long outer, long n, long inner,
                       __global float* out, long out_off, __global int* arg, long arg_off, int has_arg) {
  long e = get_global_id(0);
  if (e >= outer * inner) return;
  long o = e / inner, j = e % inner;
  x += x_off + o * n * inner + j;
  // The first maximum, or the first NaN (which is the maximum, as in PyTorch).
  long best = 0;
  for (long i = 1; i < n && !isnan(x[best * inner]); ++i)
    if (!(x[i * inner] <= x[best * inner])) best = i;
  out[out_off + e] = x[best * inner];
  if (has_arg) arg[arg_off + e] = (int)best;
}

// ---- row-wise: one item per row of [rows, cols] (launch.h: singles) ----------

float row_max(__global const float* x, int n) {
  float16 m = (float16)(-INFINITY);
  for (int c = 0; c < n; c += 16) m = fmax(m, load16(x, 1, c, n, -INFINITY));
  return hmax16(m);
}

float row_sum(__global const float* x, int n) {
  float16 total = (float16)(0.0f);
  for (int c = 0; c < n; c += 16) total += load16(x, 1, c, n, 0.0f);
  return hsum16(total);
}

float row_dot(__global const float* a, __global const float* b, int n) {
  float16 total = (float16)(0.0f);
  for (int c = 0; c < n; c += 16) total += load16(a, 1, c, n, 0.0f) * load16(b, 1, c, n, 0.0f);
  return hsum16(total);
}

// sum exp(x - shift): the lanes past the end read -inf and add exp(-inf) = 0.
float row_sum_exp(__global const float* x, float shift, int n) {
  float16 total = (float16)(0.0f);
  for (int c = 0; c < n; c += 16) total += exp(load16(x, 1, c, n, -INFINITY) - shift);
  return hsum16(total);
}

// log_softmax(x) = x - max - log(sum exp(x - max)); the max keeps exp finite.
void log_softmax_row(__global const float* x, __global float* y, int n) {
  float m = row_max(x, n);
  float shift = m + log(row_sum_exp(x, m, n));
  for (int c = 0; c < n; c += 16) store16(load16(x, 1, c, n, 0.0f) - shift, y, 1, c, n);
}

__kernel ONE_ITEM_PER_GROUP
void log_softmax(__global const float* x, long x_off, __global float* y, long y_off, long rows, long cols) {
  long r = get_global_id(0);
  if (r >= rows) return;
  log_softmax_row(x + x_off + r * cols, y + y_off + r * cols, (int)cols);
}

// dx = dy - exp(y) * sum(dy), y = log_softmax(x).
__kernel ONE_ITEM_PER_GROUP
void log_softmax_backward(__global const float* y, long y_off, __global const float* dy, long dy_off,
                          __global float* dx, long dx_off, long rows, long cols) {
  long r = get_global_id(0);
  if (r >= rows) return;
  y += y_off + r * cols;
  dy += dy_off + r * cols;
  dx += dx_off + r * cols;
  int n = (int)cols;
  float total = row_sum(dy, n);
  for (int c = 0; c < n; c += 16)
    store16(load16(dy, 1, c, n, 0.0f) - exp(load16(y, 1, c, n, 0.0f)) * total, dx, 1, c, n);
}

// Attention weights: y = softmax(keep ? scale * x : -1e9) per row. The mask
// (int32, 1 = may attend, 0 = hidden; has_mask 0 for none) is read under
// broadcast strides: the row's offset from the row dims (row_ndim, row_shape,
// row_strides) plus column * col_stride.
__global const int* mask_row(__global const int* mask, long mask_off, int r, int row_ndim, int8 row_shape,
                             int8 row_strides) {
  return mask + mask_off + broadcast_offsets(r, row_ndim, row_shape, row_strides, row_strides).x;
}

// Columns c..c+15 of a row of masked scores; -inf past the row's end.
float16 masked_scores16(__global const float* x, __global const int* mask, int has_mask, int col_stride,
                        float scale, int c, int n) {
  float16 s = scale * load16(x, 1, c, n, -INFINITY);
  if (has_mask) s = select(s, (float16)(-1e9f), load16_int(mask, col_stride, c, n, 1) == 0);
  return s;
}

__kernel ONE_ITEM_PER_GROUP
void masked_softmax(__global const float* x, long x_off, __global const int* mask, long mask_off,
                    int has_mask, int row_ndim, int8 row_shape, int8 row_strides, int col_stride, int rows,
                    int cols, float scale, __global float* y, long y_off) {
  int r = get_global_id(0);
  if (r >= rows) return;
  x += x_off + (long)r * cols;
  y += y_off + (long)r * cols;
  if (has_mask) mask = mask_row(mask, mask_off, r, row_ndim, row_shape, row_strides);
  float16 m16 = (float16)(-INFINITY);
  for (int c = 0; c < cols; c += 16) m16 = fmax(m16, masked_scores16(x, mask, has_mask, col_stride, scale, c, cols));
  float m = hmax16(m16);
  float16 total = (float16)(0.0f);
  for (int c = 0; c < cols; c += 16) {
    float16 e = exp(masked_scores16(x, mask, has_mask, col_stride, scale, c, cols) - m);
    total += e;
    store16(e, y, 1, c, cols);
  }
  float sum = hsum16(total);
  for (int c = 0; c < cols; c += 16) store16(load16(y, 1, c, cols, 0.0f) / sum, y, 1, c, cols);
}

// dx = scale * y * (dy - sum(dy * y)) where the mask keeps, 0 where it hides.
__kernel ONE_ITEM_PER_GROUP
void masked_softmax_backward(__global const float* y, long y_off, __global const float* dy, long dy_off,
                             __global const int* mask, long mask_off, int has_mask, int row_ndim,
                             int8 row_shape, int8 row_strides, int col_stride, int rows, int cols, float scale,
                             __global float* dx, long dx_off) {
  int r = get_global_id(0);
  if (r >= rows) return;
  y += y_off + (long)r * cols;
  dy += dy_off + (long)r * cols;
  dx += dx_off + (long)r * cols;
  if (has_mask) mask = mask_row(mask, mask_off, r, row_ndim, row_shape, row_strides);
  float dot = row_dot(dy, y, cols);
  for (int c = 0; c < cols; c += 16) {
    float16 d = scale * (load16(y, 1, c, cols, 0.0f) * (load16(dy, 1, c, cols, 0.0f) - dot));
    if (has_mask) d = select(d, (float16)(0.0f), load16_int(mask, col_stride, c, cols, 1) == 0);
    store16(d, dx, 1, c, cols);
  }
}

// Layer normalization as in the annotated Transformer: y = alpha (x - mean) /
// (std + eps) + bias, with std unbiased (n - 1); saves mean and std per row.
__kernel ONE_ITEM_PER_GROUP
void layer_norm(__global const float* x, long x_off, __global const float* alpha, long alpha_off,
                __global const float* bias, long bias_off, long rows, long cols, float eps, __global float* y,
                long y_off, __global float* mean, long mean_off, __global float* std, long std_off) {
  long r = get_global_id(0);
  if (r >= rows) return;
  x += x_off + r * cols;
  y += y_off + r * cols;
  alpha += alpha_off;
  bias += bias_off;
  int n = (int)cols;
  float mu = row_sum(x, n) / (float)n;
  // Lanes past the end read mu, adding (mu - mu)^2 = 0.
  float16 ss = (float16)(0.0f);
  for (int c = 0; c < n; c += 16) {
    float16 d = load16(x, 1, c, n, mu) - mu;
    ss += d * d;
  }
  float s = sqrt(hsum16(ss) / (float)(n - 1));
  for (int c = 0; c < n; c += 16)
    store16(load16(alpha, 1, c, n, 0.0f) * (load16(x, 1, c, n, 0.0f) - mu) / (s + eps) + load16(bias, 1, c, n, 0.0f),
            y, 1, c, n);
  mean[mean_off + r] = mu;
  std[std_off + r] = s;
}

// Layer norm's dx per row: with xhat = (x - mean) / (std + eps), g = dy alpha,
// dx = (g - mean(g)) / (std + eps) - xhat sum(g xhat) / ((n - 1) std).
__kernel ONE_ITEM_PER_GROUP
void layer_norm_backward_rows(__global const float* x, long x_off, __global const float* alpha, long alpha_off,
                              __global const float* mean, long mean_off, __global const float* std, long std_off,
                              __global const float* dy, long dy_off, long rows, long cols, float eps,
                              __global float* dx, long dx_off) {
  long r = get_global_id(0);
  if (r >= rows) return;
  x += x_off + r * cols;
  dy += dy_off + r * cols;
  dx += dx_off + r * cols;
  alpha += alpha_off;
  int n = (int)cols;
  float mu = mean[mean_off + r], s = std[std_off + r];
  float inv = 1.0f / (s + eps);
  // Lanes past the end read dy = 0, so g = 0 there.
  float16 g_total = (float16)(0.0f), dot16 = (float16)(0.0f);
  for (int c = 0; c < n; c += 16) {
    float16 xhat = (load16(x, 1, c, n, 0.0f) - mu) * inv;
    float16 g = load16(dy, 1, c, n, 0.0f) * load16(alpha, 1, c, n, 0.0f);
    g_total += g;
    dot16 += g * xhat;
  }
  float mean_g = hsum16(g_total) / (float)n, dot = hsum16(dot16);
  // A constant row has std 0: its xhat is 0, and so is the second term.
  float k = s > 0.0f ? dot / ((float)(n - 1) * s) : 0.0f;
  for (int c = 0; c < n; c += 16) {
    float16 g = load16(dy, 1, c, n, 0.0f) * load16(alpha, 1, c, n, 0.0f);
    store16((g - mean_g) * inv - (load16(x, 1, c, n, 0.0f) - mu) * inv * k, dx, 1, c, n);
  }
}

// Layer norm's parameter gradients, one item per 16 columns summing down the
// rows: dalpha = sum dy xhat, dbias = sum dy (overwritten).
__kernel ONE_ITEM_PER_GROUP
void layer_norm_backward_columns(__global const float* x, long x_off, __global const float* mean, long mean_off,
                                 __global const float* std, long std_off, __global const float* dy, long dy_off,
                                 int rows, int cols, float eps, __global float* dalpha, long dalpha_off,
                                 __global float* dbias, long dbias_off) {
  int c = get_global_id(0) * 16;
  if (c >= cols) return;
  float16 da = (float16)(0.0f), db = (float16)(0.0f);
  for (int r = 0; r < rows; ++r) {
    long start = (long)r * cols;
    float16 xhat = (load16(x + x_off + start, 1, c, cols, 0.0f) - mean[mean_off + r]) *
                   (1.0f / (std[std_off + r] + eps));
    float16 g = load16(dy + dy_off + start, 1, c, cols, 0.0f);
    da += g * xhat;
    db += g;
  }
  store16(da, dalpha + dalpha_off, 1, c, cols);
  store16(db, dbias + dbias_off, 1, c, cols);
}

// The k largest of each row, largest first, ties to the lower index: slot s
// takes the largest element that comes after slot s-1's in that order.
__kernel void topk(__global const float* x, long x_off, long rows, long cols, long k,
                   __global float* values, long values_off, __global int* indices, long indices_off) {
  long r = get_global_id(0);
  if (r >= rows) return;
  x += x_off + r * cols;
  float previous = 0.0f;
  long previous_index = -1;
  for (long s = 0; s < k; ++s) {
    long best = -1;
    for (long c = 0; c < cols; ++c) {
      bool after = previous_index < 0 || x[c] < previous || (x[c] == previous && c > previous_index);
      if (after && (best < 0 || x[c] > x[best])) best = c;
    }
    if (best < 0) return;  // k > cols
    previous = x[best];
    previous_index = best;
    values[values_off + r * k + s] = previous;
    indices[indices_off + r * k + s] = (int)best;
  }
}

// ---- embedding ---------------------------------------------------------------
// The table has table_rows rows (from its buffer's size); an id outside them
// reads nothing: gather writes a zero row, scatter adds nowhere.

// out[i, :] = table[ids[i], :], in row pieces.
__kernel void gather_rows(__global const float* table, long table_off, long table_rows,
                          __global const int* ids, long ids_off, int n, int dim, __global float* out,
                          long out_off) {
  int i, first, end;
  if (!row_piece(n, dim, PIECE, &i, &first, &end)) return;
  long id = ids[ids_off + i];
  bool inside = id >= 0 && id < table_rows;
  table += table_off + id * dim;
  out += out_off + (long)i * dim;
  for (int c = first; c < end; c += 16)
    store16(inside ? load16(table, 1, c, dim, 0.0f) : (float16)(0.0f), out, 1, c, dim);
}

// grad_table[ids[i], d] += grad_out[i, d]: one item per 16 columns, adding
// the rows in order, so repeated ids sum deterministically, as on the CPU.
__kernel ONE_ITEM_PER_GROUP
void scatter_add_rows(__global const float* grad_out, long grad_out_off, __global const int* ids, long ids_off,
                      int n, int dim, __global float* grad_table, long grad_table_off, long table_rows) {
  int d = get_global_id(0) * 16;
  if (d >= dim) return;
  for (int i = 0; i < n; ++i) {
    long id = ids[ids_off + i];
    if (id < 0 || id >= table_rows) continue;
    __global float* row = grad_table + grad_table_off + id * dim;
    store16(load16(row, 1, d, dim, 0.0f) + load16(grad_out + grad_out_off + (long)i * dim, 1, d, dim, 0.0f), row,
            1, d, dim);
  }
}

// ---- cross-entropy -------------------------------------------------------------

// Per row: log_probs = log_softmax(logits); ignored rows (target ==
// ignore_index) count 0 and lose 0; others count 1 and lose
// (1-eps) (-log p_target) + eps mean_c(-log p_c), NaN for a target outside [0, cols).
__kernel ONE_ITEM_PER_GROUP
void cross_entropy(__global const float* logits, long logits_off, __global const int* targets, long targets_off,
                   long rows, long cols, int ignore_index, float eps, __global float* row_loss,
                   long row_loss_off, __global float* row_counted, long row_counted_off,
                   __global float* log_probs, long log_probs_off) {
  long r = get_global_id(0);
  if (r >= rows) return;
  int n = (int)cols;
  __global float* lp = log_probs + log_probs_off + r * cols;
  log_softmax_row(logits + logits_off + r * cols, lp, n);
  int t = targets[targets_off + r];
  row_counted[row_counted_off + r] = t == ignore_index ? 0.0f : 1.0f;
  float loss;
  if (t == ignore_index) {
    loss = 0.0f;
  } else if (t < 0 || t >= n) {
    loss = NAN;
  } else {
    float mean_nll = -row_sum(lp, n) / (float)n;
    loss = (1.0f - eps) * -lp[t] + eps * mean_nll;
  }
  row_loss[row_loss_off + r] = loss;
}

// dlogits = scale[0] (softmax - ((1-eps) onehot(target) + eps / cols)), 0 on
// ignored rows; one item per row.
__kernel ONE_ITEM_PER_GROUP
void cross_entropy_backward(__global const float* log_probs, long log_probs_off, __global const int* targets,
                            long targets_off, long rows, long cols, int ignore_index, float eps,
                            __global const float* scale, long scale_off, __global float* dlogits,
                            long dlogits_off) {
  long r = get_global_id(0);
  if (r >= rows) return;
  int n = (int)cols, t = targets[targets_off + r];
  __global const float* lp = log_probs + log_probs_off + r * cols;
  __global float* d = dlogits + dlogits_off + r * cols;
  float s = scale[scale_off], smooth = eps / (float)n, hit = s * (1.0f - eps);
  for (int c = 0; c < n; c += 16) {
    float16 v = (float16)(0.0f);
    if (t != ignore_index) {
      v = s * (exp(load16(lp, 1, c, n, 0.0f)) - smooth);
      v -= select((float16)(0.0f), (float16)(hit), c + lane_indices() == t);
    }
    store16(v, d, 1, c, n);
  }
}

)CLC",
                            "-DPIECE=" + std::to_string(kPiece)};

}  // namespace sf::opencl_backend
