// The OpenCL C programs of the backend, compiled into the library (sources.cpp).
#pragma once
#include "gemm.h"
#include "runtime.h"

namespace sf::opencl_backend {

extern const Source kernels_source;     // every table entry but GEMM
extern const Source gemm_tiled_source;  // the tiled GEMM (GPU shapes)
// The blocked GEMM (CPU shapes) for kBlockings[index].
const Source& blocked_source(BlockingIndex index);

}  // namespace sf::opencl_backend
