// Host-side preparation of broadcasting ops: the shape and per-operand strides
// simplified to as few dims as possible, then packed as the int8 vectors the
// kernels take.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <vector>

#include "errors.h"

namespace sf::opencl_backend {

struct Dims {
  std::vector<int64_t> shape;
  std::vector<std::vector<int64_t>> strides;  // one list per operand, one stride per dim

  int ndim() const { return static_cast<int>(shape.size()); }
  int64_t count() const;  // elements (1 for no dims)
  // Fails unless the dims fit the kernels: at most 8, indices within int32.
  cl_int8 shape8() const;
  cl_int8 strides8(int operand) const;
};

// The dims of an op over `shape` whose operands walk it with the given per-dim
// strides (0 where broadcast), with size-1 dims dropped and neighbours merged
// where every operand walks them as one dim (stride[d] = stride[d+1] shape[d+1]).
// The element order (row-major over shape) is unchanged.
Dims simplify(const int64_t* shape, int ndim, std::initializer_list<const int64_t*> strides);

// Dims seen as rows of their innermost dim, the way the broadcasting kernels
// walk them: `outer` holds the other dims (rows() of them in all) with each
// operand's strides, `cols` the innermost dim's size and `col_strides` each
// operand's stride along it. No dims at all (a single element) is one row of
// one column, every stride 0.
struct Rows {
  Dims outer;
  int32_t cols;
  std::vector<int32_t> col_strides;  // one per operand

  int32_t rows() const { return static_cast<int32_t>(outer.count()); }
};
// Fails unless the rows fit the kernels (as Dims::shape8).
Rows split_rows(const Dims& dims);

// Row-major strides of a contiguous array of `shape`.
std::vector<int64_t> contiguous_strides(const int64_t* shape, int ndim);

}  // namespace sf::opencl_backend
