#include "device.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>

#include "block_cache.h"
#include "base/address_sanitizer.h"
#include "base/error.h"
#include "base/platform.h"
#include "kernels/gemm.h"
#ifdef SF_OPENCL
#include "opencl/opencl.h"
#endif

namespace sf {
namespace {

// The CPU's kernel table: each entry resolves its Mem arguments to host
// addresses and calls the same entry of the active host table (kernels.h), so
// `kernels::set_active` still switches between the scalar and fast kernels.
template <class T>
T* host(Mem<T> m) {
  return kernels::host_address(m);
}
template <class T>
T host(T value) {  // sizes, scalars, Rows: passed as they are
  return value;
}

template <auto entry>
constexpr auto on_host = [](auto... args) { return (kernels::active().*entry)(host(args)...); };

const kernels::Table& cpu_table() {
  using H = kernels::HostTable;
  static constexpr kernels::Table table{
      .name = "cpu",
#define SF_ON_HOST(entry) .entry = on_host<&H::entry>,
      SF_KERNEL_LIST(SF_ON_HOST)
#undef SF_ON_HOST
  };
  return table;
}

// 64-byte alignment: one cache line, and a full AVX-512 register.
constexpr size_t kAlignment = 64;

// Host memory from the system allocator, recycled through a BlockCache bounded
// at 2 GiB. Under AddressSanitizer, what the allocator hands out is exactly
// the bytes asked for: the rest of the size class is poisoned, and so is a
// buffer while the cache holds it, so a read or write past a tensor's end or
// after its storage is gone is reported as it would be with no cache.
class CpuDevice final : public Device {
 public:
  // Every tensor of 1 MiB or more goes back to the system when freed.
  CpuDevice() { platform::return_freed_blocks_from(1 << 20); }

  const char* name() const override { return "cpu"; }
  bool host_addressable() const override { return true; }
  bool multiplies_bf16_faster() const override { return kernels::bf16_gemm() != kernels::Bf16Gemm::kPortable; }

  void* allocate(size_t bytes) override {
    size_t size = cache_.size_class(bytes);
    void* ptr = cache_.take(size);
    ++(ptr ? cache_hits_ : system_allocations_);
    if (!ptr) ptr = std::aligned_alloc(kAlignment, size);
    if (!ptr) {  // what the cache holds may be what is missing
      cache_.clear();
      ptr = std::aligned_alloc(kAlignment, size);
    }
    if (!ptr)
      fail("cpu: out of memory: cannot allocate ", size >> 20, " MiB (", live_bytes_ >> 20, " MiB in use)");
    address_sanitizer::unpoison(ptr, bytes);
    address_sanitizer::poison(static_cast<char*>(ptr) + bytes, size - bytes);
    // The peak is an atomic maximum: another thread may raise it meanwhile.
    const int64_t live = live_bytes_ += static_cast<int64_t>(size);
    int64_t peak = peak_live_bytes_;
    while (live > peak && !peak_live_bytes_.compare_exchange_weak(peak, live)) {
    }
    return ptr;
  }

  void release(void* buffer, size_t bytes) override {
    size_t size = cache_.size_class(bytes);
    live_bytes_ -= static_cast<int64_t>(size);
    address_sanitizer::poison(buffer, size);
    cache_.give_back(buffer, size);
  }

  void write(const void* src, Mem<void> dst, size_t bytes) override {
    if (bytes) std::memcpy(kernels::host_address(dst), src, bytes);
  }
  void read(Mem<const void> src, void* dst, size_t bytes) override {
    if (bytes) std::memcpy(dst, kernels::host_address(src), bytes);
  }
  void copy(Mem<const void> src, Mem<void> dst, size_t bytes) override {
    if (bytes) std::memmove(kernels::host_address(dst), kernels::host_address(src), bytes);
  }
  void fill(Mem<void> dst, uint32_t pattern, size_t count) override {
    auto* words = static_cast<uint32_t*>(kernels::host_address(dst));
    std::fill_n(words, count, pattern);
  }
  void synchronize() override {}

  void release_cached() { cache_.clear(); }

  AllocationStats stats() const {
    return {system_allocations_, cache_hits_, live_bytes_, peak_live_bytes_,
            static_cast<int64_t>(cache_.cached_bytes())};
  }

  const kernels::Table& kernels() const override { return cpu_table(); }

 private:
  BlockCache cache_{kAlignment, size_t{2} << 30, [](void* buffer, size_t) { std::free(buffer); }};
  std::atomic<int64_t> system_allocations_ = 0, cache_hits_ = 0;
  std::atomic<int64_t> live_bytes_ = 0, peak_live_bytes_ = 0;  // in size classes
};

CpuDevice& cpu_device() {
  static CpuDevice device;
  return device;
}

}  // namespace

Device& cpu() { return cpu_device(); }

namespace {

#ifndef SF_OPENCL
Device& opencl() {
  fail("device \"opencl\": this build has no OpenCL backend (make OPENCL=1 builds one: "
       "build/opencl/scratchformer)");
}
#endif

// Every device a config may name, and how to reach it.
constexpr std::pair<const char*, Device& (*)()> kNamedDevices[] = {{"cpu", cpu}, {"opencl", opencl}};

}  // namespace

std::vector<std::string> device_names() {
  std::vector<std::string> names;
  for (auto [name, device] : kNamedDevices) names.push_back(name);
  return names;
}

Device& device_named(const std::string& name) {
  for (auto [known, device] : kNamedDevices)
    if (name == known) return device();
  std::string expected;
  for (const std::string& known : device_names()) expected += (expected.empty() ? "\"" : ", \"") + known + "\"";
  fail("unknown device \"", name, "\" (expected one of ", expected, ")");
}

namespace {
int g_local_rank = 0;
}

void set_local_rank(int rank) { g_local_rank = rank; }
int local_rank() { return g_local_rank; }

AllocationStats cpu_allocation_stats() { return cpu_device().stats(); }
void release_cached_cpu_memory() { cpu_device().release_cached(); }

Storage::Storage(Device& device, size_t bytes)
    : device_(device), bytes_(bytes), buffer_(device.allocate(bytes)) {}

Storage::Storage(void* borrowed, size_t bytes) : device_(cpu()), bytes_(bytes), buffer_(borrowed), owned_(false) {}

Storage::~Storage() {
  if (owned_) device_.release(buffer_, bytes_);
}

}  // namespace sf
