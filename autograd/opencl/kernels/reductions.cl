// Reductions (common.cl has the helpers and conventions).

// out = x summed over the dims out is broadcast along (table.cpp: sum_to):
// one item per LANES elements of out, which `kept` walks as rows (x operand 0,
// out operand 1; launch.h: column_items), so no two items write the same
// element. Each adds up the x elements `summed` walks (operand 0) in
// row-major order, block_size of them: the launch's second dim numbers the
// blocks of that walk, and block b writes row b of out, [blocks, out's
// elements] (one block: out itself).
__kernel COLUMN_GROUP
void sum_to(__global const float* x, long x_off, __global float* out, long out_off, PackedRows kept,
            PackedRows summed, int block_size) {
  int row, c, end;
  if (!row_piece(kept.count, kept.cols, LANES, &row, &c, &end)) return;
  int block = get_global_id(1);
  x += x_off + row_offset(kept, 0, row);
  out += out_off + (long)block * kept.count * kept.cols + row_offset(kept, 1, row);
  // Element e of the walk is column e % cols of row e / cols.
  int e = block * block_size, last = min(e + block_size, summed.count * summed.cols);
  int r = e / summed.cols, s = e % summed.cols;
  floatV acc = (floatV)(0.0f);
  while (e < last) {
    __global const float* xr = x + row_offset(summed, 0, r++);
    int stop = min(summed.cols, s + (last - e));
    e += stop - s;
    for (; s < stop; ++s) acc += loadV(xr + s * summed.col_strides[0], kept.col_strides[0], c, kept.cols, 0.0f);
    s = 0;
  }
  storeV(acc, out, kept.col_strides[1], c, kept.cols);
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
// sum_partials adds them up. Once the sum is infinite the compensation stops
// (inf - inf would make it NaN): an infinite term gives an infinite sum, as
// the reference's, and NaN only where the reference's is NaN.
__kernel void dot_partials(__global const float* a, long a_off, __global const float* b, long b_off,
                           long n, __global float* partials, long partials_off) {
  long g = get_global_id(0), items = get_global_size(0);
  float sum = 0.0f, carry = 0.0f;
  for (long i = g; i < n; i += items) {
    float term = a[a_off + i] * b[b_off + i] - carry;
    float next = sum + term;
    carry = isfinite(next) ? (next - sum) - term : 0.0f;
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
    carry = isfinite(next) ? (next - sum) - term : 0.0f;
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
