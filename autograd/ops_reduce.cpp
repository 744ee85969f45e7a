// Reductions over an axis, and sum_to, the adjoint of broadcasting.
#include "ops.h"
#include "ops_common.h"

namespace sf {
using namespace detail;

// x summed into a new tensor of `shape`, to which x's shape broadcasts.
static Tensor sum_into(const Tensor& x, const Shape& shape) {
  if (x.numel() == 0) return Tensor::zeros(shape, DType::F32, x.device());  // sums over nothing
  Tensor out = empty_like_device(x, shape);
  kernels_of(x).sum_to(x.mem(), out.mem(), broadcast_rows(x.shape(), x.shape(), shape));
  return out;
}

Tensor sum_to(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  if (broadcast_shapes(shape, x.shape(), "sum_to") != x.shape())
    internal_fail("sum_to: cannot sum ", to_string(x.shape()), " down to ", to_string(shape));
  Tensor out = sum_into(x, shape);
  // Summing is linear: its adjoint broadcasts the gradient back.
  return record(out, "sum_to", {x}, [sx = x.shape()](const Tensor& g) -> Grads {
    return {broadcast_to(g, sx)};
  });
}

// Adding zeros of the target shape broadcasts; add's backward is sum_to.
Tensor broadcast_to(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  if (broadcast_shapes(x.shape(), shape, "broadcast_to") != shape)
    internal_fail("broadcast_to: cannot broadcast ", to_string(x.shape()), " to ", to_string(shape));
  return x + Tensor::zeros(shape, DType::F32, x.device());
}

Tensor sum(const Tensor& x) { return sum(reshape(x, {x.numel()}), 0); }

Tensor sum(const Tensor& x, int axis, bool keepdim) {
  require_float(x, "sum");
  axis = normalize_axis(axis, x.ndim(), "sum");
  // The sum keeping the axis as size 1, seen without it unless keepdim.
  Tensor out = sum_into(x, reduced_shape(x.shape(), axis, true)).alias(reduced_shape(x.shape(), axis, keepdim));
  return record(out, "sum", {x}, [sx = x.shape(), axis](const Tensor& g) -> Grads {
    // Put the reduced axis back as size 1, then broadcast.
    return {broadcast_to(reshape(g, reduced_shape(sx, axis, true)), sx)};
  });
}

Tensor mean(const Tensor& x) { return sum(x) / static_cast<float>(x.numel()); }

Tensor mean(const Tensor& x, int axis, bool keepdim) {
  int64_t n = x.size(axis);
  return sum(x, axis, keepdim) / static_cast<float>(n);
}

Tensor max(const Tensor& x, int axis, bool keepdim) {
  require_float(x, "max");
  axis = normalize_axis(axis, x.ndim(), "max");
  if (x.size(axis) == 0) internal_fail("max: empty axis ", axis, " in ", to_string(x.shape()));
  AxisView v = axis_view(x.shape(), axis);
  Shape kept = reduced_shape(x.shape(), axis, true);
  Tensor out = empty_like_device(x, reduced_shape(x.shape(), axis, keepdim));
  Tensor arg = empty_like_device(x, kept, DType::I32);
  kernels_of(x).max_axis(x.mem(), v.outer, v.n, v.inner, out.mem(), arg.int_mem());
  // The gradient flows to the (first) maximum only.
  return record(out, "max", {x}, [sx = x.shape(), kept, axis, arg](const Tensor& g) -> Grads {
    Shape position(sx.size(), 1);
    position[axis] = sx[axis];
    Tensor along = reshape(arange(sx[axis], g.device()), position);
    return {fill_where(broadcast_to(reshape(g, kept), sx), ne(along, arg), 0.0f)};
  });
}

// var = sum((x - mean)^2) / (n - 1), composed from differentiable ops.
Tensor var(const Tensor& x, int axis, bool keepdim) {
  int64_t n = x.size(axis);
  if (n < 2) internal_fail("var: the unbiased variance needs 2 or more values along axis ", axis);
  Tensor centered = x - mean(x, axis, true);
  return sum(centered * centered, axis, keepdim) / static_cast<float>(n - 1);
}

Tensor stddev(const Tensor& x, int axis, bool keepdim) { return sqrt(var(x, axis, keepdim)); }

}  // namespace sf
