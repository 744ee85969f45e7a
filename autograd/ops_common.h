// Helpers shared by the op implementations (not part of the public API).
#pragma once
#include "engine.h"
#include "base/error.h"
#include "kernels/kernels.h"
#include "tensor.h"

namespace sf::detail {

using kernels::rows_view;

inline const kernels::Table& kernels_of(const Tensor& t) { return t.device().kernels(); }

// A new tensor on the same device as `like` (ops put results beside their inputs).
inline Tensor empty_like_device(const Tensor& like, const Shape& shape, DType dtype = DType::F32) {
  return Tensor::empty(shape, dtype, like.device());
}

// The device both operands live on, or an error naming `op`.
Device& common_device(const Tensor& a, const Tensor& b, const char* op);

// Token ids, targets and masks are built on the host, where ops validate their
// values; an op whose float operand lives on another device takes them there.
inline Tensor beside(const Tensor& host_ints, const Tensor& like) {
  return host_ints.to(like.device());
}

// The shape both operands broadcast to (NumPy rules), or an error naming `op`.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

// Element strides that read `shape` as if it had been broadcast to `target`
// (0 along broadcast dims), one per dim of `target`.
Shape broadcast_strides(const Shape& shape, const Shape& target);

// The Rows view (kernels.h) of an op over `shape` reading operands of shapes
// a and b, each broadcast to it.
kernels::Rows broadcast_rows(const Shape& shape, const Shape& a, const Shape& b);

// Maps a possibly negative axis into [0, ndim), or an error naming `op`.
int normalize_axis(int axis, int ndim, const char* op);

void require_float(const Tensor& t, const char* op);

// The shape with dim `axis` removed (or set to 1 with keepdim).
Shape reduced_shape(const Shape& shape, int axis, bool keepdim);

// Splits `shape` around `axis` into the [outer, n, inner] view reductions use.
struct AxisView {
  int64_t outer, n, inner;
};
AxisView axis_view(const Shape& shape, int axis);

}  // namespace sf::detail
