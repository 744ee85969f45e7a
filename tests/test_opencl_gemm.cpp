// The OpenCL tiled GEMM in each of its tilings (autograd/opencl/gemm.h:
// kTilings) against the scalar reference, on shapes that take every tiling
// through its edge and interior paths, and the tuner that picks one per device
// and caches the choice (gemm_tuning.h). Run in any shapes: the tilings are
// launched directly. Built only with OPENCL=1 (suite "opencl").
#ifdef SF_OPENCL
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "autograd/kernels/kernels.h"
#include "autograd/opencl/gemm.h"
#include "autograd/opencl/gemm_tuning.h"
#include "autograd/opencl/runtime.h"
#include "opencl_helpers.h"
#include "test_nn_helpers.h"

using namespace sf;
using namespace sf::opencl_backend;
using sf::testing::DeviceArray;
using sf::testing::opencl_device;
using sf::testing::TempDir;

namespace {

std::vector<float> random_floats(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

struct Case {
  bool ta, tb;
  int64_t m, n, k;
  float alpha = 1.0f, beta = 0.0f;
  int64_t batch = 1;
  bool share_a = false, share_b = false;  // stride 0: one matrix for the whole batch
  int64_t pad = 0;                        // leading dimensions this much wider than the matrices
  int64_t offset = 4;                     // of each operand in its buffer
};

// Runs `c` by tiling `tiling` and by the scalar reference; false (with the
// first difference reported) unless they agree within 1e-4 sqrt(k), NaN
// padding of C included.
void check(size_t tiling, const Case& c) {
  CAPTURE(tiling_name(kTilings[tiling]));
  CAPTURE(c.ta);
  CAPTURE(c.tb);
  CAPTURE(c.m);
  CAPTURE(c.n);
  CAPTURE(c.k);
  CAPTURE(c.alpha);
  CAPTURE(c.beta);
  CAPTURE(c.batch);
  CAPTURE(c.pad);
  CAPTURE(c.offset);
  int64_t lda = (c.ta ? c.m : c.k) + c.pad, ldb = (c.tb ? c.k : c.n) + c.pad, ldc = c.n + c.pad;
  int64_t a_size = (c.ta ? c.k : c.m) * lda, b_size = (c.tb ? c.n : c.k) * ldb, c_size = c.m * ldc;
  int64_t stride_a = c.share_a ? 0 : a_size, stride_b = c.share_b ? 0 : b_size;
  auto seed = static_cast<uint32_t>(c.m * 10007 + c.n * 101 + c.k);
  std::vector<float> a = random_floats(a_size * (c.share_a ? 1 : c.batch), seed),
                     b = random_floats(b_size * (c.share_b ? 1 : c.batch), seed + 1),
                     out = random_floats(c_size * c.batch, seed + 2);
  if (c.beta == 0.0f) std::fill(out.begin(), out.end(), std::numeric_limits<float>::quiet_NaN());
  DeviceArray<float> da(a, c.offset), db(b, c.offset), dc(out, c.offset);
  tiled_gemm(tiling, c.ta, c.tb, c.m, c.n, c.k, c.alpha, da.mem(), lda, stride_a, db.mem(), ldb, stride_b, c.beta,
             dc.mem(), ldc, c_size, c.batch);
  kernels::scalar_table().gemm(c.ta, c.tb, c.m, c.n, c.k, c.alpha, a.data(), lda, stride_a, b.data(), ldb,
                               stride_b, c.beta, out.data(), ldc, c_size, c.batch);
  std::vector<float> got = dc.read();
  double tolerance = 1e-4 * std::sqrt(double(std::max<int64_t>(c.k, 1)));
  for (size_t i = 0; i < out.size(); ++i) {
    bool same = std::isnan(out[i]) ? std::isnan(got[i])
                                   : std::fabs(got[i] - out[i]) <= tolerance * std::max(1.0f, std::fabs(out[i]));
    if (!same) {
      FAIL_CHECK("element ", i, " (row ", i % c_size / ldc, ", column ", i % ldc, "): opencl ", got[i],
                 " vs reference ", out[i]);
      return;
    }
  }
}

// Sets an environment variable for a scope, restoring it after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    value ? setenv(name, value, 1) : unsetenv(name);
  }
  ~ScopedEnv() { old_ ? setenv(name_, old_->c_str(), 1) : unsetenv(name_); }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

void write_text(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

TEST_SUITE("opencl") {
  TEST_CASE("opencl gemm: every tiling against the scalar reference, on its edges and interior") {
    SF_NEED_OPENCL();
    for (size_t t = 0; t < kTilingCount; ++t) {
      const Tiling& tiling = kTilings[t];
      const int64_t tm = tiling.tm(), tn = tiling.tn(), tk = tiling.tk;
      for (int layout = 0; layout < 4; ++layout) {
        bool ta = layout & 1, tb = layout & 2;
        // Whole tiles, aligned: the float4 loads along whichever dimension is contiguous.
        check(t, {ta, tb, 2 * tm, 2 * tn, 3 * tk});
        // Whole tiles, leading dimensions and offsets not multiples of 4: element loads.
        check(t, {ta, tb, tm, tn, 2 * tk, 1.0f, 0.0f, 1, false, false, 3, 3});
        // Edges in every dimension (one more, and a few fewer, than the tile), beta and alpha.
        check(t, {ta, tb, tm + 1, 2 * tn - 3, tk + 5, -1.5f, 0.5f});
        check(t, {ta, tb, tm - 3, tn + 1, 2 * tk - 1, 1.0f, 1.0f, 1, false, false, 4, 4});
        // k below one step, and a single element.
        check(t, {ta, tb, 7, 9, 3, 0.5f, 0.0f});
        check(t, {ta, tb, 1, 1, 1, 2.0f, -1.0f});
      }
      // Batches: strided, and with an operand shared (stride 0).
      check(t, {false, false, tm + 2, tn, tk, 1.0f, 0.25f, 3, false, true, 4});
      check(t, {true, false, 5, tn + 3, tk + 1, 1.0f, 0.0f, 2, true, false});
      // k = 0: C = beta C; beta 0 writes zeros over the NaNs.
      check(t, {false, true, 9, 13, 0, 1.0f, 0.5f, 2});
      check(t, {false, false, 9, 13, 0, 1.0f, 0.0f});
      // m or n = 0: nothing to do (C is left as it was).
      check(t, {false, false, 0, 5, 3});
      check(t, {false, false, 5, 0, 3});
      // One tile and a deep k: k split into slices on any device (k_slices),
      // with edges, alpha and beta; a k that only splits in two; float4 loads
      // and element loads.
      for (int layout = 0; layout < 4; ++layout) {
        bool ta = layout & 1, tb = layout & 2;
        check(t, {ta, tb, tm - 3, tn - 1, 1024, -1.5f, 0.5f});
        check(t, {ta, tb, tm, tn, 1000, 1.0f, 0.0f, 1, false, false, 3, 3});
      }
    }
  }

  TEST_CASE("opencl gemm: k is split where C has too few tiles for the device, into aligned slices at least 64 deep") {
    struct Split {
      int64_t tiles, k, batch, units, slices;
    };
    const Split splits[] = {
        // An H200 (132 compute units): a 256 x 256 weight gradient over 2048
        // tokens (16 tiles of 64 x 64) in 32 slices of 64; 100 tiles over k
        // 8000 in 8 slices of 1000; 2 tiles per unit, or a batch: not split.
        {16, 2048, 1, 132, 32},
        {100, 8000, 1, 132, 8},
        {128, 256, 1, 132, 4},
        {264, 2048, 1, 132, 1},
        {16, 2048, 2, 132, 1},
        // Slices stay multiples of 4 (aligned float4s) and kMinSliceK deep.
        {1, 1000, 1, 2, 2},
        {1, 999, 1, 2, 1},
        {1, 127, 1, 132, 1},
        {1, 128, 1, 132, 2},
        // A device of 2 units (PoCL on two cores): 8 groups' worth of slices.
        {1, 4096, 1, 2, 16},
        {3, 4096, 1, 2, 4},
        {4, 4096, 1, 2, 1},
    };
    for (const Split& s : splits) {
      CAPTURE(s.tiles);
      CAPTURE(s.k);
      CAPTURE(s.batch);
      CAPTURE(s.units);
      CHECK(k_slices(s.tiles, s.k, s.batch, s.units) == s.slices);
    }
  }

  TEST_CASE("opencl gemm: a split product adds its slices in another order than the whole k, the same every run") {
    SF_NEED_OPENCL();
    // The same product as the only matrix (split) and as both elements of a
    // batch sharing its operands (never split): within rounding of each
    // other, and different in some bits, since the slices' sums are added in
    // another order; the split one gives the same bits every run.
    const size_t t = 0;
    const int64_t m = kTilings[t].tm(), n = kTilings[t].tn(), k = 2048;
    std::vector<float> a = random_floats(m * k, 5), b = random_floats(k * n, 6);
    DeviceArray<float> da(a), db(b), split(std::vector<float>(m * n)), again(std::vector<float>(m * n)),
        whole(std::vector<float>(2 * m * n));
    for (DeviceArray<float>* c : {&split, &again})
      tiled_gemm(t, false, false, m, n, k, 1.0f, da.mem(), k, 0, db.mem(), n, 0, 0.0f, c->mem(), n, m * n, 1);
    tiled_gemm(t, false, false, m, n, k, 1.0f, da.mem(), k, 0, db.mem(), n, 0, 0.0f, whole.mem(), n, m * n, 2);
    std::vector<float> s = split.read(), w = whole.read();
    CHECK(s == again.read());
    int differing = 0;
    for (int64_t i = 0; i < m * n; ++i) {
      REQUIRE(std::fabs(s[i] - w[i]) <= 1e-4f * std::sqrt(float(k)));
      differing += s[i] != w[i];
    }
    CHECK(differing > 0);
  }

  TEST_CASE("opencl gemm: the tuner times the tilings once, caches the choice per device, and reads it back") {
    SF_NEED_OPENCL();
    ScopedEnv unforced("SCRATCHFORMER_OPENCL_GEMM_TILING", nullptr);
    TempDir dir;
    const std::string folder = dir.file("cache"), path = tuning_cache_file(folder);
    const std::string device = device_string(Runtime::get().device(), CL_DEVICE_NAME);

    // The first choice is timed, announced and written (the folder created).
    TilingChoice first = choose_tiling(folder);
    CHECK(first.how == TilingSource::tuned);
    CHECK_MESSAGE(first.log.rfind("opencl: tuned GEMM tiling for " + device + " (", 0) == 0, first.log);
    CHECK_MESSAGE(first.log.ends_with(" per item (cached in " + path + ")"), first.log);
    nlohmann::json cache = nlohmann::json::parse(read_text(path));
    REQUIRE(cache.size() == 1);
    const std::string key = cache.begin().key();
    CHECK(key.rfind(device + " | ", 0) == 0);
    CHECK(cache.begin().value() == tiling_name(kTilings[first.index]));

    // The next one reads the file: the tiling it records, whichever it is.
    const size_t other = (first.index + 1) % kTilingCount;
    cache[key] = tiling_name(kTilings[other]);
    write_text(path, cache.dump());
    TilingChoice second = choose_tiling(folder);
    CHECK(second.how == TilingSource::cached);
    CHECK(second.index == other);
    CHECK(second.log.empty());

    // Another device's (or driver's, or kernel's) entry is kept, and not used.
    cache["another device | 1.0 | 0123456789abcdef"] = tiling_name(kTilings[0]);
    cache.erase(key);
    write_text(path, cache.dump());
    CHECK(choose_tiling(folder).how == TilingSource::tuned);
    cache = nlohmann::json::parse(read_text(path));
    CHECK(cache.size() == 2);
    CHECK(cache.contains("another device | 1.0 | 0123456789abcdef"));

    // A corrupt file, or one naming no tiling, is tuned over and replaced.
    write_text(path, "{\"truncated");
    CHECK(choose_tiling(folder).how == TilingSource::tuned);
    CHECK(choose_tiling(folder).how == TilingSource::cached);
    cache = nlohmann::json::parse(read_text(path));
    cache[key] = "3x3x3-1x1";
    write_text(path, cache.dump());
    CHECK(choose_tiling(folder).how == TilingSource::tuned);

    // A folder that cannot be made (under a file) only means no cache.
    write_text(dir.file("file"), "");
    TilingChoice uncached = choose_tiling(dir.file("file") + "/cache");
    CHECK(uncached.how == TilingSource::tuned);
    CHECK_MESSAGE(uncached.log.find("(not cached: ") != std::string::npos, uncached.log);
  }

  TEST_CASE("opencl gemm: the cache's folder, and SCRATCHFORMER_OPENCL_GEMM_TILING forcing a tiling") {
    SF_NEED_OPENCL();
    {
      ScopedEnv home("HOME", "/home/someone"), xdg("XDG_CACHE_HOME", nullptr), ours("SCRATCHFORMER_CACHE_DIR", nullptr);
      CHECK(cache_dir() == "/home/someone/.cache/scratchformer");
      ScopedEnv xdg_set("XDG_CACHE_HOME", "/xdg");
      CHECK(cache_dir() == "/xdg/scratchformer");
      ScopedEnv ours_set("SCRATCHFORMER_CACHE_DIR", "/ours");
      CHECK(cache_dir() == "/ours");
    }
    TempDir dir;
    const std::string name = tiling_name(kTilings[kTilingCount - 1]);
    ScopedEnv forced("SCRATCHFORMER_OPENCL_GEMM_TILING", name.c_str());
    TilingChoice choice = choose_tiling(dir.path.string());
    CHECK(choice.how == TilingSource::forced);
    CHECK(choice.index == kTilingCount - 1);
    CHECK_FALSE(std::filesystem::exists(tuning_cache_file(dir.path.string())));
    ScopedEnv bad("SCRATCHFORMER_OPENCL_GEMM_TILING", "huge");
    CHECK_THROWS_WITH_AS(choose_tiling(dir.path.string()),
                         doctest::Contains("opencl: SCRATCHFORMER_OPENCL_GEMM_TILING=huge is not a GEMM tiling: "
                                           "use one of 64x64x16-4x4, "),
                         Error);
  }
}
#endif  // SF_OPENCL
