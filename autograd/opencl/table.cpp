// The launchers of the OpenCL kernel table: each prepares sizes (broadcast dims
// simplified on the host, see dims.h) and queues its kernel. One work item per
// 16 elements for elementwise and broadcasting ops (in groups of 64), a
// work-group per row for row-wise ones and an item per few columns for column
// sums (in the runtime's shapes), as kernels/common.cl and launch.h explain.
#include "table.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "../error.h"
#include "dims.h"
#include "gemm.h"
#include "launch.h"
#include "opencl.h"
#include "sources.h"

namespace sf::opencl_backend {
namespace {

using kernels::Binary;
using kernels::Predicate;
using kernels::Strided;
using kernels::Unary;

cl_kernel kernel(const char* name) { return Runtime::get().kernel(kernels_source, name); }

int32_t flag(bool value) { return value ? 1 : 0; }

// A size as the int32 the kernels take (sizes fit in int32, see dims.h).
int32_t int32(int64_t size) {
  if (size > std::numeric_limits<int32_t>::max())
    fail("opencl: a size of ", size, " exceeds the kernels' int32 indexing");
  return static_cast<int32_t>(size);
}

// Launches a broadcasting kernel over rows in pieces (launch.h): its leading
// arguments, then the rows and columns, the outer dims with the two operands'
// strides along them, and their strides along a row.
template <class... Leading>
void launch_broadcast(const char* name, const int64_t* shape, int ndim, const int64_t* strides_a,
                      const int64_t* strides_b, const Leading&... leading) {
  Rows r = split_rows(simplify(shape, ndim, {strides_a, strides_b}));
  launch(kernel(name), items(pieces(r.rows(), r.cols)), leading..., r.rows(), r.cols, r.outer.ndim(), r.outer.shape8(),
         r.outer.strides8(0), r.outer.strides8(1), r.col_strides[0], r.col_strides[1]);
}

void binary(Binary op, Strided<float, Mem> a, Strided<float, Mem> b, Mem<float> out, const int64_t* shape,
            int ndim) {
  launch_broadcast("binary", shape, ndim, a.strides, b.strides, static_cast<int32_t>(op), a.data, b.data, out);
}

void predicate(Predicate op, Strided<float, Mem> a, Strided<float, Mem> b, Mem<int32_t> out,
               const int64_t* shape, int ndim) {
  launch_broadcast("predicate", shape, ndim, a.strides, b.strides, static_cast<int32_t>(op), a.data, b.data,
                   out);
}

void predicate_int(Predicate op, Strided<int32_t, Mem> a, Strided<int32_t, Mem> b, Mem<int32_t> out,
                   const int64_t* shape, int ndim) {
  launch_broadcast("predicate_int", shape, ndim, a.strides, b.strides, static_cast<int32_t>(op), a.data,
                   b.data, out);
}

void fill_where(Strided<float, Mem> x, Strided<int32_t, Mem> where, float value, Mem<float> out,
                const int64_t* shape, int ndim) {
  launch_broadcast("fill_where", shape, ndim, x.strides, where.strides, x.data, where.data, value, out);
}

void permute(Mem<const float> x, const int64_t* shape, const int* perm, int ndim, Mem<float> y) {
  // Walk y in order, reading x through its strides permuted to y's dims.
  std::vector<int64_t> x_strides = contiguous_strides(shape, ndim), y_shape(ndim), read(ndim);
  for (int d = 0; d < ndim; ++d) {
    y_shape[d] = shape[perm[d]];
    read[d] = x_strides[perm[d]];
  }
  strided_copy(x, y_shape.data(), read.data(), ndim, y);
}

void sum_to(Mem<const float> x, const int64_t* shape, int ndim, Mem<float> out, const int64_t* out_strides) {
  // Split the dims into those out keeps (rows in column pieces, one work item
  // each) and those it sums away (stride 0: each item's loop).
  std::vector<int64_t> x_strides = contiguous_strides(shape, ndim);
  Dims dims = simplify(shape, ndim, {x_strides.data(), out_strides});
  Dims kept, reduced;
  kept.strides.resize(2);
  reduced.strides.resize(1);
  for (int d = 0; d < dims.ndim(); ++d) {
    if (dims.strides[1][d] != 0) {
      kept.shape.push_back(dims.shape[d]);
      kept.strides[0].push_back(dims.strides[0][d]);
      kept.strides[1].push_back(dims.strides[1][d]);
    } else {
      reduced.shape.push_back(dims.shape[d]);
      reduced.strides[0].push_back(dims.strides[0][d]);
    }
  }
  if (dims.count() == 0) {  // x is empty: every sum is over nothing, so out is 0
    int64_t out_count = 1;
    for (int d = 0; d < ndim; ++d)
      if (out_strides[d] != 0) out_count *= shape[d];
    opencl().fill(Mem<void>(out), 0u, static_cast<size_t>(out_count));
    return;
  }
  Rows rows = split_rows(kept);
  cl_int8 reduced_shape = reduced.shape8();
  launch(kernel("sum_to"), column_items(rows.rows(), rows.cols), x, out, rows.rows(), rows.cols,
         rows.outer.ndim(), rows.outer.shape8(), rows.outer.strides8(0), rows.outer.strides8(1),
         rows.col_strides[0], rows.col_strides[1], static_cast<int32_t>(reduced.count()), reduced.ndim(),
         reduced_shape, reduced.strides8(0));
}

void unary(Unary op, Mem<const float> x, Mem<float> y, int64_t n, float s) {
  launch(kernel("unary"), vectors(n), static_cast<int32_t>(op), x, y, n, s);
}

void sum_axis(Mem<const float> x, int64_t outer, int64_t n, int64_t inner, Mem<float> out) {
  launch(kernel("sum_axis"), column_items(outer, inner), x, int32(outer), int32(n), int32(inner), out);
}

void max_axis(Mem<const float> x, int64_t outer, int64_t n, int64_t inner, Mem<float> out, Mem<int32_t> arg) {
  launch(kernel("max_axis"), items(outer * inner), x, outer, n, inner, out, arg, flag(bool(arg)));
}

void log_softmax(Mem<const float> x, Mem<float> y, int64_t rows, int64_t cols) {
  launch(kernel("log_softmax"), row_groups(rows), x, y, rows, cols);
}

void log_softmax_backward(Mem<const float> y, Mem<const float> dy, Mem<float> dx, int64_t rows, int64_t cols) {
  launch(kernel("log_softmax_backward"), row_groups(rows), y, dy, dx, rows, cols);
}

// The masked softmax kernels' mask arguments: whether there is a mask, the
// row dims (all but the last, merged where the mask allows) with the mask's
// strides along them, and its stride along a row.
struct MaskLayout {
  int32_t has_mask, row_ndim;
  cl_int8 row_shape, row_strides;
  int32_t col_stride, rows, cols;
};

MaskLayout mask_layout(Strided<int32_t, Mem> mask, const int64_t* shape, int ndim) {
  Dims row_dims = mask.data ? simplify(shape, ndim - 1, {mask.strides}) : Dims{{}, {{}}};
  int64_t rows = 1;
  for (int d = 0; d < ndim - 1; ++d) rows *= shape[d];
  return {flag(bool(mask.data)), row_dims.ndim(), row_dims.shape8(), row_dims.strides8(0),
          mask.data ? static_cast<int32_t>(mask.strides[ndim - 1]) : 0,
          static_cast<int32_t>(rows), static_cast<int32_t>(shape[ndim - 1])};
}

void masked_softmax(Mem<const float> x, Strided<int32_t, Mem> keep, const int64_t* shape, int ndim, float scale,
                    Mem<float> y) {
  MaskLayout m = mask_layout(keep, shape, ndim);
  launch(kernel("masked_softmax"), row_groups(m.rows), x, keep.data, m.has_mask, m.row_ndim, m.row_shape,
         m.row_strides, m.col_stride, m.rows, m.cols, scale, y);
}

void masked_softmax_backward(Mem<const float> y, Mem<const float> dy, Strided<int32_t, Mem> keep,
                             const int64_t* shape, int ndim, float scale, Mem<float> dx) {
  MaskLayout m = mask_layout(keep, shape, ndim);
  launch(kernel("masked_softmax_backward"), row_groups(m.rows), y, dy, keep.data, m.has_mask, m.row_ndim,
         m.row_shape, m.row_strides, m.col_stride, m.rows, m.cols, scale, dx);
}

void layer_norm(Mem<const float> x, Mem<const float> alpha, Mem<const float> bias, int64_t rows, int64_t cols,
                float eps, Mem<float> y, Mem<float> mean, Mem<float> std) {
  launch(kernel("layer_norm"), row_groups(rows), x, alpha, bias, rows, cols, eps, y, mean, std);
}

void layer_norm_backward(Mem<const float> x, Mem<const float> alpha, Mem<const float> mean, Mem<const float> std,
                         Mem<const float> dy, int64_t rows, int64_t cols, float eps, Mem<float> dx,
                         Mem<float> dalpha, Mem<float> dbias) {
  launch(kernel("layer_norm_backward_rows"), row_groups(rows), x, alpha, mean, std, dy, rows, cols, eps, dx);
  launch(kernel("layer_norm_backward_columns"), column_items(1, cols), x, mean, std, dy, int32(rows),
         int32(cols), eps, dalpha, dbias);
}

void bias_relu(Mem<const float> x, Mem<const float> bias, int64_t rows, int64_t cols, Mem<float> y) {
  launch(kernel("bias_relu"), items(pieces(rows, cols)), x, bias, int32(rows), int32(cols), y);
}

void relu_backward(Mem<const float> y, Mem<const float> dy, Mem<float> dx, int64_t n) {
  launch(kernel("relu_backward"), vectors(n), y, dy, dx, n);
}

void dropout(Mem<const float> x, Mem<float> y, int64_t n, float scale, uint32_t seed, uint32_t threshold) {
  launch(kernel("dropout"), vectors(n), x, y, n, scale, seed, threshold);
}

// Partial sums (at most 4096 of them), then their sum, all on the device: the
// in-order queue lets the next dot reuse the scratch buffer.
void dot(Mem<const float> a, Mem<const float> b, int64_t n, Mem<float> out) {
  size_t partials = std::clamp<size_t>(round_up(std::max<int64_t>(n, 0), 64), 64, 4096);
  Mem<float> scratch(Runtime::get().scratch(partials * sizeof(float)), 0);
  launch(kernel("dot_partials"), items(partials), a, b, n, scratch);
  launch(kernel("sum_partials"), items(1), scratch, static_cast<int32_t>(partials), out);
}

void adam_step(Mem<float> p, Mem<const float> g, Mem<float> m, Mem<float> v, int64_t n, float step_size, float b1,
               float b2, float eps, float sqrt_bc2, float l2, float decay) {
  launch(kernel("adam_step"), vectors(n), p, g, m, v, n, step_size, b1, b2, eps, sqrt_bc2, l2, decay);
}

void sgd_step(Mem<float> p, Mem<const float> g, Mem<float> buf, int64_t n, float lr, float momentum, float l2,
              bool nesterov, bool first) {
  launch(kernel("sgd_step"), vectors(n), p, g, buf, flag(bool(buf)), n, lr, momentum, l2, flag(nesterov),
         flag(first));
}

void topk(Mem<const float> x, int64_t rows, int64_t cols, int64_t k, Mem<float> values, Mem<int32_t> indices) {
  launch(kernel("topk"), items(rows), x, rows, cols, k, values, indices);
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
  launch(kernel("gather_rows"), items(pieces(n, dim)), table, rows_in(table, dim), ids, int32(n),
         int32(dim), out);
}

void scatter_add_rows(Mem<const float> grad_out, Mem<const int32_t> ids, int64_t n, int64_t dim,
                      Mem<float> grad_table) {
  if (n * dim == 0) return;
  launch(kernel("scatter_add_rows"), column_items(1, dim), grad_out, ids, int32(n), int32(dim), grad_table,
         rows_in(grad_table, dim));
}

void cross_entropy(Mem<const float> logits, Mem<const int32_t> targets, int64_t rows, int64_t cols,
                   int32_t ignore_index, float eps, Mem<float> row_loss, Mem<float> row_counted,
                   Mem<float> log_probs) {
  launch(kernel("cross_entropy"), row_groups(rows), logits, targets, rows, cols, ignore_index, eps, row_loss,
         row_counted, log_probs);
}

void cross_entropy_backward(Mem<const float> log_probs, Mem<const int32_t> targets, int64_t rows, int64_t cols,
                            int32_t ignore_index, float eps, Mem<const float> scale, Mem<float> dlogits) {
  launch(kernel("cross_entropy_backward"), row_groups(rows), log_probs, targets, rows, cols, ignore_index, eps,
         scale, dlogits);
}

}  // namespace

void strided_copy(Mem<const float> x, const int64_t* shape, const int64_t* strides, int ndim, Mem<float> y) {
  Rows r = split_rows(simplify(shape, ndim, {strides}));
  launch(kernel("strided_copy"), items(pieces(r.rows(), r.cols)), x, y, r.rows(), r.cols, r.outer.ndim(),
         r.outer.shape8(), r.outer.strides8(0), r.col_strides[0]);
}

const kernels::Table& table() {
  static constexpr kernels::Table table{.name = "opencl", SF_TABLE_ENTRIES};
  return table;
}

}  // namespace sf::opencl_backend
