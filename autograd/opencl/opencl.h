// The OpenCL backend: a `Device` whose buffers are cl_mem objects and whose
// kernel table runs OpenCL C kernels (autograd/opencl/, built with OPENCL=1).
#pragma once
#include "../device.h"

namespace sf {

// The process-wide OpenCL device, created on first use: the first GPU of any
// platform, else the first OpenCL device (for data-parallel ranks sharing a
// machine, the local_rank()-th, see device.h); SCRATCHFORMER_OPENCL_DEVICE=N
// picks the N-th device (0-based, platforms in order, then their devices;
// runtime.h: choose_device). Throws sf::Error when no device can be had.
Device& opencl();

}  // namespace sf
