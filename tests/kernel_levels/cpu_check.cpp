// Part of each per-SIMD-level kernel test binary (the Makefile's "CPU kernels
// at every SIMD level"), and built for plain x86-64, unlike the rest of it:
// before any code built for the level runs, it checks that this CPU can run
// that level, and if not, reports the binary skipped (never passed) and exits.
// SF_SIMD_LEVEL names the level: avx512, avx2 or portable.
#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace {

// The x86-64 microarchitecture level each build's -march asks for, by the
// features that set it apart, named as GCC and Clang both know them (Clang
// before 16 has no "x86-64-v4" here, nor "movbe", "f16c" or "lzcnt", which
// every CPU with AVX2 and BMI2 has anyway).
bool cpu_runs(std::string_view level) {
  __builtin_cpu_init();  // needed this early: libgcc's own initialiser may not have run yet
  const bool v3 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi") &&
                  __builtin_cpu_supports("bmi2");
  const bool v4 = v3 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                  __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512dq") &&
                  __builtin_cpu_supports("avx512vl");
  if (level == "avx512") return v4;
  if (level == "avx2") return v3;
  return level == "portable";
}

// Priority 101, the first available to programs: it runs before every
// ordinary static initialiser (doctest's test registrations included).
__attribute__((constructor(101))) void skip_unless_cpu_runs_level() {
  if (cpu_runs(SF_SIMD_LEVEL)) return;
  std::printf("SKIPPED: the kernels built for %s (this CPU cannot run them)\n", SF_SIMD_LEVEL);
  std::printf("tests: 0 passed, 0 failed, 1 skipped\n");
  std::fflush(stdout);
  std::_Exit(0);
}

}  // namespace
