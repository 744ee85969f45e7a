// The OpenCL C programs of the backend, compiled into the library (sources.cpp).
#pragma once
#include <cstddef>
#include <cstdint>

#include "gemm.h"
#include "runtime.h"

namespace sf::opencl_backend {

// The kernels of kernels_source (every table entry but GEMM), each named
// once, here: the launchers name them by enumerator, so a misspelt name does
// not compile, and building the program creates every one, so a name the .cl
// files lack fails when the backend loads, naming it.
#define SF_OPENCL_KERNELS(X)                                                                          \
  X(binary) X(predicate) X(predicate_int) X(fill_where) X(copy_strided) X(sum_to) X(unary) X(max_axis) \
  X(log_softmax) X(log_softmax_backward) X(masked_softmax) X(masked_softmax_backward) X(layer_norm) \
  X(layer_norm_backward_rows) X(layer_norm_backward_columns) X(layer_norm_backward_blocks) X(bias_relu) \
  X(relu_backward) X(dropout) X(dropout_add) X(dot_partials) X(sum_partials) X(adam_step) X(sgd_step) X(topk) \
  X(gather_rows) X(scatter_add_rows) X(cross_entropy) X(cross_entropy_backward) X(float_to_bf16) X(bf16_to_float)
enum class Kernel {
#define SF_KERNEL_ENUMERATOR(name) name,
  SF_OPENCL_KERNELS(SF_KERNEL_ENUMERATOR)
#undef SF_KERNEL_ENUMERATOR
};
cl_kernel kernel(Kernel which);

extern const Source kernels_source;     // every table entry but GEMM
// The tiled GEMM (GPU shapes) for kTilings[index], and a digest of what
// every tiling's program is built from (its text and options), which the
// tuning cache keys on: a changed kernel is tuned anew.
const Source& tiled_source(size_t index);
uint64_t tiled_sources_digest();
// The blocked GEMM (CPU shapes) for kBlockings[index].
const Source& blocked_source(BlockingIndex index);

}  // namespace sf::opencl_backend
