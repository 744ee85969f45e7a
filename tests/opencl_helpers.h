// The OpenCL device for the "opencl" test suite, or a skipped test where the
// machine has none (the reason is printed, and the test counts as skipped).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

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

// A copy of host values on the OpenCL device, `offset` elements into its
// buffer (a view into a larger one, as a sliced tensor's), so that kernels
// are tested with offsets: the default 3 also breaks 16-byte alignment.
template <class T>
class DeviceArray {
 public:
  explicit DeviceArray(const std::vector<T>& host, int64_t offset = 3)
      : dev_(device_named("opencl")), size_(host.size()), offset_(offset),
        bytes_((host.size() + offset) * sizeof(T)), buffer_(dev_.allocate(bytes_)) {
    dev_.write(host.data(), mem(), size_ * sizeof(T));
  }
  ~DeviceArray() { dev_.release(buffer_, bytes_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  kernels::Mem<T> mem() const { return {buffer_, offset_ * sizeof(T)}; }
  std::vector<T> read() const {
    std::vector<T> host(size_);
    dev_.read(mem(), host.data(), size_ * sizeof(T));
    return host;
  }

 private:
  Device& dev_;
  size_t size_, offset_, bytes_;
  void* buffer_;
};

}  // namespace sf::testing

// Skips the current test case unless an OpenCL device can be had.
#define SF_NEED_OPENCL()                                                 \
  do {                                                                   \
    std::string why_no_opencl;                                           \
    if (!sf::testing::opencl_device(&why_no_opencl))                     \
      SF_SKIP(("no OpenCL device: " + why_no_opencl).c_str());           \
  } while (0)
