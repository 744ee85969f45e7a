#include "ops_common.h"

#include <array>

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

kernels::Rows rows_view(const Shape& shape, std::initializer_list<Shape> strides, bool whole_rows) {
  using kernels::Rows;
  // Merge outer to inner: dim d joins the previous one where every operand's
  // previous stride is its stride along d times d's size (it walks both as one).
  Shape dims;
  std::vector<std::array<int64_t, 2>> steps;
  size_t last = shape.size() - 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    bool row_dim = whole_rows && d == last;
    if (shape[d] == 1 && !row_dim) continue;
    std::array<int64_t, 2> step{};
    int k = 0;
    for (const Shape& s : strides) step[k++] = s[d];
    bool merges = !dims.empty() && !row_dim;
    for (int i = 0; i < 2; ++i) merges = merges && steps.back()[i] == step[i] * shape[d];
    if (merges) {
      dims.back() *= shape[d];
      steps.back() = step;
    } else {
      dims.push_back(shape[d]);
      steps.push_back(step);
    }
  }
  Rows rows;
  if (dims.empty()) return rows;  // one element: one row of one column
  rows.cols = dims.back();
  rows.col_strides[0] = steps.back()[0];
  rows.col_strides[1] = steps.back()[1];
  rows.ndim = static_cast<int>(dims.size()) - 1;
  if (rows.ndim > Rows::kMaxDims)
    internal_fail("an op over ", to_string(shape), " walks ", rows.ndim, " outer dims; kernels take at most ",
                  Rows::kMaxDims);
  for (int d = 0; d < rows.ndim; ++d) {
    rows.count *= dims[d];
    rows.shape[d] = dims[d];
    rows.strides[0][d] = steps[d][0];
    rows.strides[1][d] = steps[d][1];
  }
  return rows;
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
