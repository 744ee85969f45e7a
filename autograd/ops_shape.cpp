// Shape ops. reshape aliases the storage; the others copy into a new
// contiguous tensor (every tensor is contiguous, which keeps kernels simple).
#include <numeric>

#include "ops.h"
#include "ops_common.h"

namespace sf {
using namespace detail;

Tensor reshape(const Tensor& x, const Shape& shape) {
  Shape target = shape;
  int64_t known = 1, inferred = -1;
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i] == -1) {
      if (inferred >= 0) internal_fail("reshape: more than one -1 in ", to_string(shape));
      inferred = static_cast<int64_t>(i);
    } else if (target[i] < 0) {
      internal_fail("reshape: negative size in ", to_string(shape));
    } else {
      known *= target[i];
    }
  }
  if (inferred >= 0 && known != 0 && x.numel() % known == 0) target[inferred] = x.numel() / known;
  if (numel(target) != x.numel() || (inferred >= 0 && target[inferred] < 0))
    internal_fail("reshape: cannot view ", to_string(x.shape()), " (", x.numel(), " elements) as ",
                  to_string(shape));
  Tensor out = x.alias(target);
  return record(out, "reshape", {x}, [sx = x.shape()](const Tensor& g) -> Grads {
    return {reshape(g, sx)};
  });
}

Tensor unsqueeze(const Tensor& x, int axis) {
  Shape shape = x.shape();
  axis = normalize_axis(axis, x.ndim() + 1, "unsqueeze");
  shape.insert(shape.begin() + axis, 1);
  return reshape(x, shape);
}

Tensor permute(const Tensor& x, const std::vector<int>& dims) {
  require_float(x, "permute");
  int n = x.ndim();
  std::vector<int> perm(dims.size());
  std::vector<bool> seen(n, false);
  if (static_cast<int>(dims.size()) != n) internal_fail("permute: ", dims.size(), " dims for a ", n, "-d tensor");
  for (int i = 0; i < n; ++i) {
    perm[i] = normalize_axis(dims[i], n, "permute");
    if (seen[perm[i]]) internal_fail("permute: dim ", dims[i], " repeated");
    seen[perm[i]] = true;
  }
  Shape out_shape(n);
  for (int i = 0; i < n; ++i) out_shape[i] = x.shape()[perm[i]];
  Tensor out = empty_like_device(x, out_shape);
  // Walk out in order, reading x through its strides permuted to out's dims.
  Shape x_strides = contiguous_strides(x.shape()), read(n);
  for (int i = 0; i < n; ++i) read[i] = x_strides[perm[i]];
  kernels_of(x).copy_strided(x.mem(), out.mem(), rows_view(out_shape, {read}));
  return record(out, "permute", {x}, [perm](const Tensor& g) -> Grads {
    std::vector<int> inverse(perm.size());
    for (size_t i = 0; i < perm.size(); ++i) inverse[perm[i]] = static_cast<int>(i);
    return {permute(g, inverse)};
  });
}

Tensor transpose(const Tensor& x, int dim0, int dim1) {
  std::vector<int> dims(x.ndim());
  std::iota(dims.begin(), dims.end(), 0);
  std::swap(dims[normalize_axis(dim0, x.ndim(), "transpose")],
            dims[normalize_axis(dim1, x.ndim(), "transpose")]);
  return permute(x, dims);
}

// Seen as [outer, n, inner] around the axis, each input is `outer` rows of
// n_i * inner elements, placed side by side in the output's rows.
Tensor concat(const std::vector<Tensor>& xs, int axis) {
  if (xs.empty()) internal_fail("concat: no tensors");
  const Tensor& first = xs[0];
  axis = normalize_axis(axis, first.ndim(), "concat");
  Shape out_shape = first.shape();
  out_shape[axis] = 0;
  for (const Tensor& x : xs) {
    Shape expect = first.shape();
    if (x.ndim() == first.ndim()) expect[axis] = x.size(axis);
    if (x.shape() != expect || x.dtype() != first.dtype())
      internal_fail("concat: ", to_string(x.shape()), " (", to_string(x.dtype()), ") does not match ",
                    to_string(first.shape()), " (", to_string(first.dtype()), ") outside axis ", axis);
    out_shape[axis] += x.size(axis);
  }
  Tensor out = empty_like_device(first, out_shape, first.dtype());
  AxisView v = axis_view(out_shape, axis);
  int64_t out_row = v.n * v.inner * element_bytes(first.dtype()), offset = 0;
  std::vector<int64_t> sizes;
  for (const Tensor& x : xs) {
    int64_t row = x.size(axis) * v.inner * element_bytes(first.dtype());
    common_device(x, first, "concat");
    kernels_of(x).copy_rows(x.raw_mem(), row, out.raw_mem() + offset, out_row, v.outer, row);
    offset += row;
    sizes.push_back(x.size(axis));
  }
  if (first.dtype() != DType::F32) return out;
  return record(out, "concat", xs, [sizes, axis](const Tensor& g) -> Grads {
    Grads grads;
    int64_t start = 0;
    for (int64_t n : sizes) {
      grads.push_back(slice(g, axis, start, start + n));
      start += n;
    }
    return grads;
  });
}

Tensor slice(const Tensor& x, int axis, int64_t start, int64_t end) {
  axis = normalize_axis(axis, x.ndim(), "slice");
  int64_t n = x.size(axis);
  if (start < 0 || end > n || start > end)
    internal_fail("slice: [", start, ", ", end, ") out of range for size ", n, " on axis ", axis);
  Shape out_shape = x.shape();
  out_shape[axis] = end - start;
  Tensor out = empty_like_device(x, out_shape, x.dtype());
  AxisView v = axis_view(x.shape(), axis);
  const int64_t bytes = element_bytes(x.dtype()), row = (end - start) * v.inner * bytes;
  kernels_of(x).copy_rows(x.raw_mem() + start * v.inner * bytes, n * v.inner * bytes, out.raw_mem(), row, v.outer,
                          row);
  if (x.dtype() != DType::F32) return out;
  // The adjoint pads the gradient with zeros back to x's extent.
  return record(out, "slice", {x}, [sx = x.shape(), axis, start, end](const Tensor& g) -> Grads {
    Shape before = sx, after = sx;
    before[axis] = start;
    after[axis] = sx[axis] - end;
    return {concat({Tensor::zeros(before, DType::F32, g.device()), g,
                    Tensor::zeros(after, DType::F32, g.device())},
                   axis)};
  });
}

}  // namespace sf
