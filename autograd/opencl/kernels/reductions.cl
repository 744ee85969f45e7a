// Reductions (common.cl has the helpers and conventions). The column sums,
// sum_to and sum_axis, take one item per LANES output elements and add down
// the reduced elements in the CPU's order, so no two items write the same
// element (launch.h: column_items).

// out = x summed over the dims out is broadcast along, in the CPU's order:
// each output element adds its x elements (the "reduced" indices) in
// row-major order. The kept dims are rows of cols elements (cols strides
// col_x in x, col_out in out).
__kernel COLUMN_GROUP
void sum_to(__global const float* x, long x_off, __global float* out, long out_off, int rows, int cols,
            int ndim, int8 shape, int8 kept_x, int8 kept_out, int col_x, int col_out, int reduced,
            int reduced_ndim, int8 reduced_shape, int8 reduced_x) {
  int row, c, end;
  if (!row_piece(rows, cols, LANES, &row, &c, &end)) return;
  int2 o = broadcast_offsets(row, ndim, shape, kept_x, kept_out);
  x += x_off + o.x;
  out += out_off + o.y;
  floatV acc = (floatV)(0.0f);
  for (int r = 0; r < reduced; ++r)
    acc += loadV(x + broadcast_offsets(r, reduced_ndim, reduced_shape, reduced_x, reduced_x).x, col_x, c,
                 cols, 0.0f);
  storeV(acc, out, col_out, c, cols);
}

// x viewed as [outer, n, inner]: out[o, j] = sum_i x[o, i, j], adding down n
// in order.
__kernel COLUMN_GROUP
void sum_axis(__global const float* x, long x_off, int outer, int n, int inner, __global float* out,
              long out_off) {
  int o, j, end;
  if (!row_piece(outer, inner, LANES, &o, &j, &end)) return;
  x += x_off + (long)o * n * inner;
  floatV acc = (floatV)(0.0f);
  for (int i = 0; i < n; ++i) acc += loadV(x + (long)i * inner, 1, j, inner, 0.0f);
  storeV(acc, out + out_off + (long)o * inner, 1, j, inner);
}

// out[o, j] = max_i x[o, i, j]; arg (if has_arg) = the first i reaching it.
// One item per output element.
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

// Partial sums of a . b: item g of `items` adds a[i] b[i] for i = g, g + items,
// ... (Kahan-compensated; neighbouring items read neighbouring elements);
// sum_partials adds them up.
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

// out[0] = the sum of `count` partial sums, Kahan-compensated, by the first item.
__kernel void sum_partials(__global const float* partials, long partials_off, int count, __global float* out,
                           long out_off) {
  if (get_global_id(0) != 0) return;
  float sum = 0.0f, carry = 0.0f;
  for (int i = 0; i < count; ++i) {
    float term = partials[partials_off + i] - carry;
    float next = sum + term;
    carry = (next - sum) - term;
    sum = next;
  }
  out[out_off] = sum;
}

// The k largest of each row, largest first, ties to the lower index: slot s
// takes the largest element that comes after slot s-1's in that order. One
// item per row.
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
