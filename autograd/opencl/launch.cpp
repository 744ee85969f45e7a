#include "launch.h"

#include <string>

#include "../error.h"

namespace sf::opencl_backend::detail {
namespace {

std::string name_of(cl_kernel kernel) {
  char name[128] = {};
  clGetKernelInfo(kernel, CL_KERNEL_FUNCTION_NAME, sizeof name - 1, name, nullptr);
  return name;
}

}  // namespace

void set_arg(cl_kernel kernel, cl_uint index, size_t size, const void* value) {
  cl_int status = clSetKernelArg(kernel, index, size, value);
  if (status != CL_SUCCESS)
    internal_fail("opencl: clSetKernelArg failed for argument ", index, " of ", name_of(kernel), ": ",
                  error_name(status));
}

void enqueue(cl_kernel kernel, const Grid& grid) {
  cl_int status = clEnqueueNDRangeKernel(Runtime::get().queue(), kernel, grid.dims, nullptr,
                                         grid.global, grid.local, 0, nullptr, nullptr);
  if (status != CL_SUCCESS)
    fail("opencl: clEnqueueNDRangeKernel failed for ", name_of(kernel), ": ", error_name(status));
}

}  // namespace sf::opencl_backend::detail
