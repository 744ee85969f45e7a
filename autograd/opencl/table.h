// The OpenCL kernel table: each entry launches the OpenCL C kernel of the
// same name (kernels/*.cl).
#pragma once
#include "../kernels/kernels.h"

namespace sf::opencl_backend {

const kernels::Table& table();

}  // namespace sf::opencl_backend
