// The launchers of the OpenCL kernel table: each queues its kernel with the
// sizes the op prepared (a Rows view is one argument, launch.h). One work item
// per 16 elements for elementwise and broadcasting ops (in groups of 64), a
// work-group per row for row-wise ones and an item per few columns for column
// sums (in the runtime's shapes), as kernels/common.cl and launch.h explain.
#include "table.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "gemm.h"
#include "launch.h"
#include "sources.h"

namespace sf::opencl_backend {
namespace {

using kernels::Binary;
using kernels::Predicate;
using kernels::Rows;
using kernels::Unary;

int32_t flag(bool value) { return value ? 1 : 0; }

void binary(Binary op, Mem<const float> a, Mem<const float> b, Mem<float> out, const Rows& rows) {
  launch(kernel(Kernel::binary), items(pieces(rows.count, rows.cols)), op, a, b, out, rows);
}

void predicate(Predicate op, Mem<const float> a, Mem<const float> b, Mem<int32_t> out, const Rows& rows) {
  launch(kernel(Kernel::predicate), items(pieces(rows.count, rows.cols)), op, a, b, out, rows);
}

void predicate_int(Predicate op, Mem<const int32_t> a, Mem<const int32_t> b, Mem<int32_t> out, const Rows& rows) {
  launch(kernel(Kernel::predicate_int), items(pieces(rows.count, rows.cols)), op, a, b, out, rows);
}

void fill_where(Mem<const float> x, Mem<const int32_t> where, float value, Mem<float> out, const Rows& rows) {
  launch(kernel(Kernel::fill_where), items(pieces(rows.count, rows.cols)), x, where, value, out, rows);
}

void copy_strided(Mem<const float> x, Mem<float> y, const Rows& rows) {
  launch(kernel(Kernel::copy_strided), items(pieces(rows.count, rows.cols)), x, y, rows);
}

// `rows` with one more dim, innermost: its columns (unless a single one) join
// its outer dims, and the new dim is its columns.
void append_dim(Rows& rows, int64_t size, int64_t stride_x, int64_t stride_out) {
  if (rows.cols != 1) {
    rows.shape[rows.ndim] = rows.cols;
    rows.strides[0][rows.ndim] = rows.col_strides[0];
    rows.strides[1][rows.ndim++] = rows.col_strides[1];
    rows.count *= rows.cols;
  }
  rows.cols = size;
  rows.col_strides[0] = stride_x;
  rows.col_strides[1] = stride_out;
}

// A column sum with split columns (Shapes::split_columns) adds each column's
// `length` elements in blocks, an item per block and column, and then the
// blocks' sums in block order, an item per column: blocks of about
// sqrt(length) elements make both chains of additions about sqrt(length)
// long, where one item per column was a chain of `length` (each addition
// waiting on a load). A column of up to kMinBlock elements stays one block,
// one pass (too short a chain to be worth a second launch), as does every
// column without split columns.
struct Blocks {
  int64_t size, count;
};
Blocks column_blocks(int64_t length) {
  constexpr int64_t kMinBlock = 32;
  if (!Runtime::get().shapes().split_columns || length <= kMinBlock) return {std::max<int64_t>(length, 1), 1};
  const int64_t size = std::max(kMinBlock, static_cast<int64_t>(std::ceil(std::sqrt(static_cast<double>(length)))));
  return {size, (length + size - 1) / size};
}

// The partial sums of a column sum's blocks: [blocks, elements] floats of the
// runtime's scratch buffer (the in-order queue lets the next op reuse it).
Mem<float> partials(const Blocks& blocks, int64_t elements) {
  return {Runtime::get().scratch(blocks.count * elements * sizeof(float)), 0};
}

// `rows` with operand k laid out packed: row r's column c at r * cols + c.
Rows packed(Rows rows, int k) {
  rows.col_strides[k] = 1;
  int64_t stride = rows.cols;
  for (int d = rows.ndim - 1; d >= 0; --d) {
    rows.strides[k][d] = stride;
    stride *= rows.shape[d];
  }
  return rows;
}

// The kernel's own loops: an item per LANES elements of out, seen as rows of
// the dims out keeps (`kept`), adds x down the dims out sums away (stride 0 in
// out: `summed`) in row-major order, as the reference does; with split
// columns, in blocks of that order into partial sums, which the kernel then
// adds up as one more sum down columns: over the partials' rows.
void sum_to(Mem<const float> x, Mem<float> out, const Rows& rows) {
  Rows kept, summed;
  for (int d = 0; d <= rows.ndim; ++d) {
    bool col = d == rows.ndim;
    int64_t stride_out = col ? rows.col_strides[1] : rows.strides[1][d];
    append_dim(stride_out != 0 ? kept : summed, col ? rows.cols : rows.shape[d],
               col ? rows.col_strides[0] : rows.strides[0][d], stride_out);
  }
  const Blocks blocks = column_blocks(summed.count * summed.cols);
  if (blocks.count == 1) {
    launch(kernel(Kernel::sum_to), column_items(kept.count, kept.cols), x, out, kept, summed, int32(blocks.size));
    return;
  }
  const int64_t elements = kept.count * kept.cols;
  const Mem<float> sums = partials(blocks, elements);
  launch(kernel(Kernel::sum_to), column_items(kept.count, kept.cols, blocks.count), x, sums, packed(kept, 1), summed,
         int32(blocks.size));
  Rows over_blocks;
  append_dim(over_blocks, blocks.count, elements, 0);
  launch(kernel(Kernel::sum_to), column_items(kept.count, kept.cols), sums, out, packed(kept, 0), over_blocks,
         int32(blocks.count));
}

void unary(Unary op, Mem<const float> x, Mem<float> y, int64_t n, float s) {
  launch(kernel(Kernel::unary), vectors(n), op, x, y, n, s);
}

void max_axis(Mem<const float> x, int64_t outer, int64_t n, int64_t inner, Mem<float> out, Mem<int32_t> arg) {
  launch(kernel(Kernel::max_axis), items(outer * inner), x, outer, n, inner, out, arg, flag(bool(arg)));
}

void log_softmax(Mem<const float> x, Mem<float> y, int64_t rows, int64_t cols) {
  launch(kernel(Kernel::log_softmax), row_groups(rows), x, y, rows, cols);
}

void log_softmax_backward(Mem<const float> y, Mem<const float> dy, Mem<float> dx, int64_t rows, int64_t cols) {
  launch(kernel(Kernel::log_softmax_backward), row_groups(rows), y, dy, dx, rows, cols);
}

void masked_softmax(Mem<const float> x, Mem<const int32_t> keep, const Rows& rows, float scale, Mem<float> y) {
  launch(kernel(Kernel::masked_softmax), row_groups(rows.count), x, keep, flag(bool(keep)), rows, scale, y);
}

void masked_softmax_backward(Mem<const float> y, Mem<const float> dy, Mem<const int32_t> keep,
                             const Rows& rows, float scale, Mem<float> dx) {
  launch(kernel(Kernel::masked_softmax_backward), row_groups(rows.count), y, dy, keep, flag(bool(keep)), rows, scale, dx);
}

void layer_norm(Mem<const float> x, Mem<const float> alpha, Mem<const float> bias, int64_t rows, int64_t cols,
                float eps, Mem<float> y, Mem<float> mean, Mem<float> std) {
  launch(kernel(Kernel::layer_norm), row_groups(rows), x, alpha, bias, rows, cols, eps, y, mean, std);
}

// dx by rows; dalpha and dbias down the columns, with split columns in
// blocks of rows into partial sums ([blocks, cols] of dalpha's, then of
// dbias's), which layer_norm_backward_blocks adds up.
void layer_norm_backward(Mem<const float> x, Mem<const float> alpha, Mem<const float> mean, Mem<const float> std,
                         Mem<const float> dy, int64_t rows, int64_t cols, float eps, Mem<float> dx,
                         Mem<float> dalpha, Mem<float> dbias) {
  launch(kernel(Kernel::layer_norm_backward_rows), row_groups(rows), x, alpha, mean, std, dy, rows, cols, eps, dx);
  const Blocks blocks = column_blocks(rows);
  auto columns = [&](Mem<float> dalpha_rows, Mem<float> dbias_rows) {
    launch(kernel(Kernel::layer_norm_backward_columns), column_items(1, cols, blocks.count), x, mean, std, dy,
           int32(rows), int32(cols), int32(blocks.size), eps, dalpha_rows, dbias_rows);
  };
  if (blocks.count == 1) return columns(dalpha, dbias);
  const Mem<float> sums = partials(blocks, 2 * cols);
  columns(sums, sums + blocks.count * cols);
  launch(kernel(Kernel::layer_norm_backward_blocks), column_items(1, cols), sums, int32(blocks.count), int32(cols),
         dalpha, dbias);
}

void bias_relu(Mem<const float> x, Mem<const float> bias, int64_t rows, int64_t cols, Mem<float> y) {
  launch(kernel(Kernel::bias_relu), items(pieces(rows, cols)), x, bias, int32(rows), int32(cols), y);
}

void relu_backward(Mem<const float> y, Mem<const float> dy, Mem<float> dx, int64_t n) {
  launch(kernel(Kernel::relu_backward), vectors(n), y, dy, dx, n);
}

void dropout(Mem<const float> x, Mem<float> y, int64_t n, float scale, uint32_t seed, uint32_t threshold) {
  launch(kernel(Kernel::dropout), vectors(n), x, y, n, scale, seed, threshold);
}

void dropout_add(Mem<const float> x, Mem<const float> y, Mem<float> out, int64_t n, float scale, uint32_t seed,
                 uint32_t threshold) {
  launch(kernel(Kernel::dropout_add), vectors(n), x, y, out, n, scale, seed, threshold);
}

// Partial sums (at most 4096 of them), then their sum, all on the device: the
// in-order queue lets the next dot reuse the scratch buffer.
void dot(Mem<const float> a, Mem<const float> b, int64_t n, Mem<float> out) {
  size_t partials = std::clamp<size_t>(round_up(std::max<int64_t>(n, 0), 64), 64, 4096);
  Mem<float> scratch(Runtime::get().scratch(partials * sizeof(float)), 0);
  launch(kernel(Kernel::dot_partials), items(partials), a, b, n, scratch);
  launch(kernel(Kernel::sum_partials), items(1), scratch, static_cast<int32_t>(partials), out);
}

void adam_step(Mem<float> p, Mem<const float> g, float g_scale, Mem<float> m, Mem<float> v, int64_t n,
               float step_size, float b1, float b2, float eps, float sqrt_bc2, float l2, float decay) {
  launch(kernel(Kernel::adam_step), vectors(n), p, g, g_scale, m, v, n, step_size, b1, b2, eps, sqrt_bc2, l2,
         decay);
}

void sgd_step(Mem<float> p, Mem<const float> g, float g_scale, Mem<float> buf, int64_t n, float lr, float momentum,
              float l2, bool nesterov, bool first) {
  launch(kernel(Kernel::sgd_step), vectors(n), p, g, g_scale, buf, flag(bool(buf)), n, lr, momentum, l2,
         flag(nesterov), flag(first));
}

void topk(Mem<const float> x, int64_t rows, int64_t cols, int64_t k, Mem<float> values, Mem<int32_t> indices) {
  launch(kernel(Kernel::topk), items(rows), x, rows, cols, k, values, indices);
}

// A rectangle copy: rows of row_bytes at the given pitches.
void copy_rows(Mem<const void> src, int64_t src_stride, Mem<void> dst, int64_t dst_stride, int64_t rows,
               int64_t row_bytes) {
  if (rows <= 0 || row_bytes <= 0) return;
  size_t src_origin[3] = {src.offset, 0, 0}, dst_origin[3] = {dst.offset, 0, 0};
  size_t region[3] = {static_cast<size_t>(row_bytes), static_cast<size_t>(rows), 1};
  // A single row has no pitch (OpenCL rejects a pitch below the row's size).
  size_t src_pitch = rows > 1 ? src_stride : 0, dst_pitch = rows > 1 ? dst_stride : 0;
  check(clEnqueueCopyBufferRect(Runtime::get().queue(), static_cast<cl_mem>(src.buffer),
                                static_cast<cl_mem>(dst.buffer), src_origin, dst_origin, region, src_pitch, 0,
                                dst_pitch, 0, 0, nullptr, nullptr),
        "clEnqueueCopyBufferRect");
}

// The rows of `dim` floats a buffer holds from `table` on: ids beyond them
// would read past the buffer.
int64_t rows_in(Mem<const float> table, int64_t dim) {
  size_t bytes = 0;
  check(clGetMemObjectInfo(static_cast<cl_mem>(table.buffer), CL_MEM_SIZE, sizeof bytes, &bytes, nullptr),
        "clGetMemObjectInfo");
  return dim > 0 ? static_cast<int64_t>((bytes - table.offset) / sizeof(float)) / dim : 0;
}

void gather_rows(Mem<const float> table, Mem<const int32_t> ids, int64_t n, int64_t dim, Mem<float> out) {
  if (n * dim == 0) return;
  launch(kernel(Kernel::gather_rows), items(pieces(n, dim)), table, rows_in(table, dim), ids, int32(n),
         int32(dim), out);
}

// With split columns the embedding's backward cuts the ids into buckets (id %
// buckets), an item per bucket and column, so that each item's chain of reads
// and writes (a write may be to the row the next read needs) is about
// n / buckets long, not n. Each item still reads every id, so more items cost
// more: buckets for about kItems items, a power of 2 (the kernel masks), at
// most n.
int64_t id_buckets(int64_t n, int64_t dim) {
  constexpr int64_t kItems = 1 << 14;
  if (!Runtime::get().shapes().split_columns) return 1;
  return static_cast<int64_t>(std::bit_floor(static_cast<uint64_t>(std::clamp<int64_t>(kItems / dim, 1, n))));
}

void scatter_add_rows(Mem<const float> grad_out, Mem<const int32_t> ids, int64_t n, int64_t dim,
                      Mem<float> grad_table) {
  if (n * dim == 0) return;
  const int64_t buckets = id_buckets(n, dim);
  launch(kernel(Kernel::scatter_add_rows), column_items(1, dim, buckets), grad_out, ids, int32(n), int32(dim),
         int32(buckets), grad_table, rows_in(grad_table, dim));
}

void cross_entropy(Mem<const float> logits, Mem<const int32_t> targets, int64_t rows, int64_t cols,
                   int32_t ignore_index, float eps, Mem<float> row_loss, Mem<float> row_counted,
                   Mem<float> log_probs) {
  launch(kernel(Kernel::cross_entropy), row_groups(rows), logits, targets, rows, cols, ignore_index, eps, row_loss,
         row_counted, log_probs);
}

void cross_entropy_backward(Mem<const float> log_probs, Mem<const int32_t> targets, int64_t rows, int64_t cols,
                            int32_t ignore_index, float eps, Mem<const float> scale, Mem<float> dlogits) {
  launch(kernel(Kernel::cross_entropy_backward), row_groups(rows), log_probs, targets, rows, cols, ignore_index, eps,
         scale, dlogits);
}

void float_to_bf16(Mem<const float> x, Mem<kernels::bf16> y, int64_t n) {
  launch(kernel(Kernel::float_to_bf16), vectors(n), x, y, n);
}

void bf16_to_float(Mem<const kernels::bf16> x, Mem<float> y, int64_t n) {
  launch(kernel(Kernel::bf16_to_float), vectors(n), x, y, n);
}

// A device buffer released once the kernels queued on it have run (OpenCL
// keeps a released buffer until then).
class Temporary {
 public:
  explicit Temporary(size_t bytes) : buffer_(Runtime::get().create_buffer(std::max<size_t>(bytes, 1))) {}
  ~Temporary() { clReleaseMemObject(buffer_); }
  Temporary(const Temporary&) = delete;
  Temporary& operator=(const Temporary&) = delete;
  Mem<float> floats() const { return {buffer_, 0}; }

 private:
  cl_mem buffer_;
};

// OpenCL C 1.2 has no bf16 arithmetic: the operands are widened to float32
// (exactly) and multiplied by the float32 GEMM, which forms the same exact
// products. (Mixed-precision training runs on the CPU; this keeps the table
// whole, so a bf16 tensor can still be multiplied here.)
void gemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, Mem<const kernels::bf16> a,
               int64_t lda, int64_t stride_a, Mem<const kernels::bf16> b, int64_t ldb, int64_t stride_b, float beta,
               Mem<float> c, int64_t ldc, int64_t stride_c, int64_t batch) {
  const int64_t extent_a = kernels::gemm_operand_extent(trans_a, m, k, lda, stride_a, batch);
  const int64_t extent_b = kernels::gemm_operand_extent(trans_b, k, n, ldb, stride_b, batch);
  Temporary wide_a(extent_a * sizeof(float)), wide_b(extent_b * sizeof(float));
  bf16_to_float(a, wide_a.floats(), extent_a);
  bf16_to_float(b, wide_b.floats(), extent_b);
  gemm(trans_a, trans_b, m, n, k, alpha, wide_a.floats(), lda, stride_a, wide_b.floats(), ldb, stride_b, beta, c, ldc,
       stride_c, batch);
}

// The operands rounded into copies (the CPU rounds them as its GEMM packs
// them; here the tiled kernels load them straight from the buffers), then the
// float32 GEMM.
void gemm_rounded_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, Mem<const float> a,
                       int64_t lda, int64_t stride_a, Mem<const float> b, int64_t ldb, int64_t stride_b, float beta,
                       Mem<float> c, int64_t ldc, int64_t stride_c, int64_t batch) {
  const int64_t extent_a = kernels::gemm_operand_extent(trans_a, m, k, lda, stride_a, batch);
  const int64_t extent_b = kernels::gemm_operand_extent(trans_b, k, n, ldb, stride_b, batch);
  Temporary rounded_a(extent_a * sizeof(float)), rounded_b(extent_b * sizeof(float));
  unary(Unary::RoundBf16, a, rounded_a.floats(), extent_a, 0.0f);
  unary(Unary::RoundBf16, b, rounded_b.floats(), extent_b, 0.0f);
  gemm(trans_a, trans_b, m, n, k, alpha, rounded_a.floats(), lda, stride_a, rounded_b.floats(), ldb, stride_b, beta, c,
       ldc, stride_c, batch);
}

}  // namespace

const kernels::Table& table() {
  static constexpr kernels::Table table{.name = "opencl", SF_TABLE_ENTRIES};
  return table;
}

}  // namespace sf::opencl_backend
