// OpenCL status codes turned into sf::Error: every cl* call of the backend goes
// through check(), so a failure names the call and the error.
#pragma once
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

namespace sf::opencl_backend {

// "CL_OUT_OF_RESOURCES" for -5, and so on.
const char* error_name(cl_int status);

// Throws sf::Error "opencl: <call> failed: <error name>" unless status is CL_SUCCESS.
void check(cl_int status, const char* call);

}  // namespace sf::opencl_backend
