// Matrix products. One GEMM kernel covers every case: the transposed-operand
// flags let both the forward (Q K^T) and every backward product run without
// transpose copies.
#include "ops.h"
#include "ops_common.h"

namespace sf {
using namespace detail;

namespace {

struct MatrixDims {
  int64_t rows, cols;  // of op(X), the operand as the product uses it
  int64_t ld;          // leading dimension of X as stored
};

MatrixDims matrix_dims(const Tensor& x, bool transposed) {
  int64_t r = x.size(-2), c = x.size(-1);
  return transposed ? MatrixDims{c, r, c} : MatrixDims{r, c, c};
}

Shape batch_shape(const Tensor& x) { return Shape(x.shape().begin(), x.shape().end() - 2); }

// Batched product with broadcasting over batch dims. When an operand's batch is
// either complete or a single matrix, one strided kernel call does all of it;
// other broadcasts loop over the batch. `bf16_values`: float32 operands are
// rounded to bf16 as the kernel reads them.
Tensor matmul_forward(const Tensor& a, const Tensor& b, MatmulOptions o, bool bf16_values) {
  MatrixDims da = matrix_dims(a, o.trans_a), db = matrix_dims(b, o.trans_b);
  if (da.cols != db.rows)
    internal_fail("matmul: shapes ", to_string(a.shape()), (o.trans_a ? "^T" : ""), " and ",
                  to_string(b.shape()), (o.trans_b ? "^T" : ""), " do not multiply (", da.cols, " vs ",
                  db.rows, ")");
  int64_t m = da.rows, n = db.cols, k = da.cols;
  Shape batch = broadcast_shapes(batch_shape(a), batch_shape(b), "matmul (batch dims)");
  Shape out_shape = batch;
  out_shape.push_back(m);
  out_shape.push_back(n);
  Tensor out = empty_like_device(a, out_shape);
  int64_t count = numel(batch);
  if (count == 0 || m == 0 || n == 0) return out;

  // `entries` products from element offsets and batch strides into a and b.
  auto gemm = [&](int64_t offset_a, int64_t stride_a, int64_t offset_b, int64_t stride_b, int64_t offset_out,
                  int64_t entries) {
    const kernels::Table& kernels = kernels_of(a);
    if (a.dtype() == DType::BF16)
      kernels.gemm_bf16(o.trans_a, o.trans_b, m, n, k, 1.0f, a.bf16_mem() + offset_a, da.ld, stride_a,
                        b.bf16_mem() + offset_b, db.ld, stride_b, 0.0f, out.mem() + offset_out, n, m * n, entries);
    else {
      const auto product = bf16_values ? kernels.gemm_rounded_bf16 : kernels.gemm;
      product(o.trans_a, o.trans_b, m, n, k, 1.0f, a.mem() + offset_a, da.ld, stride_a, b.mem() + offset_b, db.ld,
              stride_b, 0.0f, out.mem() + offset_out, n, m * n, entries);
    }
  };
  int64_t size_a = a.size(-2) * a.size(-1), size_b = b.size(-2) * b.size(-1);
  int64_t count_a = numel(batch_shape(a)), count_b = numel(batch_shape(b));
  if ((count_a == count || count_a == 1) && (count_b == count || count_b == 1)) {
    gemm(0, count_a == 1 ? 0 : size_a, 0, count_b == 1 ? 0 : size_b, 0, count);
    return out;
  }
  Shape sa = broadcast_strides(batch_shape(a), batch), sb = broadcast_strides(batch_shape(b), batch);
  Shape index(batch.size(), 0);
  for (int64_t p = 0; p < count; ++p) {
    int64_t ia = 0, ib = 0;
    for (int64_t d = static_cast<int64_t>(batch.size()) - 1, rest = p; d >= 0; --d) {
      index[d] = rest % batch[d];
      rest /= batch[d];
      ia += index[d] * sa[d];
      ib += index[d] * sb[d];
    }
    gemm(ia * size_a, 0, ib * size_b, 0, p * m * n, 1);
  }
  return out;
}

// The product of operands that are both float32 or both bf16. `bf16_values`:
// it multiplies bf16 values (bf16 tensors, or float32 ones the kernel rounds
// as it reads them), and so do the backward's products, the output gradient
// rounded too.
Tensor product(const Tensor& a, const Tensor& b, MatmulOptions o, bool bf16_values) {
  if (a.dtype() != b.dtype() || (a.dtype() != DType::F32 && a.dtype() != DType::BF16))
    internal_fail("matmul: operands must be both float32 or both bfloat16, got ", to_string(a.dtype()), " and ",
                  to_string(b.dtype()));
  common_device(a, b, "matmul");
  if (a.ndim() < 2 || b.ndim() < 2)
    internal_fail("matmul: operands need 2 or more dims, got ", to_string(a.shape()), " and ",
                  to_string(b.shape()));
  // x [..., T, K] times a weight matrix: fold the batch into rows, so the
  // weight's gradient is one product summed over every row (no per-batch copies).
  if (b.ndim() == 2 && a.ndim() > 2 && !o.trans_a) {
    Shape out_shape = a.shape();
    out_shape.back() = o.trans_b ? b.size(0) : b.size(1);
    return reshape(product(reshape(a, {-1, a.size(-1)}), b, o, bf16_values), out_shape);
  }
  Tensor out = matmul_forward(a, b, o, bf16_values);
  // C = op(A) op(B): dop(A) = dC op(B)^T and dop(B) = op(A)^T dC, each written
  // in the layout A and B are stored in.
  // Saved for backward: the operands as multiplied, so bf16 ones keep half the
  // memory. The backward's products take their precision: g is rounded too.
  return record(out, "matmul", {a, b}, [a, b, o, bf16_values](const Tensor& output_grad) -> Grads {
    const Tensor g = a.dtype() == DType::BF16 ? to_dtype(output_grad, DType::BF16) : output_grad;
    Tensor ga, gb;
    if (a.requires_grad())
      ga = o.trans_a ? product(b, g, {.trans_a = o.trans_b, .trans_b = true}, bf16_values)
                     : product(g, b, {.trans_b = !o.trans_b}, bf16_values);
    if (b.requires_grad())
      gb = o.trans_b ? product(g, a, {.trans_a = true, .trans_b = o.trans_a}, bf16_values)
                     : product(a, g, {.trans_a = !o.trans_a}, bf16_values);
    return {ga.defined() ? sum_to(ga, a.shape()) : ga, gb.defined() ? sum_to(gb, b.shape()) : gb};
  });
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b, MatmulOptions o) {
  if (autocast_dtype() == DType::BF16 && (a.dtype() == DType::F32 || b.dtype() == DType::F32))
    return product(autocast_operand(a), autocast_operand(b), o, /*bf16_values=*/true);
  return product(a, b, o, /*bf16_values=*/a.dtype() == DType::BF16);
}

}  // namespace sf
