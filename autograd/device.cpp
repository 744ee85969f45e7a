#include "device.h"

#include <cstdlib>
#include <new>

namespace sf {
namespace {

// 64-byte alignment: one cache line, and a full AVX-512 register.
constexpr size_t kAlignment = 64;

class CpuDevice final : public Device {
 public:
  const char* name() const override { return "cpu"; }

  void* allocate(size_t bytes) override {
    size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
    void* ptr = std::aligned_alloc(kAlignment, rounded == 0 ? kAlignment : rounded);
    if (!ptr) throw std::bad_alloc();
    return ptr;
  }

  void release(void* ptr, size_t) override { std::free(ptr); }

  const kernels::Table& kernels() const override { return kernels::active(); }
};

}  // namespace

Device& cpu() {
  static CpuDevice device;
  return device;
}

Storage::Storage(Device& device, size_t bytes)
    : device_(device), bytes_(bytes), ptr_(device.allocate(bytes)) {}

Storage::~Storage() { device_.release(ptr_, bytes_); }

}  // namespace sf
