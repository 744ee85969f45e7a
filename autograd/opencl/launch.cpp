#include "launch.h"

#include <limits>
#include <string>

#include "base/error.h"

namespace sf::opencl_backend {

int32_t int32(int64_t value) {
  if (value > std::numeric_limits<int32_t>::max() || value < std::numeric_limits<int32_t>::min())
    fail("opencl: a size or stride of ", value, " exceeds the kernels' int32 indexing");
  return static_cast<int32_t>(value);
}

namespace detail {
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

void add_arg(cl_kernel kernel, cl_uint& index, const kernels::Rows& rows) {
  static_assert(sizeof(kernels::PackedRows) == (3 + 3 * kernels::Rows::kMaxDims + 2) * sizeof(int32_t));
  int32(rows.count * rows.cols);  // the elements, which bound every offset
  kernels::PackedRows packed{int32(rows.count), int32(rows.cols), rows.ndim, {}, {},
                             {int32(rows.col_strides[0]), int32(rows.col_strides[1])}};
  for (int d = 0; d < rows.ndim; ++d) {
    packed.shape[d] = int32(rows.shape[d]);
    for (int k = 0; k < 2; ++k) packed.strides[k][d] = int32(rows.strides[k][d]);
  }
  set_arg(kernel, index++, sizeof packed, &packed);
}

void enqueue(cl_kernel kernel, const Grid& grid) {
  cl_int status = clEnqueueNDRangeKernel(Runtime::get().queue(), kernel, grid.dims, nullptr,
                                         grid.global, grid.local, 0, nullptr, nullptr);
  if (status != CL_SUCCESS)
    fail("opencl: clEnqueueNDRangeKernel failed for ", name_of(kernel), ": ", error_name(status));
}

}  // namespace detail
}  // namespace sf::opencl_backend
