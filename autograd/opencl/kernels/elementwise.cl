// Elementwise kernels (common.cl has the helpers and conventions): the
// broadcasting ones go along rows in pieces of PIECE columns (launch.h:
// pieces), the others take 16 consecutive elements per item (launch.h:
// vectors). The op codes are shared.h's enums.

// ---- broadcasting ------------------------------------------------------------

// a op b (kernels::Binary) over columns [first, end) of a row.
void binary_piece(int op, __global const float* a, int col_a, __global const float* b, int col_b,
                  __global float* out, int first, int end, int cols) {
  for (int c = first; c < end; c += 16) {
    float16 x = load16(a, col_a, c, cols, 0.0f), y = load16(b, col_b, c, cols, 0.0f), r;
    switch (op) {
      case Add: r = x + y; break;
      case Sub: r = x - y; break;
      case Mul: r = x * y; break;
      case Div: r = x / y; break;
      default: r = (float16)(NAN); break;  // a code without a case: a poison the tests see
    }
    store16(r, out, 1, c, cols);
  }
}

// out = a op b over `rows` (a its operand 0, b its operand 1), out contiguous.
__kernel void binary(int op, __global const float* a, long a_off, __global const float* b, long b_off,
                     __global float* out, long out_off, PackedRows rows) {
  int row, first, end, cols = rows.cols, col_a = rows.col_strides[0], col_b = rows.col_strides[1];
  if (!row_piece(rows.count, cols, PIECE, &row, &first, &end)) return;
  a += a_off + row_offset(rows, 0, row);
  b += b_off + row_offset(rows, 1, row);
  out += out_off + (long)row * cols;
  // Contiguous rows, the common case, with the strides as constants.
  if (col_a == 1 && col_b == 1)
    binary_piece(op, a, 1, b, 1, out, first, end, cols);
  else
    binary_piece(op, a, col_a, b, col_b, out, first, end, cols);
}

// Predicates (kernels::Predicate): 1 or 0 as int32; And and Or treat nonzero
// as true. (Vector comparisons give -1 for true, hence the negation.)
#define PREDICATE_KERNEL(name, T, T16, suffix)                                                    \
  __kernel void name(int op, __global const T* a, long a_off, __global const T* b, long b_off,    \
                     __global int* out, long out_off, PackedRows rows) {                          \
    int row, first, end, cols = rows.cols;                                                        \
    if (!row_piece(rows.count, cols, PIECE, &row, &first, &end)) return;                          \
    a += a_off + row_offset(rows, 0, row);                                                        \
    b += b_off + row_offset(rows, 1, row);                                                        \
    out += out_off + (long)row * cols;                                                            \
    for (int c = first; c < end; c += 16) {                                                       \
      T16 x = load16##suffix(a, rows.col_strides[0], c, cols, 0);                                 \
      T16 y = load16##suffix(b, rows.col_strides[1], c, cols, 0);                                 \
      int16 r;                                                                                    \
      switch (op) {                                                                               \
        case Eq: r = x == y; break;                                                               \
        case Ne: r = x != y; break;                                                               \
        case Lt: r = x < y; break;                                                                \
        case Le: r = x <= y; break;                                                               \
        case Gt: r = x > y; break;                                                                \
        case Ge: r = x >= y; break;                                                               \
        case And: r = x != 0 && y != 0; break;                                                    \
        case Or: r = x != 0 || y != 0; break;                                                     \
        default: r = (int16)(-2); break; /* a code without a case: 2, a poison the tests see */    \
      }                                                                                           \
      store16_int(-r, out, 1, c, cols);                                                           \
    }                                                                                             \
  }
PREDICATE_KERNEL(predicate, float, float16, )
PREDICATE_KERNEL(predicate_int, int, int16, _int)

// out = where != 0 ? value : x (x operand 0, where operand 1).
__kernel void fill_where(__global const float* x, long x_off, __global const int* where, long where_off,
                         float value, __global float* out, long out_off, PackedRows rows) {
  int row, first, end, cols = rows.cols;
  if (!row_piece(rows.count, cols, PIECE, &row, &first, &end)) return;
  x += x_off + row_offset(rows, 0, row);
  where += where_off + row_offset(rows, 1, row);
  out += out_off + (long)row * cols;
  for (int c = first; c < end; c += 16) {
    float16 v = load16(x, rows.col_strides[0], c, cols, 0.0f);
    store16(select(v, (float16)(value), load16_int(where, rows.col_strides[1], c, cols, 0) != 0), out, 1, c, cols);
  }
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

// ---- 16 elements per item ------------------------------------------------------

// y = f(x) (kernels::Unary); s is the scalar of the *Scalar ops.
__kernel void unary(int op, __global const float* x, long x_off, __global float* y, long y_off, long n,
                    float s) {
  long i;
  int count;
  if (!vector_item(n, &i, &count)) return;
  float16 v = load16(x + x_off + i, 1, 0, count, 1.0f), r;
  switch (op) {
    case Neg: r = -v; break;
    case Exp: r = exp(v); break;
    case Log: r = log(v); break;
    case Sqrt: r = sqrt(v); break;
    case Relu: r = select((float16)(0.0f), v, (v > 0.0f) | isnan(v)); break;  // NaN stays, as torch.relu
    case Tanh: r = tanh(v); break;
    case Sigmoid: r = 1.0f / (1.0f + exp(-v)); break;
    case AddScalar: r = v + s; break;
    case MulScalar: r = v * s; break;
    case PowScalar: r = pow(v, s); break;
    case RSubScalar: r = s - v; break;
    case RDivScalar: r = s / v; break;
    case RoundBf16: {  // kernels/bf16.h's to_bf16, widened back: round to nearest even, NaN kept quiet
      uint16 u = as_uint16(v);
      uint16 rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u, quiet = (u | 0x00400000u) & 0xFFFF0000u;
      r = as_float16(select(rounded, quiet, as_uint16(isnan(v))));
      break;
    }
    // shared.h's formula codes: its function of one float, lane by lane.
#define SF_FORMULA_CASE(code, function)                                        \
  case code: {                                                                 \
    float lanes[16];                                                           \
    vstore16(v, 0, lanes);                                                     \
    for (int lane = 0; lane < 16; ++lane) lanes[lane] = function(lanes[lane]); \
    r = vload16(0, lanes);                                                     \
    break;                                                                     \
  }
    SF_FORMULA_CODES(SF_FORMULA_CASE)
#undef SF_FORMULA_CASE
    default: r = (float16)(NAN); break;  // a code without a case: a poison the tests see
  }
  store16(r, y + y_off + i, 1, 0, count);
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

// Dropout of x's elements i to i + count: keep ? x * scale : x - x (0, or NaN
// where x is NaN or infinite, as the reference), keep = dropout_hash(seed, i)
// >= threshold (shared.h), so the CPU and OpenCL masks agree.
float16 dropout16(__global const float* x, long i, int count, float scale, uint seed, uint threshold) {
  uint16 h = dropout_hash(seed, (uint)i + as_uint16(lane_indices()));
  float16 v = load16(x + i, 1, 0, count, 0.0f);
  return select(v - v, v * scale, h >= threshold);
}

__kernel void dropout(__global const float* x, long x_off, __global float* y, long y_off, long n,
                      float scale, uint seed, uint threshold) {
  long i;
  int count;
  if (!vector_item(n, &i, &count)) return;
  store16(dropout16(x + x_off, i, count, scale, seed, threshold), y + y_off + i, 1, 0, count);
}

// out = x + dropout(y), in one pass.
__kernel void dropout_add(__global const float* x, long x_off, __global const float* y, long y_off,
                          __global float* out, long out_off, long n, float scale, uint seed, uint threshold) {
  long i;
  int count;
  if (!vector_item(n, &i, &count)) return;
  float16 sum = load16(x + x_off + i, 1, 0, count, 0.0f) + dropout16(y + y_off, i, count, scale, seed, threshold);
  store16(sum, out + out_off + i, 1, 0, count);
}

// ---- bfloat16 (autograd/kernels/bf16.h) --------------------------------------
// OpenCL 1.2 has no bf16 type: a bf16 is its 16 bits in a ushort, rounded to
// nearest even (NaN kept NaN, quieted) on the way in and widened exactly on
// the way out, as the reference does.

__kernel void float_to_bf16(__global const float* x, long x_off, __global ushort* y, long y_off, long n) {
  long i;
  int count;
  if (!vector_item(n, &i, &count)) return;
  for (int j = 0; j < count; ++j) {
    uint u = as_uint(x[x_off + i + j]);
    y[y_off + i + j] = (u & 0x7FFFFFFFu) > 0x7F800000u ? (ushort)((u >> 16) | 0x40u)
                                                       : (ushort)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
  }
}

__kernel void bf16_to_float(__global const ushort* x, long x_off, __global float* y, long y_off, long n) {
  long i;
  int count;
  if (!vector_item(n, &i, &count)) return;
  for (int j = 0; j < count; ++j) y[y_off + i + j] = as_float((uint)x[x_off + i + j] << 16);
}
