// The OpenCL C kernels of every table entry but GEMM. Each one computes what
// the entry of the same name in kernels/scalar.cpp computes (the formulas are
// the comments in kernels/kernels.h), in the same order of additions where a
// sum runs along a row or a column, so results match the CPU's closely.
//
// Conventions: every array arrives as (pointer to the buffer's start, offset in
// elements) and is advanced by its offset first; sizes are long (ints where an
// index is decomposed, which is cheaper and enough: sizes fit in int32).
// Launches pad the number of work items up to a multiple of the work-group
// size, so each kernel first checks that its item is in range.
#include "sources.h"

namespace sf::opencl_backend {

const Source kernels_source{R"CLC(

// ---- broadcasting ----------------------------------------------------------
// A broadcasting op gets its output shape (ndim <= 8 dims, after the host has
// dropped size-1 dims and merged contiguous ones) and each operand's strides,
// 0 along broadcast dims, as int8 vectors.

// The offsets of element i (row-major over shape) in two strided operands.
// One dim (operands of the same shape, or a scalar) and two (a row or column
// broadcast) are most ops; they skip the general loop, whose private arrays
// keep PoCL from vectorising across work items.
int2 broadcast_offsets(int i, int ndim, int8 shape, int8 strides_a, int8 strides_b) {
  if (ndim == 1) return i * (int2)(strides_a.s0, strides_b.s0);
  if (ndim == 2) {
    int row = i / shape.s1, col = i - row * shape.s1;
    return row * (int2)(strides_a.s0, strides_b.s0) + col * (int2)(strides_a.s1, strides_b.s1);
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

// Binary: 0 add, 1 sub, 2 mul, 3 div (kernels::Binary).
__kernel void binary(int op, __global const float* a, long a_off, __global const float* b, long b_off,
                     __global float* out, long out_off, int n, int ndim, int8 shape, int8 sa, int8 sb) {
  int i = get_global_id(0);
  if (i >= n) return;
  int2 o = broadcast_offsets(i, ndim, shape, sa, sb);
  float x = a[a_off + o.x], y = b[b_off + o.y];
  float r;
  switch (op) {
    case 0: r = x + y; break;
    case 1: r = x - y; break;
    case 2: r = x * y; break;
    default: r = x / y; break;
  }
  out[out_off + i] = r;
}

// Predicates (kernels::Predicate): 0 ==, 1 !=, 2 <, 3 <=, 4 >, 5 >=, 6 and, 7 or;
// 1 or 0 as int32. And/or treat nonzero as true.
#define PREDICATE_KERNEL(name, T)                                                               \
  __kernel void name(int op, __global const T* a, long a_off, __global const T* b, long b_off,  \
                     __global int* out, long out_off, int n, int ndim, int8 shape, int8 sa,     \
                     int8 sb) {                                                                 \
    int i = get_global_id(0);                                                                   \
    if (i >= n) return;                                                                         \
    int2 o = broadcast_offsets(i, ndim, shape, sa, sb);                                         \
    T x = a[a_off + o.x], y = b[b_off + o.y];                                                   \
    int r;                                                                                      \
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
    out[out_off + i] = r;                                                                       \
  }
PREDICATE_KERNEL(predicate, float)
PREDICATE_KERNEL(predicate_int, int)

// out = mask ? value : x.
__kernel void masked_fill(__global const float* x, long x_off, __global const int* mask, long mask_off,
                          float value, __global float* out, long out_off, int n, int ndim, int8 shape,
                          int8 sx, int8 sm) {
  int i = get_global_id(0);
  if (i >= n) return;
  int2 o = broadcast_offsets(i, ndim, shape, sx, sm);
  out[out_off + i] = mask[mask_off + o.y] != 0 ? value : x[x_off + o.x];
}

// y = x with its dims permuted: the host passes y's shape and, per y dim, the
// stride of the x dim it reads.
__kernel void permute(__global const float* x, long x_off, __global float* y, long y_off, int n,
                      int ndim, int8 shape, int8 strides) {
  int i = get_global_id(0);
  if (i >= n) return;
  y[y_off + i] = x[x_off + broadcast_offsets(i, ndim, shape, strides, strides).x];
}

// out += x summed over the dims out is broadcast along: one item per output
// element (a "kept" index), adding its x elements (the "reduced" indices) in
// row-major order, as the CPU does, so no two items write the same element.
__kernel void sum_to(__global const float* x, long x_off, __global float* out, long out_off,
                     int kept, int kept_ndim, int8 kept_shape, int8 kept_x, int8 kept_out,
                     int reduced, int reduced_ndim, int8 reduced_shape, int8 reduced_x) {
  int i = get_global_id(0);
  if (i >= kept) return;
  int2 o = broadcast_offsets(i, kept_ndim, kept_shape, kept_x, kept_out);
  x += x_off + o.x;
  float acc = out[out_off + o.y];
  for (int r = 0; r < reduced; ++r)
    acc += x[broadcast_offsets(r, reduced_ndim, reduced_shape, reduced_x, reduced_x).x];
  out[out_off + o.y] = acc;
}

// ---- elementwise -----------------------------------------------------------

// y = f(x), kernels::Unary in order: -x, exp, log, sqrt, relu, tanh, sigmoid,
// x + s, x * s, x^s, s - x, s / x.
__kernel void unary(int op, __global const float* x, long x_off, __global float* y, long y_off, long n,
                    float s) {
  long i = get_global_id(0);
  if (i >= n) return;
  float v = x[x_off + i], r;
  switch (op) {
    case 0: r = -v; break;
    case 1: r = exp(v); break;
    case 2: r = log(v); break;
    case 3: r = sqrt(v); break;
    case 4: r = v > 0.0f ? v : 0.0f; break;
    case 5: r = tanh(v); break;
    case 6: r = 1.0f / (1.0f + exp(-v)); break;
    case 7: r = v + s; break;
    case 8: r = v * s; break;
    case 9: r = pow(v, s); break;
    case 10: r = s - v; break;
    default: r = s / v; break;
  }
  y[y_off + i] = r;
}

// y = max(x + bias[column], 0) over [n / cols, cols].
__kernel void bias_relu(__global const float* x, long x_off, __global const float* bias, long bias_off,
                        long n, long cols, __global float* y, long y_off) {
  long i = get_global_id(0);
  if (i >= n) return;
  y[y_off + i] = max(x[x_off + i] + bias[bias_off + i % cols], 0.0f);
}

// dx = y > 0 ? dy : 0.
__kernel void relu_backward(__global const float* y, long y_off, __global const float* dy, long dy_off,
                            __global float* dx, long dx_off, long n) {
  long i = get_global_id(0);
  if (i >= n) return;
  dx[dx_off + i] = y[y_off + i] > 0.0f ? dy[dy_off + i] : 0.0f;
}

// y = keep ? x * scale : 0, keep = lowbias32(i * 0x9E3779B1 + seed) >= threshold:
// the same hash as kernels::dropout_keeps, so the CPU and OpenCL masks agree.
__kernel void dropout(__global const float* x, long x_off, __global float* y, long y_off, long n,
                      float scale, uint seed, uint threshold) {
  long i = get_global_id(0);
  if (i >= n) return;
  uint h = (uint)i * 0x9E3779B1u + seed;
  h ^= h >> 16;
  h *= 0x7feb352du;
  h ^= h >> 15;
  h *= 0x846ca68bu;
  h ^= h >> 16;
  y[y_off + i] = h >= threshold ? x[x_off + i] * scale : 0.0f;
}

// Partial sums of a . b: item g of `items` adds a[i] b[i] for i = g, g + items,
// ... (Kahan-compensated); the host adds the partials in double.
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

// torch.optim.Adam / AdamW (kernels.h):
//   p *= 1 - decay; g += l2 p; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
//   p -= step_size * m / (sqrt(v) / sqrt_bc2 + eps).
__kernel void adam_step(__global float* p, long p_off, __global const float* g, long g_off,
                        __global float* m, long m_off, __global float* v, long v_off, long n,
                        float step_size, float b1, float b2, float eps, float sqrt_bc2, float l2,
                        float decay) {
  long i = get_global_id(0);
  if (i >= n) return;
  float param = p[p_off + i] * (1.0f - decay);
  float grad = g[g_off + i] + l2 * param;
  float mi = b1 * m[m_off + i] + (1.0f - b1) * grad;
  float vi = b2 * v[v_off + i] + (1.0f - b2) * grad * grad;
  m[m_off + i] = mi;
  v[v_off + i] = vi;
  p[p_off + i] = param - step_size * mi / (sqrt(vi) / sqrt_bc2 + eps);
}

// torch.optim.SGD: g += l2 p; with momentum (has_buf), buf = first ? g :
// momentum buf + g and g = nesterov ? g + momentum buf : buf; p -= lr g.
__kernel void sgd_step(__global float* p, long p_off, __global const float* g, long g_off,
                       __global float* buf, long buf_off, int has_buf, long n, float lr, float momentum,
                       float l2, int nesterov, int first) {
  long i = get_global_id(0);
  if (i >= n) return;
  float grad = g[g_off + i] + l2 * p[p_off + i];
  if (has_buf) {
    float b = first ? grad : momentum * buf[buf_off + i] + grad;
    buf[buf_off + i] = b;
    grad = nesterov ? grad + momentum * b : b;
  }
  p[p_off + i] -= lr * grad;
}

// ---- reductions over an axis -----------------------------------------------
// x viewed as [outer, n, inner]; one item per output element (o, j).

// out[o, j] = sum_i x[o, i, j].
__kernel void sum_axis(__global const float* x, long x_off, long outer, long n, long inner,
                       __global float* out, long out_off) {
  long e = get_global_id(0);
  if (e >= outer * inner) return;
  long o = e / inner, j = e % inner;
  x += x_off + o * n * inner + j;
  float acc = 0.0f;
  for (long i = 0; i < n; ++i) acc += x[i * inner];
  out[out_off + e] = acc;
}

// out[o, j] = max_i x[o, i, j]; arg (if has_arg) = the first i reaching it.
__kernel void max_axis(__global const float* x, long x_off, long outer, long n, long inner,
                       __global float* out, long out_off, __global int* arg, long arg_off, int has_arg) {
  long e = get_global_id(0);
  if (e >= outer * inner) return;
  long o = e / inner, j = e % inner;
  x += x_off + o * n * inner + j;
  long best = 0;
  for (long i = 1; i < n; ++i)
    if (x[i * inner] > x[best * inner]) best = i;
  out[out_off + e] = x[best * inner];
  if (has_arg) arg[arg_off + e] = (int)best;
}

// ---- row-wise: one item per row of [rows, cols] ----------------------------

float row_max(__global const float* x, long cols) {
  float m = x[0];
  for (long c = 1; c < cols; ++c) m = max(m, x[c]);
  return m;
}

// log_softmax(x) = x - max - log(sum exp(x - max)); the max keeps exp finite.
void log_softmax_row(__global const float* x, __global float* y, long cols) {
  float m = row_max(x, cols), total = 0.0f;
  for (long c = 0; c < cols; ++c) total += exp(x[c] - m);
  float shift = m + log(total);
  for (long c = 0; c < cols; ++c) y[c] = x[c] - shift;
}

// softmax(x) = exp(x - max) / sum exp(x - max).
__kernel void softmax(__global const float* x, long x_off, __global float* y, long y_off, long rows,
                      long cols) {
  long r = get_global_id(0);
  if (r >= rows) return;
  x += x_off + r * cols;
  y += y_off + r * cols;
  float m = row_max(x, cols), total = 0.0f;
  for (long c = 0; c < cols; ++c) total += (y[c] = exp(x[c] - m));
  for (long c = 0; c < cols; ++c) y[c] /= total;
}

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
__kernel __attribute__((reqd_work_group_size(1, 1, 1)))
void log_softmax(__global const float* x, long x_off, __global float* y, long y_off, long rows,
                          long cols) {
  long r = get_global_id(0);
  if (r >= rows) return;
  x += x_off + r * cols;
  y += y_off + r * cols;
  long whole = cols / 16 * 16;
  float16 m16 = (float16)(-INFINITY);
  for (long c = 0; c < whole; c += 16) m16 = fmax(m16, vload16(0, x + c));
  float m = hmax16(m16);
  for (long c = whole; c < cols; ++c) m = max(m, x[c]);
  float16 t16 = (float16)(0.0f);
  for (long c = 0; c < whole; c += 16) t16 += exp(vload16(0, x + c) - m);
  float total = hsum16(t16);
  for (long c = whole; c < cols; ++c) total += exp(x[c] - m);
  float shift = m + log(total);
  for (long c = 0; c < whole; c += 16) vstore16(vload16(0, x + c) - shift, 0, y + c);
  for (long c = whole; c < cols; ++c) y[c] = x[c] - shift;
}

// dx = y * (dy - sum(dy * y)).
__kernel void softmax_backward(__global const float* y, long y_off, __global const float* dy, long dy_off,
                               __global float* dx, long dx_off, long rows, long cols) {
  long r = get_global_id(0);
  if (r >= rows) return;
  y += y_off + r * cols;
  dy += dy_off + r * cols;
  dx += dx_off + r * cols;
  float dot = 0.0f;
  for (long c = 0; c < cols; ++c) dot += dy[c] * y[c];
  for (long c = 0; c < cols; ++c) dx[c] = y[c] * (dy[c] - dot);
}

// dx = dy - exp(y) * sum(dy), y = log_softmax(x).
__kernel void log_softmax_backward(__global const float* y, long y_off, __global const float* dy,
                                   long dy_off, __global float* dx, long dx_off, long rows, long cols) {
  long r = get_global_id(0);
  if (r >= rows) return;
  y += y_off + r * cols;
  dy += dy_off + r * cols;
  dx += dx_off + r * cols;
  float total = 0.0f;
  for (long c = 0; c < cols; ++c) total += dy[c];
  for (long c = 0; c < cols; ++c) dx[c] = dy[c] - exp(y[c]) * total;
}

// Attention weights: y = softmax(mask ? scale * x : -1e9) per row. The mask
// (int32, 0 = hidden; has_mask 0 for none) is read under broadcast strides:
// the row's offset from the row dims (row_ndim, row_shape, row_strides) plus
// column * col_stride.
int mask_row_offset(int r, int row_ndim, int8 row_shape, int8 row_strides) {
  return broadcast_offsets(r, row_ndim, row_shape, row_strides, row_strides).x;
}

__kernel void masked_softmax(__global const float* x, long x_off, __global const int* mask, long mask_off,
                             int has_mask, int row_ndim, int8 row_shape, int8 row_strides, int col_stride,
                             int rows, int cols, float scale, __global float* y, long y_off) {
  int r = get_global_id(0);
  if (r >= rows) return;
  x += x_off + (long)r * cols;
  y += y_off + (long)r * cols;
  if (has_mask) mask += mask_off + mask_row_offset(r, row_ndim, row_shape, row_strides);
  // The masked scores go to y first, then become their softmax in place.
  for (int c = 0; c < cols; ++c) y[c] = !has_mask || mask[c * col_stride] ? scale * x[c] : -1e9f;
  float m = row_max(y, cols), total = 0.0f;
  for (int c = 0; c < cols; ++c) total += (y[c] = exp(y[c] - m));
  for (int c = 0; c < cols; ++c) y[c] /= total;
}

// dx = scale * y * (dy - sum(dy * y)) where the mask keeps, 0 where it hides.
__kernel void masked_softmax_backward(__global const float* y, long y_off, __global const float* dy,
                                      long dy_off, __global const int* mask, long mask_off, int has_mask,
                                      int row_ndim, int8 row_shape, int8 row_strides, int col_stride,
                                      int rows, int cols, float scale, __global float* dx, long dx_off) {
  int r = get_global_id(0);
  if (r >= rows) return;
  y += y_off + (long)r * cols;
  dy += dy_off + (long)r * cols;
  dx += dx_off + (long)r * cols;
  if (has_mask) mask += mask_off + mask_row_offset(r, row_ndim, row_shape, row_strides);
  float dot = 0.0f;
  for (int c = 0; c < cols; ++c) dot += dy[c] * y[c];
  for (int c = 0; c < cols; ++c)
    dx[c] = !has_mask || mask[c * col_stride] ? scale * (y[c] * (dy[c] - dot)) : 0.0f;
}

// The seed's LayerNormalization: y = alpha (x - mean) / (std + eps) + bias, with
// std unbiased (n - 1); saves mean and std per row.
__kernel void layer_norm(__global const float* x, long x_off, __global const float* alpha, long alpha_off,
                         __global const float* bias, long bias_off, long rows, long cols, float eps,
                         __global float* y, long y_off, __global float* mean, long mean_off,
                         __global float* std, long std_off) {
  long r = get_global_id(0);
  if (r >= rows) return;
  x += x_off + r * cols;
  y += y_off + r * cols;
  alpha += alpha_off;
  bias += bias_off;
  float mu = 0.0f, ss = 0.0f;
  for (long c = 0; c < cols; ++c) mu += x[c];
  mu /= (float)cols;
  for (long c = 0; c < cols; ++c) ss += (x[c] - mu) * (x[c] - mu);
  float s = sqrt(ss / (float)(cols - 1));
  for (long c = 0; c < cols; ++c) y[c] = alpha[c] * (x[c] - mu) / (s + eps) + bias[c];
  mean[mean_off + r] = mu;
  std[std_off + r] = s;
}

// Layer norm's dx per row: with xhat = (x - mean) / (std + eps), g = dy alpha,
// dx = (g - mean(g)) / (std + eps) - xhat sum(g xhat) / ((n - 1) std).
__kernel void layer_norm_backward_rows(__global const float* x, long x_off, __global const float* alpha,
                                       long alpha_off, __global const float* mean, long mean_off,
                                       __global const float* std, long std_off, __global const float* dy,
                                       long dy_off, long rows, long cols, float eps, __global float* dx,
                                       long dx_off) {
  long r = get_global_id(0);
  if (r >= rows) return;
  x += x_off + r * cols;
  dy += dy_off + r * cols;
  dx += dx_off + r * cols;
  alpha += alpha_off;
  float mu = mean[mean_off + r], s = std[std_off + r];
  float inv = 1.0f / (s + eps);
  float mean_g = 0.0f, dot = 0.0f;
  for (long c = 0; c < cols; ++c) {
    float xhat = (x[c] - mu) * inv, g = dy[c] * alpha[c];
    mean_g += g;
    dot += g * xhat;
  }
  mean_g /= (float)cols;
  // A constant row has std 0: its xhat is 0, and so is the second term.
  float k = s > 0.0f ? dot / ((float)(cols - 1) * s) : 0.0f;
  for (long c = 0; c < cols; ++c) dx[c] = (dy[c] * alpha[c] - mean_g) * inv - (x[c] - mu) * inv * k;
}

// Layer norm's parameter gradients, one item per column summing over rows:
// dalpha = sum dy xhat, dbias = sum dy (overwritten).
__kernel void layer_norm_backward_columns(__global const float* x, long x_off, __global const float* mean,
                                          long mean_off, __global const float* std, long std_off,
                                          __global const float* dy, long dy_off, long rows, long cols,
                                          float eps, __global float* dalpha, long dalpha_off,
                                          __global float* dbias, long dbias_off) {
  long c = get_global_id(0);
  if (c >= cols) return;
  float da = 0.0f, db = 0.0f;
  for (long r = 0; r < rows; ++r) {
    float xhat = (x[x_off + r * cols + c] - mean[mean_off + r]) * (1.0f / (std[std_off + r] + eps));
    float g = dy[dy_off + r * cols + c];
    da += g * xhat;
    db += g;
  }
  dalpha[dalpha_off + c] = da;
  dbias[dbias_off + c] = db;
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

// out[i, :] = table[ids[i], :].
__kernel void gather_rows(__global const float* table, long table_off, long table_rows,
                          __global const int* ids, long ids_off, long n, long dim, __global float* out,
                          long out_off) {
  long e = get_global_id(0);
  if (e >= n * dim) return;
  long id = ids[ids_off + e / dim];
  out[out_off + e] = id >= 0 && id < table_rows ? table[table_off + id * dim + e % dim] : 0.0f;
}

// grad_table[ids[i], d] += grad_out[i, d]: one item per column d, adding the
// rows in order, so repeated ids sum deterministically, as on the CPU.
__kernel void scatter_add_rows(__global const float* grad_out, long grad_out_off, __global const int* ids,
                               long ids_off, long n, long dim, __global float* grad_table,
                               long grad_table_off, long table_rows) {
  long d = get_global_id(0);
  if (d >= dim) return;
  for (long i = 0; i < n; ++i) {
    long id = ids[ids_off + i];
    if (id >= 0 && id < table_rows) grad_table[grad_table_off + id * dim + d] += grad_out[grad_out_off + i * dim + d];
  }
}

// ---- cross-entropy -------------------------------------------------------------

// Per row: log_probs = log_softmax(logits); ignored rows (target ==
// ignore_index) count 0 and lose 0; others count 1 and lose
// (1-eps) (-log p_target) + eps mean_c(-log p_c), NaN for a target outside [0, cols).
__kernel void cross_entropy(__global const float* logits, long logits_off, __global const int* targets,
                            long targets_off, long rows, long cols, int ignore_index, float eps,
                            __global float* row_loss, long row_loss_off, __global float* row_counted,
                            long row_counted_off, __global float* log_probs, long log_probs_off) {
  long r = get_global_id(0);
  if (r >= rows) return;
  __global float* lp = log_probs + log_probs_off + r * cols;
  log_softmax_row(logits + logits_off + r * cols, lp, cols);
  int t = targets[targets_off + r];
  row_counted[row_counted_off + r] = t == ignore_index ? 0.0f : 1.0f;
  float loss;
  if (t == ignore_index) {
    loss = 0.0f;
  } else if (t < 0 || t >= cols) {
    loss = NAN;
  } else {
    float mean_nll = 0.0f;
    for (long c = 0; c < cols; ++c) mean_nll -= lp[c];
    mean_nll /= (float)cols;
    loss = (1.0f - eps) * -lp[t] + eps * mean_nll;
  }
  row_loss[row_loss_off + r] = loss;
}

// dlogits = scale[0] (softmax - ((1-eps) onehot(target) + eps / cols)), 0 on ignored rows.
__kernel void cross_entropy_backward(__global const float* log_probs, long log_probs_off,
                                     __global const int* targets, long targets_off, long rows, long cols,
                                     int ignore_index, float eps, __global const float* scale,
                                     long scale_off, __global float* dlogits, long dlogits_off) {
  long e = get_global_id(0);
  if (e >= rows * cols) return;
  long c = e % cols;
  int t = targets[targets_off + e / cols];
  float s = scale[scale_off], d = 0.0f;
  if (t != ignore_index) {
    d = s * (exp(log_probs[log_probs_off + e]) - eps / (float)cols);
    if (c == t) d -= s * (1.0f - eps);
  }
  dlogits[dlogits_off + e] = d;
}

)CLC",
                                  ""};

}  // namespace sf::opencl_backend
