// The OpenCL C programs, compiled into the library: the build turns each .cl
// file of kernels/ and autograd/kernels/shared.h into a raw string literal in
// $(BUILD)/gen/ (the Makefile's "OpenCL C sources"), which is included here.
// So the library never reads a .cl file at run time, and editing one rebuilds
// it. A program is the concatenation of its texts; the options give each
// program its sizes.
#include "sources.h"

#include <iterator>
#include <string>
#include <vector>

#include "base/digest.h"
#include "launch.h"

namespace sf::opencl_backend {
namespace {

const char shared_h[] =
#include "autograd/kernels/shared.h.inc"
    ;
const char common_cl[] =
#include "autograd/opencl/kernels/common.cl.inc"
    ;
const char elementwise_cl[] =
#include "autograd/opencl/kernels/elementwise.cl.inc"
    ;
const char reductions_cl[] =
#include "autograd/opencl/kernels/reductions.cl.inc"
    ;
const char rows_cl[] =
#include "autograd/opencl/kernels/rows.cl.inc"
    ;
const char indexing_cl[] =
#include "autograd/opencl/kernels/indexing.cl.inc"
    ;
const char optimizer_cl[] =
#include "autograd/opencl/kernels/optimizer.cl.inc"
    ;
const char gemm_tiled_cl[] =
#include "autograd/opencl/kernels/gemm_tiled.cl.inc"
    ;
const char gemm_blocked_cl[] =
#include "autograd/opencl/kernels/gemm_blocked.cl.inc"
    ;

std::string define(const char* name, int value) { return " -D" + std::string(name) + "=" + std::to_string(value); }

Source blocked_program(const Blocked& blocking) {
  return {"gemm_blocked " + std::to_string(blocking.rm) + "x" + std::to_string(blocking.nv),
          {gemm_blocked_cl},
          define("VW", Blocked::VW) + define("NV", blocking.nv) + define("RM", blocking.rm),
          {"gemm_pack", "gemm_blocked"}};
}

}  // namespace

#define SF_KERNEL_NAME(name) #name,
const Source kernels_source{"kernels",
                            {shared_h, common_cl, elementwise_cl, reductions_cl, rows_cl, indexing_cl, optimizer_cl},
                            "",
                            {SF_OPENCL_KERNELS(SF_KERNEL_NAME)}};
#undef SF_KERNEL_NAME

cl_kernel kernel(Kernel which) {
  return Runtime::get().kernel(kernels_source, kernels_source.kernels[static_cast<size_t>(which)]);
}

const Source& tiled_source(size_t index) {
  static const std::vector<Source> sources = [] {
    std::vector<Source> all;
    for (const Tiling& t : kTilings)
      all.push_back({"gemm_tiled " + tiling_name(t),
                     {gemm_tiled_cl},
                     define("LX", t.lx) + define("LY", t.ly) + define("WM", t.wm) + define("WN", t.wn) +
                         define("TK", t.tk),
                     {"gemm", "gemm_split_sum"}});
    return all;
  }();
  return sources.at(index);
}

uint64_t tiled_sources_digest() {
  Digest digest;
  for (size_t i = 0; i < kTilingCount; ++i) {
    for (const char* text : tiled_source(i).texts) digest.add(std::string(text));
    digest.add(tiled_source(i).options);
  }
  return digest.value();
}

const Source& blocked_source(BlockingIndex index) {
  static const Source sources[] = {blocked_program(kBlockings[kWide]), blocked_program(kBlockings[kMedium]),
                                   blocked_program(kBlockings[kNarrow])};
  static_assert(std::size(sources) == std::size(kBlockings));
  return sources[index];
}

}  // namespace sf::opencl_backend
