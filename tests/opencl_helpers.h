// The OpenCL device for the "opencl" test suite, or a skipped test where the
// machine has none (the reason is printed, and the test counts as skipped).
#pragma once
#include <string>

#include "autograd/device.h"
#include "base/error.h"
#include "skip.h"

namespace sf::testing {

// The OpenCL device, or nullptr with `why` set when there is none.
inline Device* opencl_device(std::string* why = nullptr) {
  try {
    return &device_named("opencl");
  } catch (const Error& e) {
    if (why) *why = e.what();
    return nullptr;
  }
}

}  // namespace sf::testing

// Skips the current test case unless an OpenCL device can be had.
#define SF_NEED_OPENCL()                                                 \
  do {                                                                   \
    std::string why_no_opencl;                                           \
    if (!sf::testing::opencl_device(&why_no_opencl))                     \
      SF_SKIP(("no OpenCL device: " + why_no_opencl).c_str());           \
  } while (0)
