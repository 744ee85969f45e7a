// GEMM on bf16 operands with float32 accumulation: gemm.h's contract, the
// matrix products of mixed-precision training (docs/13-bf16.md). Here: the
// portable level, and the choice among the levels this build has. The
// instruction sets' levels are files of their own, each compiled on its
// architecture only: AVX512-BF16 in gemm_bf16.cpp and AMX in gemm_amx.cpp
// (x86-64), BFDOT in gemm_bf16_neon.cpp (AArch64).
#include <iterator>
#include <string>

#include "base/environment.h"
#include "base/error.h"
#include "gemm.h"
#include "gemm_tasks.h"
#include "kernels.h"

namespace sf::kernels {
namespace {

// Portable: both operands widened to float32 (exact), then the float32 GEMM,
// whose products of these values are the same exact products.
thread_local gemm_tasks::AlignedBuffer<float> t_wide_a, t_wide_b;

void gemm_portable(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const bf16* a,
                   int64_t lda, int64_t stride_a, const bf16* b, int64_t ldb, int64_t stride_b, float beta,
                   float* c, int64_t ldc, int64_t stride_c, int64_t batch) {
  const int64_t extent_a = gemm_operand_extent(trans_a, m, k, lda, stride_a, batch);
  const int64_t extent_b = gemm_operand_extent(trans_b, k, n, ldb, stride_b, batch);
  float* wide_a = t_wide_a.get(extent_a);
  float* wide_b = t_wide_b.get(extent_b);
  fast_table().bf16_to_float(a, wide_a, extent_a);
  fast_table().bf16_to_float(b, wide_b, extent_b);
  fast::gemm(trans_a, trans_b, m, n, k, alpha, wide_a, lda, stride_a, wide_b, ldb, stride_b, beta, c, ldc, stride_c,
             batch);
}

bool always() { return true; }

#if defined(__x86_64__)
// VDPBF16PS doubles the multiply-adds of an FMA only on AMD (Zen 4 and 5 run
// it on both FMA pipes); Intel issues it on one port, so there it does no more
// arithmetic than float32 and pays for its packing: the portable level
// (float32 products of the bf16 values) is faster (docs/13-bf16.md).
bool avx512_bf16_pays() {
  if (!avx512_bf16_usable()) return false;
  __builtin_cpu_init();
  return __builtin_cpu_is("amd");
}
#endif

struct Level {
  Bf16Gemm level;
  bool (*usable)();  // by this CPU (and operating system)
  bool (*fastest)();  // usable, and the fastest level here when the ones after it are not
  decltype(&gemm_portable) run;
};

// The levels of kBf16Gemms (gemm.h), in its order, slowest first.
constexpr Level kLevels[] = {
    {Bf16Gemm::kPortable, always, always, gemm_portable},
#if defined(__x86_64__)
    {Bf16Gemm::kAvx512Bf16, avx512_bf16_usable, avx512_bf16_pays, gemm_avx512_bf16},
    {Bf16Gemm::kAmxBf16, amx_bf16_usable, amx_bf16_usable, gemm_amx_bf16},
#elif defined(__aarch64__)
    // The fastest wherever the CPU has it: BFDOT does twice FMLA's
    // multiply-adds per instruction (not yet measured on ARM hardware:
    // SCRATCHFORMER_BF16_GEMM=portable is the comparison).
    {Bf16Gemm::kNeonBf16, neon_bf16_usable, neon_bf16_usable, gemm_neon_bf16},
#endif
};
static_assert(std::size(kLevels) == std::size(kBf16Gemms));

const Level* find(Bf16Gemm level) {
  for (const Level& l : kLevels)
    if (l.level == level) return &l;
  return nullptr;  // a level this build does not have
}

// The fastest level this CPU supports, by its instructions and its maker.
Bf16Gemm fastest_supported() {
  for (size_t i = std::size(kLevels); i-- > 0;)
    if (kLevels[i].fastest()) return kLevels[i].level;
  return Bf16Gemm::kPortable;
}

// The fastest level, or the one SCRATCHFORMER_BF16_GEMM names (to measure or
// test a level on a CPU whose default is another).
Bf16Gemm initial_level() {
  const char* forced = environment::value("SCRATCHFORMER_BF16_GEMM");
  if (!forced || !*forced) return fastest_supported();
  std::string names;
  for (Bf16Gemm level : kBf16Gemms) {
    if (std::string(forced) == to_string(level)) {
      if (!cpu_supports(level)) fail("SCRATCHFORMER_BF16_GEMM=", forced, ": this CPU cannot run that level");
      return level;
    }
    names += names.empty() ? "" : ", ";
    names += to_string(level);
  }
  fail("SCRATCHFORMER_BF16_GEMM=", forced, " is not a bf16 GEMM level of this build: use one of ", names);
}

Bf16Gemm& current_level() {
  static Bf16Gemm level = initial_level();
  return level;
}

}  // namespace

const char* to_string(Bf16Gemm level) {
  switch (level) {
    case Bf16Gemm::kPortable: return "portable";
    case Bf16Gemm::kAvx512Bf16: return "avx512_bf16";
    case Bf16Gemm::kAmxBf16: return "amx_bf16";
    case Bf16Gemm::kNeonBf16: return "neon_bf16";
  }
  return "?";
}

bool cpu_supports(Bf16Gemm level) {
  const Level* l = find(level);
  return l && l->usable();
}

const char* why_no_faster_bf16_gemm() {
#if defined(__x86_64__)
  return "no AMX; AVX512-BF16's VDPBF16PS doubles an FMA's work only on AMD";
#elif defined(__aarch64__)
  return "no BF16 extension, whose BFDOT doubles an FMLA's work: Armv8.6-A, Apple M2 on";
#else
  return "none is written for this architecture";
#endif
}

Bf16Gemm bf16_gemm() { return current_level(); }

bool set_bf16_gemm(Bf16Gemm level) {
  if (!cpu_supports(level)) return false;
  current_level() = level;
  return true;
}

void fast::gemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const bf16* a,
                     int64_t lda, int64_t stride_a, const bf16* b, int64_t ldb, int64_t stride_b, float beta,
                     float* c, int64_t ldc, int64_t stride_c, int64_t batch) {
  if (m <= 0 || n <= 0 || batch <= 0) return;
  if (k <= 0) return gemm_tasks::scale_c(m, n, beta, c, ldc, stride_c, batch);
  find(current_level())->run(trans_a, trans_b, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta, c, ldc,
                             stride_c, batch);
}

}  // namespace sf::kernels
