#include "dims.h"

#include <limits>

#include "../error.h"

namespace sf::opencl_backend {
namespace {

constexpr int kMaxDims = 8;

cl_int8 pack(const std::vector<int64_t>& values, int64_t padding) {
  if (values.size() > kMaxDims) internal_fail("opencl: ", values.size(), " dims after merging; kernels take at most 8");
  cl_int8 packed;
  for (int d = 0; d < kMaxDims; ++d) {
    int64_t v = d < static_cast<int>(values.size()) ? values[d] : padding;
    if (v > std::numeric_limits<cl_int>::max() || v < std::numeric_limits<cl_int>::min())
      fail("opencl: a size or stride of ", v, " exceeds the kernels' int32 indexing");
    packed.s[d] = static_cast<cl_int>(v);
  }
  return packed;
}

}  // namespace

int64_t Dims::count() const {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

cl_int8 Dims::shape8() const {
  if (count() > std::numeric_limits<cl_int>::max())
    fail("opencl: ", count(), " elements exceed the kernels' int32 indexing");
  return pack(shape, 1);
}

cl_int8 Dims::strides8(int operand) const { return pack(strides[operand], 0); }

Dims simplify(const int64_t* shape, int ndim, std::initializer_list<const int64_t*> strides) {
  Dims dims;
  dims.strides.resize(strides.size());
  for (int d = 0; d < ndim; ++d) {
    if (shape[d] == 1) continue;
    bool merges = !dims.shape.empty();
    int k = 0;
    for (const int64_t* s : strides) merges = merges && dims.strides[k++].back() == s[d] * shape[d];
    if (merges) {
      // The previous dim and this one walk as one: this dim's strides, their sizes multiplied.
      dims.shape.back() *= shape[d];
      k = 0;
      for (const int64_t* s : strides) dims.strides[k++].back() = s[d];
    } else {
      dims.shape.push_back(shape[d]);
      k = 0;
      for (const int64_t* s : strides) dims.strides[k++].push_back(s[d]);
    }
  }
  return dims;
}

Rows split_rows(const Dims& dims) {
  Rows rows{Dims{}, 1, std::vector<int32_t>(dims.strides.size(), 0)};
  rows.outer.strides.resize(dims.strides.size());
  int inner = dims.ndim() - 1;
  if (inner >= 0) {
    dims.shape8();  // checks the count and every size
    rows.cols = static_cast<int32_t>(dims.shape[inner]);
    rows.outer.shape.assign(dims.shape.begin(), dims.shape.begin() + inner);
    for (size_t k = 0; k < dims.strides.size(); ++k) {
      dims.strides8(static_cast<int>(k));  // checks every stride
      rows.col_strides[k] = static_cast<int32_t>(dims.strides[k][inner]);
      rows.outer.strides[k].assign(dims.strides[k].begin(), dims.strides[k].begin() + inner);
    }
  }
  return rows;
}

std::vector<int64_t> contiguous_strides(const int64_t* shape, int ndim) {
  std::vector<int64_t> strides(ndim);
  int64_t stride = 1;
  for (int d = ndim - 1; d >= 0; --d) {
    strides[d] = stride;
    stride *= shape[d];
  }
  return strides;
}

}  // namespace sf::opencl_backend
