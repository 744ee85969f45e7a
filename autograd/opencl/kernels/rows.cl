// Row kernels (common.cl has the helpers and conventions): one work-group per
// row of [rows, cols] (launch.h: row_groups), its ROW_ITEMS items taking
// LANES columns each, side by side (common.cl: "a row per work-group"). An
// item reads back only the columns it wrote itself, so a row's passes need no
// barrier between them; the group reductions have their own. Unlike the other
// kernels these check no range: their launch has exactly one group per row,
// and every item must reach every barrier (PoCL crashes on a kernel that
// may return before one), so neither may a reduction sit in a branch.

// The row's max, sum, sum of a b and sum of exp(x - shift), over the group.
// Lanes past the end read a value that changes nothing: -inf for the max and
// exp (exp(-inf) = 0), 0 for the sums.
float row_max(__global const float* x, int n, __local float* scratch) {
  floatV m = (floatV)(-INFINITY);
  for (int c = row_start(); c < n; c += ROW_STEP) m = fmax(m, loadV(x, 1, c, n, -INFINITY));
  return group_max(hmaxV(m), scratch);
}

float row_sum(__global const float* x, int n, __local float* scratch) {
  floatV total = (floatV)(0.0f);
  for (int c = row_start(); c < n; c += ROW_STEP) total += loadV(x, 1, c, n, 0.0f);
  return group_sum(hsumV(total), scratch);
}

float row_dot(__global const float* a, __global const float* b, int n, __local float* scratch) {
  floatV total = (floatV)(0.0f);
  for (int c = row_start(); c < n; c += ROW_STEP) total += loadV(a, 1, c, n, 0.0f) * loadV(b, 1, c, n, 0.0f);
  return group_sum(hsumV(total), scratch);
}

float row_sum_exp(__global const float* x, float shift, int n, __local float* scratch) {
  floatV total = (floatV)(0.0f);
  for (int c = row_start(); c < n; c += ROW_STEP) total += exp(loadV(x, 1, c, n, -INFINITY) - shift);
  return group_sum(hsumV(total), scratch);
}

// y = log_softmax(x) = x - shift, shift = max + log(sum exp(x - max)) (the max
// keeps exp finite); returns the shift, and the item's sum of y in *y_total
// (lanes past the end add 0).
float log_softmax_row(__global const float* x, __global float* y, int n, floatV* y_total,
                      __local float* scratch) {
  float m = row_max(x, n, scratch);
  float shift = m + log(row_sum_exp(x, m, n, scratch));
  *y_total = (floatV)(0.0f);
  for (int c = row_start(); c < n; c += ROW_STEP) {
    floatV v = loadV(x, 1, c, n, shift) - shift;
    *y_total += v;
    storeV(v, y, 1, c, n);
  }
  return shift;
}

__kernel ROW_GROUP
void log_softmax(__global const float* x, long x_off, __global float* y, long y_off, long rows, long cols) {
  ROW_SCRATCH;
  long r = get_group_id(0);
  floatV unused;
  log_softmax_row(x + x_off + r * cols, y + y_off + r * cols, (int)cols, &unused, scratch);
}

// dx = dy - exp(y) * sum(dy), y = log_softmax(x).
__kernel ROW_GROUP
void log_softmax_backward(__global const float* y, long y_off, __global const float* dy, long dy_off,
                          __global float* dx, long dx_off, long rows, long cols) {
  ROW_SCRATCH;
  long r = get_group_id(0);
  y += y_off + r * cols;
  dy += dy_off + r * cols;
  dx += dx_off + r * cols;
  int n = (int)cols;
  float total = row_sum(dy, n, scratch);
  for (int c = row_start(); c < n; c += ROW_STEP)
    storeV(loadV(dy, 1, c, n, 0.0f) - exp(loadV(y, 1, c, n, 0.0f)) * total, dx, 1, c, n);
}

// Attention weights: y = softmax(keep ? scale * x : kHiddenScore) per row of
// x, its rows.count rows of rows.cols contiguous. The mask (int32, 1 = may
// attend, 0 = hidden; has_mask 0 for none) is operand 0 of `rows`: row r at
// row_offset(rows, 0, r), columns col_strides[0] apart.
//
// The masked scores of columns c..c+LANES-1 of a row; -inf past its end.
floatV masked_scores(__global const float* x, __global const int* mask, int has_mask, int col_stride,
                     float scale, int c, int n) {
  floatV s = scale * loadV(x, 1, c, n, -INFINITY);
  if (has_mask) s = select(s, (floatV)(kHiddenScore), loadV_int(mask, col_stride, c, n, 1) == 0);
  return s;
}

__kernel ROW_GROUP
void masked_softmax(__global const float* x, long x_off, __global const int* mask, long mask_off, int has_mask,
                    PackedRows rows, float scale, __global float* y, long y_off) {
  ROW_SCRATCH;
  int r = get_group_id(0), cols = rows.cols, col_stride = rows.col_strides[0];
  x += x_off + (long)r * cols;
  y += y_off + (long)r * cols;
  if (has_mask) mask += mask_off + row_offset(rows, 0, r);
  floatV mv = (floatV)(-INFINITY);
  for (int c = row_start(); c < cols; c += ROW_STEP)
    mv = fmax(mv, masked_scores(x, mask, has_mask, col_stride, scale, c, cols));
  float m = group_max(hmaxV(mv), scratch);
  floatV total = (floatV)(0.0f);
  for (int c = row_start(); c < cols; c += ROW_STEP) {
    floatV e = exp(masked_scores(x, mask, has_mask, col_stride, scale, c, cols) - m);
    total += e;
    storeV(e, y, 1, c, cols);
  }
  float sum = group_sum(hsumV(total), scratch);
  for (int c = row_start(); c < cols; c += ROW_STEP) storeV(loadV(y, 1, c, cols, 0.0f) / sum, y, 1, c, cols);
}

// dx = scale * y * (dy - sum(dy * y)) where the mask keeps, 0 where it hides.
__kernel ROW_GROUP
void masked_softmax_backward(__global const float* y, long y_off, __global const float* dy, long dy_off,
                             __global const int* mask, long mask_off, int has_mask, PackedRows rows,
                             float scale, __global float* dx, long dx_off) {
  ROW_SCRATCH;
  int r = get_group_id(0), cols = rows.cols;
  y += y_off + (long)r * cols;
  dy += dy_off + (long)r * cols;
  dx += dx_off + (long)r * cols;
  if (has_mask) mask += mask_off + row_offset(rows, 0, r);
  float dot = row_dot(dy, y, cols, scratch);
  for (int c = row_start(); c < cols; c += ROW_STEP) {
    floatV d = scale * (loadV(y, 1, c, cols, 0.0f) * (loadV(dy, 1, c, cols, 0.0f) - dot));
    if (has_mask) d = select(d, (floatV)(0.0f), loadV_int(mask, rows.col_strides[0], c, cols, 1) == 0);
    storeV(d, dx, 1, c, cols);
  }
}

// Layer normalization as in the annotated Transformer: y = alpha (x - mean) /
// (std + eps) + bias, with std unbiased (n - 1); saves mean and std per row.
__kernel ROW_GROUP
void layer_norm(__global const float* x, long x_off, __global const float* alpha, long alpha_off,
                __global const float* bias, long bias_off, long rows, long cols, float eps, __global float* y,
                long y_off, __global float* mean, long mean_off, __global float* std, long std_off) {
  ROW_SCRATCH;
  long r = get_group_id(0);
  x += x_off + r * cols;
  y += y_off + r * cols;
  alpha += alpha_off;
  bias += bias_off;
  int n = (int)cols;
  float mu = row_sum(x, n, scratch) / (float)n;
  // Lanes past the end read mu, adding (mu - mu)^2 = 0.
  floatV ss = (floatV)(0.0f);
  for (int c = row_start(); c < n; c += ROW_STEP) {
    floatV d = loadV(x, 1, c, n, mu) - mu;
    ss += d * d;
  }
  float s = sqrt(group_sum(hsumV(ss), scratch) / (float)(n - 1));
  for (int c = row_start(); c < n; c += ROW_STEP)
    storeV(loadV(alpha, 1, c, n, 0.0f) * (loadV(x, 1, c, n, 0.0f) - mu) / (s + eps) + loadV(bias, 1, c, n, 0.0f),
           y, 1, c, n);
  if (get_local_id(0) == 0) {
    mean[mean_off + r] = mu;
    std[std_off + r] = s;
  }
}

// Layer norm's dx per row: with xhat = (x - mean) / (std + eps), g = dy alpha,
// dx = (g - mean(g)) / (std + eps) - xhat sum(g xhat) / ((n - 1) std).
__kernel ROW_GROUP
void layer_norm_backward_rows(__global const float* x, long x_off, __global const float* alpha, long alpha_off,
                              __global const float* mean, long mean_off, __global const float* std, long std_off,
                              __global const float* dy, long dy_off, long rows, long cols, float eps,
                              __global float* dx, long dx_off) {
  ROW_SCRATCH;
  long r = get_group_id(0);
  x += x_off + r * cols;
  dy += dy_off + r * cols;
  dx += dx_off + r * cols;
  alpha += alpha_off;
  int n = (int)cols;
  float mu = mean[mean_off + r], s = std[std_off + r];
  float inv = 1.0f / (s + eps);
  // Lanes past the end read dy = 0, so g = 0 there.
  floatV g_total = (floatV)(0.0f), g_xhat = (floatV)(0.0f);
  for (int c = row_start(); c < n; c += ROW_STEP) {
    floatV xhat = (loadV(x, 1, c, n, 0.0f) - mu) * inv;
    floatV g = loadV(dy, 1, c, n, 0.0f) * loadV(alpha, 1, c, n, 0.0f);
    g_total += g;
    g_xhat += g * xhat;
  }
  float mean_g = group_sum(hsumV(g_total), scratch) / (float)n, dot = group_sum(hsumV(g_xhat), scratch);
  // A constant row has std 0: its xhat is 0, and so is the second term.
  float k = s > 0.0f ? dot / ((float)(n - 1) * s) : 0.0f;
  for (int c = row_start(); c < n; c += ROW_STEP) {
    floatV g = loadV(dy, 1, c, n, 0.0f) * loadV(alpha, 1, c, n, 0.0f);
    storeV((g - mean_g) * inv - (loadV(x, 1, c, n, 0.0f) - mu) * inv * k, dx, 1, c, n);
  }
}

// Layer norm's parameter gradients, a column sum: one item per LANES columns
// adding down block_rows rows, dalpha = sum dy xhat, dbias = sum dy
// (overwritten). The launch's second dim numbers the blocks of rows, and block
// b writes row b of dalpha and dbias (one block: the gradients themselves).
__kernel COLUMN_GROUP
void layer_norm_backward_columns(__global const float* x, long x_off, __global const float* mean, long mean_off,
                                 __global const float* std, long std_off, __global const float* dy, long dy_off,
                                 int rows, int cols, int block_rows, float eps, __global float* dalpha,
                                 long dalpha_off, __global float* dbias, long dbias_off) {
  int c = get_global_id(0) * LANES, block = get_global_id(1);
  if (c >= cols) return;
  int first = block * block_rows, last = min(first + block_rows, rows);
  floatV da = (floatV)(0.0f), db = (floatV)(0.0f);
  for (int r = first; r < last; ++r) {
    long start = (long)r * cols;
    floatV xhat = (loadV(x + x_off + start, 1, c, cols, 0.0f) - mean[mean_off + r]) *
                  (1.0f / (std[std_off + r] + eps));
    floatV g = loadV(dy + dy_off + start, 1, c, cols, 0.0f);
    da += g * xhat;
    db += g;
  }
  storeV(da, dalpha + dalpha_off + (long)block * cols, 1, c, cols);
  storeV(db, dbias + dbias_off + (long)block * cols, 1, c, cols);
}

// dalpha and dbias from layer_norm_backward_columns' blocks: partials holds
// [blocks, cols] sums of dalpha's, then as many of dbias's, added in block
// order, one item per LANES columns.
__kernel COLUMN_GROUP
void layer_norm_backward_blocks(__global const float* partials, long partials_off, int blocks, int cols,
                                __global float* dalpha, long dalpha_off, __global float* dbias, long dbias_off) {
  int c = get_global_id(0) * LANES;
  if (c >= cols) return;
  __global const float* dalpha_sums = partials + partials_off;
  __global const float* dbias_sums = dalpha_sums + (long)blocks * cols;
  floatV da = (floatV)(0.0f), db = (floatV)(0.0f);
  for (int b = 0; b < blocks; ++b) {
    da += loadV(dalpha_sums + (long)b * cols, 1, c, cols, 0.0f);
    db += loadV(dbias_sums + (long)b * cols, 1, c, cols, 0.0f);
  }
  storeV(da, dalpha + dalpha_off, 1, c, cols);
  storeV(db, dbias + dbias_off, 1, c, cols);
}

// Per row: log_probs = log_softmax(logits); ignored rows (target ==
// ignore_index) count 0 and lose 0; others count 1 and lose
// (1-eps) (-log p_target) + eps mean_c(-log p_c), NaN for a target outside [0, cols).
// (log p_target is recomputed, logits[t] - shift: another item stored it.)
// Every row sums its log-probabilities, ignored or not: no reduction in a branch.
__kernel ROW_GROUP
void cross_entropy(__global const float* logits, long logits_off, __global const int* targets, long targets_off,
                   long rows, long cols, int ignore_index, float eps, __global float* row_loss,
                   long row_loss_off, __global float* row_counted, long row_counted_off,
                   __global float* log_probs, long log_probs_off) {
  ROW_SCRATCH;
  long r = get_group_id(0);
  int n = (int)cols;
  __global const float* x = logits + logits_off + r * cols;
  __global float* lp = log_probs + log_probs_off + r * cols;
  floatV lp_total;
  float shift = log_softmax_row(x, lp, n, &lp_total, scratch);
  float mean_nll = -group_sum(hsumV(lp_total), scratch) / (float)n;
  int t = targets[targets_off + r];
  float loss;
  if (t == ignore_index)
    loss = 0.0f;
  else if (t < 0 || t >= n)
    loss = NAN;
  else
    loss = (1.0f - eps) * -(x[t] - shift) + eps * mean_nll;
  if (get_local_id(0) == 0) {
    row_counted[row_counted_off + r] = t == ignore_index ? 0.0f : 1.0f;
    row_loss[row_loss_off + r] = loss;
  }
}

// dlogits = scale[0] (softmax - ((1-eps) onehot(target) + eps / cols)), 0 on
// ignored rows.
__kernel ROW_GROUP
void cross_entropy_backward(__global const float* log_probs, long log_probs_off, __global const int* targets,
                            long targets_off, long rows, long cols, int ignore_index, float eps,
                            __global const float* scale, long scale_off, __global float* dlogits,
                            long dlogits_off) {
  long r = get_group_id(0);
  int n = (int)cols, t = targets[targets_off + r];
  __global const float* lp = log_probs + log_probs_off + r * cols;
  __global float* d = dlogits + dlogits_off + r * cols;
  float s = scale[scale_off], smooth = eps / (float)n, hit = s * (1.0f - eps);
  for (int c = row_start(); c < n; c += ROW_STEP) {
    floatV v = (floatV)(0.0f);
    if (t != ignore_index) {
      v = s * (exp(loadV(lp, 1, c, n, 0.0f)) - smooth);
      v -= select((floatV)(0.0f), (floatV)(hit), c + laneV() == t);
    }
    storeV(v, d, 1, c, n);
  }
}
