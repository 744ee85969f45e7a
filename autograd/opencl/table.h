// The OpenCL kernel table: each entry launches the OpenCL C kernel of the
// same name (kernels/*.cl).
#pragma once
#include "../kernels/kernels.h"

namespace sf::opencl_backend {

const kernels::Table& table();

// y[i] = x[offset of index i of `shape` under `strides`], y contiguous: the
// permute kernel.
void strided_copy(kernels::Mem<const float> x, const int64_t* shape, const int64_t* strides, int ndim,
                  kernels::Mem<float> y);

}  // namespace sf::opencl_backend
