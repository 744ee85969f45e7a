// One table of kernel test cases, written once and run on every backend (in
// the spirit of ggml's test-backend-ops). For each entry of the kernel list
// (autograd/kernels/kernels.h), kernel_cases.cpp builds its cases: inputs
// from fixed seeds, awkward shapes, empty ones (0 elements, zero rows, zero
// columns), shapes large enough that the fast table splits them across
// threads, and edge values (NaN, infinities, e^x overflowing). A case is
// inputs on the host and one call of the entry through a device's kernel
// table; kernel_conformance.h runs it on the scalar reference and on the
// backend under test, each through the Device interface, and compares what
// each wrote.
//
// `KernelCases` has one member per kernel-list entry, each a reference that
// kernel_cases.cpp binds to the function of the entry's name in its namespace
// `cases`: a new entry without cases is a compile error.
#pragma once
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "autograd/kernels/kernels.h"

namespace sf::testing {

// How an output must match the reference: within atol + rtol |want| (NaN
// matches NaN, an infinity itself), or bit for bit (any NaN matching any NaN:
// their payloads are not specified). `row_atol`, where set, is the atol of
// each row of the output, rows of equal length: layer_norm_backward's dx,
// whose rows each have their own scale.
struct Tolerance {
  float rtol = 0, atol = 0;
  bool exact = true;
  std::vector<float> row_atol = {};
};
inline Tolerance within(float rtol, float atol) { return {rtol, atol, false}; }
inline const Tolerance kExact{};

enum class Element { F32, I32, BF16 };

template <class T>
constexpr Element element_of() {
  if constexpr (std::is_same_v<T, float>) return Element::F32;
  if constexpr (std::is_same_v<T, int32_t>) return Element::I32;
  if constexpr (std::is_same_v<T, kernels::bf16>) return Element::BF16;
}

// One array of a case: its contents before the call, and whether (and how) it
// is compared after it. `expected`, where set, is what the reference must
// write, computed in the test: for entries whose fast version runs the
// reference's own code, so that no case compares the reference with itself.
struct Array {
  Element element;
  std::vector<unsigned char> bytes;
  bool output = false;
  Tolerance tolerance;
  std::vector<unsigned char> expected;
};

// An array of a case, by index, with its element type.
template <class T>
struct Arg {
  size_t index;
};

// Where a run put each array of a case: the device's memory.
struct Placed {
  std::vector<kernels::Mem<void>> mems;
  template <class T>
  kernels::Mem<T> operator[](Arg<T> arg) const {
    const kernels::Mem<void> m = mems[arg.index];
    return {m.buffer, m.offset};
  }
};

struct KernelCase {
  explicit KernelCase(std::string name, int64_t split_passes = 0)
      : name(std::move(name)), split_passes(split_passes) {}

  std::string name;
  std::vector<Array> arrays;
  std::function<void(const kernels::Table&, const Placed&)> call;
  // The fast table at 2 and 3 threads must cut at least this many of its
  // parallel_for calls into as many chunks as threads (0: no claim).
  int64_t split_passes = 0;

  template <class T>
  Arg<T> input(const std::vector<T>& values) {
    return add(values, false, kExact);
  }
  template <class T>
  Arg<T> output(const std::vector<T>& before, Tolerance tolerance) {
    return add(before, true, tolerance);
  }
  // An output the reference must write as `want` (within `tolerance`).
  template <class T>
  Arg<T> output(const std::vector<T>& before, Tolerance tolerance, const std::vector<T>& want) {
    Arg<T> arg = add(before, true, tolerance);
    arrays.back().expected = bytes_of(want);
    return arg;
  }
  // n floats written within `tolerance`; where n is 0, 8 floats of 42 that
  // must come back untouched (nothing of an empty output is written).
  Arg<float> result(int64_t n, Tolerance tolerance) {
    return n ? output(std::vector<float>(n), tolerance) : untouched(std::vector<float>(8, 42.0f));
  }
  // An output of an empty call: it must come back as it was.
  template <class T>
  Arg<T> untouched(const std::vector<T>& before) {
    return output(before, kExact, before);
  }

 private:
  template <class T>
  static std::vector<unsigned char> bytes_of(const std::vector<T>& values) {
    const auto* p = reinterpret_cast<const unsigned char*>(values.data());
    return {p, p + values.size() * sizeof(T)};
  }
  template <class T>
  Arg<T> add(const std::vector<T>& values, bool is_output, Tolerance tolerance) {
    arrays.push_back({element_of<T>(), bytes_of(values), is_output, tolerance, {}});
    return {arrays.size() - 1};
  }
};

using Cases = std::vector<KernelCase>;

struct KernelCases {
#define SF_CASES_MEMBER(entry) Cases (&entry)();
  SF_KERNEL_LIST(SF_CASES_MEMBER)
#undef SF_CASES_MEMBER
};

// Uniform floats in [low, high) from a fixed seed (splitmix64).
std::vector<float> random_vector(int64_t n, uint64_t seed, float low = -2.0f, float high = 2.0f);
// The same with the values that trip vectorised code (NaN, infinities, e^x
// overflowing and underflowing, huge and subnormal magnitudes, signed zeros)
// spread through it: at size 129 each lands both in whole vectors and in
// scalar tails, at every vector width.
std::vector<float> with_edges(int64_t n, uint64_t seed, float low = -2.0f, float high = 2.0f);

// Which of the kernel table's products a case runs: gemm, gemm_bf16 (its
// operands rounded to bf16 and stored so), or gemm_rounded_bf16.
enum class GemmEntry { kFloat32, kBf16, kRoundedBf16 };

// A matrix product's case for `entry`: every operand `pad` columns into a wider matrix, as a slice of a
// cache would be, so C's padding must come back untouched; B may be shared by
// the batch (stride 0), as a weight is; `edges` sprinkles infinities and NaN
// through A and B. With beta 0, C starts as NaN, which must not leak.
struct GemmShape {
  int64_t m, n, k;
  bool trans_a, trans_b;
  float alpha, beta;
  int64_t batch = 2, pad = 0;
  bool shared_b = false, edges = false;
  // A product the fast table must split across threads.
  bool split = false;
};
KernelCase gemm_case(const GemmShape& g, GemmEntry entry);

// Every entry's cases generator, in the list's order, with its name.
struct EntryCases {
  const char* entry;
  Cases (*make)();
};
std::vector<EntryCases> every_entry_cases();

}  // namespace sf::testing
