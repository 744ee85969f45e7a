// Running a test body at each bf16 GEMM level of this build
// (autograd/kernels/gemm.h). A level this CPU lacks is reported skipped, once
// per test process (make test runs the suite as several: each that meets it
// reports it), with a reason tools/run-tests checks against the machine, so
// that a machine without it says so in `make test`'s last line; the other
// levels run. The default level is restored after.
#pragma once
#include <doctest/doctest.h>

#include <set>
#include <string>

#include "autograd/kernels/gemm.h"
#include "skip.h"

namespace sf::testing {

// Why `level` cannot run here, in the words tools/run-tests checks.
inline const char* missing_bf16_level(kernels::Bf16Gemm level) {
  switch (level) {
    case kernels::Bf16Gemm::kAvx512Bf16: return "this CPU has no AVX512-BF16 (avx512_bf16)";
    case kernels::Bf16Gemm::kAmxBf16: return "this CPU has no AMX-BF16 (amx_bf16, amx_tile)";
    case kernels::Bf16Gemm::kNeonBf16: return "this CPU has no Arm BF16 (bf16)";
    case kernels::Bf16Gemm::kPortable: break;
  }
  return "the portable bf16 level is missing";  // never: every CPU has it
}

// Whether `level` is reported missing for the first time in this process.
inline bool first_time_missing(kernels::Bf16Gemm level) {
  static std::set<kernels::Bf16Gemm> reported;
  return reported.insert(level).second;
}

template <class Body>
void at_each_bf16_gemm(Body body) {
  const kernels::Bf16Gemm original = kernels::bf16_gemm();
  for (kernels::Bf16Gemm level : kernels::kBf16Gemms) {
    if (!kernels::set_bf16_gemm(level)) {
      if (first_time_missing(level)) skip_part(missing_bf16_level(level));
      continue;
    }
    const std::string name = kernels::to_string(level);  // a std::string: CAPTURE prints a char* as an address
    CAPTURE(name);
    body(level);
  }
  kernels::set_bf16_gemm(original);
}

}  // namespace sf::testing
