// Copies and the embedding (common.cl has the helpers and conventions).

// y = x read through the strides of operand 0 of `rows` (a permute: x's
// strides permuted to y's dims), y contiguous, in row pieces.
__kernel void copy_strided(__global const float* x, long x_off, __global float* y, long y_off, PackedRows rows) {
  int row, first, end;
  if (!row_piece(rows.count, rows.cols, PIECE, &row, &first, &end)) return;
  x += x_off + row_offset(rows, 0, row);
  y += y_off + (long)row * rows.cols;
  for (int c = first; c < end; c += 16) store16(load16(x, rows.col_strides[0], c, rows.cols, 0.0f), y, 1, c, rows.cols);
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

// grad_table[ids[i], d] += grad_out[i, d]: a column sum, one item per LANES
// columns and bucket of ids (the launch's second dim: id % buckets, buckets a
// power of 2) adding its bucket's rows in order. A table row is one bucket's,
// so repeated ids sum deterministically, in the ids' order as on the CPU,
// without atomics.
__kernel COLUMN_GROUP
void scatter_add_rows(__global const float* grad_out, long grad_out_off, __global const int* ids, long ids_off,
                      int n, int dim, int buckets, __global float* grad_table, long grad_table_off,
                      long table_rows) {
  int d = get_global_id(0) * LANES, bucket = get_global_id(1);
  if (d >= dim) return;
  for (int i = 0; i < n; ++i) {
    int id = ids[ids_off + i];
    if (id < 0 || id >= table_rows || (id & (buckets - 1)) != bucket) continue;
    __global float* row = grad_table + grad_table_off + (long)id * dim;
    storeV(loadV(row, 1, d, dim, 0.0f) + loadV(grad_out + grad_out_off + (long)i * dim, 1, d, dim, 0.0f), row,
           1, d, dim);
  }
}
