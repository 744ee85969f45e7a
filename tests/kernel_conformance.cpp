#include "kernel_conformance.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <new>

#include "base/address_sanitizer.h"

namespace sf::testing {

namespace {

size_t element_size(Element e) { return e == Element::BF16 ? 2 : 4; }

// A guard of n bytes: 0xDEADBEEF words, little-endian.
std::vector<unsigned char> guard(size_t n) {
  std::vector<unsigned char> bytes(n);
  for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<unsigned char>(0xDEADBEEFu >> 8 * (i % 4));
  return bytes;
}

// The index of the first byte of [from, from + n) that differs from guard(n), or n.
size_t first_change(const unsigned char* from, size_t n) {
  const std::vector<unsigned char> g = guard(n);
  return std::mismatch(g.begin(), g.end(), from).first - g.begin();
}

// Element i of `bytes` as a double, for comparing and reporting.
double value_at(Element e, const std::vector<unsigned char>& bytes, size_t i) {
  switch (e) {
    case Element::F32: {
      float v;
      std::memcpy(&v, bytes.data() + 4 * i, 4);
      return v;
    }
    case Element::I32: {
      int32_t v;
      std::memcpy(&v, bytes.data() + 4 * i, 4);
      return v;
    }
    case Element::BF16: {
      kernels::bf16 v;
      std::memcpy(&v, bytes.data() + 2 * i, 2);
      return kernels::to_float(v);
    }
  }
  return 0;
}

bool matches(Element e, const std::vector<unsigned char>& got, const std::vector<unsigned char>& want, size_t i,
             Tolerance t) {
  const size_t size = element_size(e);
  if (std::memcmp(got.data() + size * i, want.data() + size * i, size) == 0) return true;
  const double g = value_at(e, got, i), w = value_at(e, want, i);
  if (std::isnan(g) && std::isnan(w)) return true;
  if (t.exact || e != Element::F32) return false;
  const size_t count = got.size() / size;
  const double atol = t.row_atol.empty() ? t.atol : t.row_atol[i / (count / t.row_atol.size())];
  return g == w || std::fabs(g - w) <= atol + t.rtol * std::fabs(w);
}

// Reports the first element of output `what` that does not match.
void check_array(const std::string& what, size_t index, Element e, const std::vector<unsigned char>& got,
                 const std::vector<unsigned char>& want, Tolerance t) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < want.size() / element_size(e); ++i)
    if (!matches(e, got, want, i, t)) {
      FAIL_CHECK(what, " of array ", index, ", element ", i, ": got ", value_at(e, got, i), ", want ",
                 value_at(e, want, i));
      return;
    }
}

}  // namespace

void* HostDevice::allocate(size_t bytes) { return ::operator new(bytes); }
void HostDevice::release(void* buffer, size_t) { ::operator delete(buffer); }
void HostDevice::write(const void* host, Mem<void> dst, size_t bytes) {
  if (bytes) std::memcpy(kernels::host_address(dst), host, bytes);
}
void HostDevice::read(Mem<const void> src, void* host, size_t bytes) {
  if (bytes) std::memcpy(host, kernels::host_address(src), bytes);
}
void HostDevice::copy(Mem<const void> src, Mem<void> dst, size_t bytes) {
  if (bytes) std::memmove(kernels::host_address(dst), kernels::host_address(src), bytes);
}
void HostDevice::fill(Mem<void> dst, uint32_t pattern, size_t count) {
  auto* words = static_cast<uint32_t*>(kernels::host_address(dst));
  std::fill(words, words + count, pattern);
}

HostDevice& host_device() {
  static HostDevice device;
  return device;
}

Placement::Placement(const KernelCase& c, Device& device, int64_t offset) : case_(c), device_(device) {
  for (const Array& a : c.arrays) {
    const size_t skip = offset * element_size(a.element), size = a.bytes.size();
    void* buffer = device.allocate(skip + size + kGuardBytes);
    buffers_.push_back({buffer, skip, size});
    placed_.mems.emplace_back(buffer, skip);
    device.write(guard(skip).data(), {buffer, 0}, skip);
    device.write(a.bytes.data(), placed_.mems.back(), size);
    device.write(guard(kGuardBytes).data(), {buffer, skip + size}, kGuardBytes);
    if (device.host_addressable()) {
      address_sanitizer::poison(buffer, skip);
      address_sanitizer::poison(kernels::host_address(placed_.mems.back() + size), kGuardBytes);
    }
  }
}

Placement::~Placement() {
  unpoison();
  for (const Buffer& b : buffers_) device_.release(b.buffer, b.skip + b.size + kGuardBytes);
}

void Placement::unpoison() {
  if (device_.host_addressable())
    for (const Buffer& b : buffers_) address_sanitizer::unpoison(b.buffer, b.skip + b.size + kGuardBytes);
}

Run Placement::read() {
  unpoison();
  Run run;
  for (size_t i = 0; i < buffers_.size(); ++i) {
    const Buffer& b = buffers_[i];
    std::vector<unsigned char> all(b.skip + b.size + kGuardBytes);
    device_.read({b.buffer, 0}, all.data(), all.size());
    const unsigned char* data = all.data() + b.skip;
    if (case_.arrays[i].output) run.outputs.emplace_back(data, data + b.size);
    if (size_t k = first_change(all.data(), b.skip); k < b.skip)
      run.clobbered.push_back({i, static_cast<int64_t>(k) - static_cast<int64_t>(b.skip)});
    else if (size_t k = first_change(data + b.size, kGuardBytes); k < kGuardBytes)
      run.clobbered.push_back({i, static_cast<int64_t>(b.size + k)});
  }
  return run;
}

Run run_guarded(const KernelCase& c, Device& device, int64_t offset) {
  Placement placement(c, device, offset);
  placement.call();
  return placement.read();
}

Outputs run_case(const KernelCase& c, Device& device, int64_t offset) {
  Run run = run_guarded(c, device, offset);
  for (const Clobbered& k : run.clobbered)
    FAIL_CHECK("case \"", c.name, "\" on ", std::string(device.name()), ": a write outside array ", k.array,
               " (bytes [0, ", c.arrays[k.array].bytes.size(), ")): its guard ",
               std::string(k.byte < 0 ? "before" : "after"), " it changed, first at byte ", k.byte);
  return std::move(run.outputs);
}

Outputs reference_outputs(const KernelCase& c) {
  const kernels::HostTable& before = kernels::active();
  kernels::set_active(kernels::scalar_table());
  Outputs outputs = run_case(c, host_device(), 0);
  kernels::set_active(before);
  size_t out = 0;
  for (size_t i = 0; i < c.arrays.size(); ++i) {
    const Array& a = c.arrays[i];
    if (!a.output) continue;
    if (!a.expected.empty())
      check_array("the reference against the expected values", i, a.element, outputs[out], a.expected,
                  a.tolerance);
    ++out;
  }
  return outputs;
}

void check_matches(const KernelCase& c, const Outputs& got, const Outputs& want, Looseness looseness) {
  size_t out = 0;
  for (size_t i = 0; i < c.arrays.size(); ++i) {
    const Array& a = c.arrays[i];
    if (!a.output) continue;
    Tolerance t = a.tolerance;
    auto loosen = [&](float tol) { return std::max(tol * looseness.factor, looseness.floor); };
    if (!t.exact) {
      t.rtol = loosen(t.rtol);
      t.atol = loosen(t.atol);
      for (float& atol : t.row_atol) atol = loosen(atol);
    }
    check_array("the backend against the reference", i, a.element, got[out], want[out], t);
    ++out;
  }
}

void check_bit_identical(const KernelCase& c, const Outputs& got, const Outputs& want) {
  REQUIRE(got.size() == want.size());
  for (size_t out = 0; out < want.size(); ++out)
    if (got[out] != want[out]) FAIL_CHECK(c.name, ": output ", out, " differs from the one at 1 thread");
}

}  // namespace sf::testing
