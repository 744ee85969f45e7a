// Part of each per-SIMD-level kernel test binary (the Makefile's "CPU kernels
// at every SIMD level"), and built for plain x86-64, unlike the rest of it:
// before any code built for the level runs, it checks that this CPU can run
// that level, and if not, reports the binary skipped (never passed) and exits.
// SF_SIMD_LEVEL names the level: avx512, avx2 or portable.
#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace {

// The x86-64 microarchitecture level each build's -march asks for.
bool cpu_runs(std::string_view level) {
  __builtin_cpu_init();  // needed this early: libgcc's own initialiser may not have run yet
  if (level == "avx512") return __builtin_cpu_supports("x86-64-v4");
  if (level == "avx2") return __builtin_cpu_supports("x86-64-v3");
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
