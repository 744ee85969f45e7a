// The OpenCL C programs of the backend, compiled into the library as strings.
#pragma once
#include "runtime.h"

namespace sf::opencl_backend {

extern const Source kernels_source;  // every table entry but GEMM (kernels_source.cpp)
extern const Source gemm_source;     // the tiled GEMM (gemm_source.cpp)

}  // namespace sf::opencl_backend
