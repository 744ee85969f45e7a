#include "ops_common.h"

namespace sf::detail {

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    // Align from the right; a missing dim counts as 1.
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1)
      internal_fail(op, ": shapes ", to_string(a), " and ", to_string(b), " do not broadcast (dim ", i,
                    ": ", da, " vs ", db, ")");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Shape broadcast_strides(const Shape& shape, const Shape& target) {
  Shape own = contiguous_strides(shape);
  Shape strides(target.size(), 0);
  size_t skip = target.size() - shape.size();
  for (size_t i = 0; i < shape.size(); ++i)
    strides[skip + i] = shape[i] == 1 && target[skip + i] != 1 ? 0 : own[i];
  return strides;
}

kernels::Rows broadcast_rows(const Shape& shape, const Shape& a, const Shape& b) {
  return rows_view(shape, {broadcast_strides(a, shape), broadcast_strides(b, shape)});
}

Device& common_device(const Tensor& a, const Tensor& b, const char* op) {
  if (&a.device() != &b.device())
    internal_fail(op, ": operands on different devices (", a.device().name(), " and ", b.device().name(),
                  "); move one with to()");
  return a.device();
}

int normalize_axis(int axis, int ndim, const char* op) {
  if (axis < -ndim || axis >= ndim) internal_fail(op, ": axis ", axis, " out of range for ", ndim, " dims");
  return axis < 0 ? axis + ndim : axis;
}

void require_float(const Tensor& t, const char* op) {
  if (t.dtype() != DType::F32) internal_fail(op, ": expected a float32 tensor, got ", to_string(t.dtype()));
}

Shape reduced_shape(const Shape& shape, int axis, bool keepdim) {
  Shape out = shape;
  if (keepdim)
    out[axis] = 1;
  else
    out.erase(out.begin() + axis);
  return out;
}

AxisView axis_view(const Shape& shape, int axis) {
  AxisView v{1, shape[axis], 1};
  for (int d = 0; d < axis; ++d) v.outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d) v.inner *= shape[d];
  return v;
}

}  // namespace sf::detail
