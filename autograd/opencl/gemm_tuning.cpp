#include "gemm_tuning.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <vector>

#include "base/atomic_file.h"
#include "base/environment.h"
#include "base/error.h"
#include "gemm.h"
#include "runtime.h"
#include "sources.h"

namespace sf::opencl_backend {
namespace {

using Json = nlohmann::json;

// The tuning's products (m, n, k): a square one and a transformer layer's
// (2048 tokens through a 512 -> 2048 feed-forward layer).
struct Product {
  int64_t m, n, k;
};
constexpr Product kProducts[] = {{1024, 1024, 1024}, {2048, 2048, 512}};

// The whole tuning's time, roughly: the products shrink on a slow device.
constexpr double kBudgetSeconds = 1.0;
constexpr int kTrials = 3;  // timed runs per candidate and product, the best kept

std::string cache_key(cl_device_id device) {
  char digest[17];
  std::snprintf(digest, sizeof digest, "%016llx", static_cast<unsigned long long>(tiled_sources_digest()));
  return device_string(device, CL_DEVICE_NAME) + " | " + device_string(device, CL_DRIVER_VERSION) + " | " + digest;
}

// The cache file's entries (key -> tiling name); empty when it is missing,
// unreadable or not a JSON object.
Json read_cache(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  Json cache = Json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  return cache.is_object() ? cache : Json::object();
}

// Whether a tiling's work-group and local memory fit the device (its
// program then builds, and its kernel runs groups of that size: registers may
// forbid it).
bool fits(const Tiling& t, size_t index) {
  cl_device_id device = Runtime::get().device();
  if (static_cast<size_t>(t.items()) > device_value<size_t>(device, CL_DEVICE_MAX_WORK_GROUP_SIZE) ||
      t.local_bytes() > device_value<cl_ulong>(device, CL_DEVICE_LOCAL_MEM_SIZE))
    return false;
  size_t group = 0;
  try {
    cl_kernel kernel = Runtime::get().kernel(tiled_source(index), "gemm");
    check(clGetKernelWorkGroupInfo(kernel, device, CL_KERNEL_WORK_GROUP_SIZE, sizeof group, &group, nullptr),
          "clGetKernelWorkGroupInfo");
  } catch (const Error&) {
    return false;  // a driver that cannot build it
  }
  return group >= static_cast<size_t>(t.items());
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Buffers for the largest product, filled with ones.
struct Operands {
  cl_mem a, b, c;
  Operands() {
    size_t floats = 0;
    for (const Product& p : kProducts) floats = std::max({floats, size_t(p.m * p.k), size_t(p.k * p.n), size_t(p.m * p.n)});
    Runtime& runtime = Runtime::get();
    a = runtime.create_buffer(floats * sizeof(float));
    b = runtime.create_buffer(floats * sizeof(float));
    c = runtime.create_buffer(floats * sizeof(float));
    const float one = 1.0f;
    for (cl_mem x : {a, b, c})
      check(clEnqueueFillBuffer(runtime.queue(), x, &one, sizeof one, 0, floats * sizeof(float), 0, nullptr, nullptr),
            "clEnqueueFillBuffer");
  }
  ~Operands() {
    for (cl_mem x : {a, b, c}) clReleaseMemObject(x);
  }
  Operands(const Operands&) = delete;
  Operands& operator=(const Operands&) = delete;

  // Seconds for `runs` products by tiling `index`, queued back to back.
  double time(size_t index, const Product& p, int runs) const {
    auto start = std::chrono::steady_clock::now();
    for (int r = 0; r < runs; ++r)
      tiled_gemm(index, false, false, p.m, p.n, p.k, 1.0f, Mem<const float>(a, 0), p.k, 0, Mem<const float>(b, 0),
                 p.n, 0, 0.0f, Mem<float>(c, 0), p.n, 0, 1);
    check(clFinish(Runtime::get().queue()), "clFinish");
    return seconds_since(start) / runs;
  }
};

// The fastest of the candidates that fit, by their summed best times on the
// products. On a slow device (PoCL in GPU shapes) the products are shrunk,
// halving each side, to keep within kBudgetSeconds; on a fast one each timing
// runs the product repeatedly, for a few milliseconds of work.
size_t tune() {
  std::vector<size_t> candidates;
  for (size_t i = 0; i < kTilingCount; ++i)
    if (fits(kTilings[i], i)) candidates.push_back(i);
  if (candidates.empty()) fail("opencl: no GEMM tiling builds and fits on this device");

  Operands operands;
  const Product probe{256, 256, 256};
  operands.time(candidates[0], probe, 1);  // warm-up
  double flops_per_second = 2.0 * probe.m * probe.n * probe.k / operands.time(candidates[0], probe, 1);
  // Each product's share of the budget per timed run (and one warm-up).
  double seconds_per_run = kBudgetSeconds / (candidates.size() * std::size(kProducts) * (kTrials + 1));

  std::vector<double> total(candidates.size(), 0.0);
  for (Product p : kProducts) {
    while (2.0 * p.m * p.n * p.k / flops_per_second > seconds_per_run && std::min({p.m, p.n, p.k}) > 64)
      p = {p.m / 2, p.n / 2, p.k / 2};
    double estimate = 2.0 * p.m * p.n * p.k / flops_per_second;
    int runs = static_cast<int>(std::clamp(0.003 / estimate, 1.0, 100.0));
    for (size_t c = 0; c < candidates.size(); ++c) {
      operands.time(candidates[c], p, 1);
      double best = std::numeric_limits<double>::infinity();
      for (int trial = 0; trial < kTrials; ++trial) best = std::min(best, operands.time(candidates[c], p, runs));
      total[c] += best;
    }
  }
  return candidates[std::min_element(total.begin(), total.end()) - total.begin()];
}

// SCRATCHFORMER_OPENCL_GEMM_TILING's tiling; kTilingCount when unset.
size_t forced_tiling() {
  const char* env = environment::value("SCRATCHFORMER_OPENCL_GEMM_TILING");
  if (!env || !*env) return kTilingCount;
  std::string names;
  for (size_t i = 0; i < kTilingCount; ++i) {
    if (tiling_name(kTilings[i]) == env) return i;
    names += (i ? ", " : "") + tiling_name(kTilings[i]);
  }
  fail("opencl: SCRATCHFORMER_OPENCL_GEMM_TILING=", env, " is not a GEMM tiling: use one of ", names,
       " (unset: tuned for the device)");
}

// kTilings' index of `name` if it fits the device, else kTilingCount.
size_t cached_tiling(const Json& name) {
  if (!name.is_string()) return kTilingCount;
  for (size_t i = 0; i < kTilingCount; ++i)
    if (tiling_name(kTilings[i]) == name.get<std::string>()) return fits(kTilings[i], i) ? i : kTilingCount;
  return kTilingCount;
}

// Records the choice under `key` in the cache file at `path`, keeping the
// other devices' entries; where it says so when that fails.
std::string record(const std::string& path, const std::string& key, size_t index) {
  try {
    std::error_code error;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path(), error);
    Json cache = read_cache(path);
    cache[key] = tiling_name(kTilings[index]);
    write_file_atomically(path, cache.dump(2) + "\n");
    return "cached in " + path;
  } catch (const std::exception& e) {
    return std::string("not cached: ") + e.what();
  }
}

}  // namespace

std::string cache_dir() {
  auto env = [](const char* name) -> std::string {
    const char* value = environment::value(name);
    return value ? value : "";
  };
  if (std::string dir = env("SCRATCHFORMER_CACHE_DIR"); !dir.empty()) return dir;
  if (std::string dir = env("XDG_CACHE_HOME"); !dir.empty()) return dir + "/scratchformer";
  if (std::string dir = env("HOME"); !dir.empty()) return dir + "/.cache/scratchformer";
  return "";
}

std::string tuning_cache_file(const std::string& dir) { return dir + "/opencl-gemm-tilings.json"; }

TilingChoice choose_tiling(const std::string& dir) {
  if (size_t forced = forced_tiling(); forced < kTilingCount) return {forced, TilingSource::forced, ""};
  cl_device_id device = Runtime::get().device();
  const std::string key = cache_key(device), path = dir.empty() ? "" : tuning_cache_file(dir);
  if (!path.empty())
    if (size_t cached = cached_tiling(read_cache(path).value(key, Json())); cached < kTilingCount)
      return {cached, TilingSource::cached, ""};

  size_t index = tune();
  const Tiling& t = kTilings[index];
  std::string log = "opencl: tuned GEMM tiling for " + device_string(device, CL_DEVICE_NAME) + " (" +
                    device_string(device, CL_DRIVER_VERSION) + "): " + std::to_string(t.tm()) + "x" +
                    std::to_string(t.tn()) + "x" + std::to_string(t.tk) + ", " + std::to_string(t.wm) + "x" +
                    std::to_string(t.wn) + " per item (" +
                    (path.empty() ? "not cached: no cache folder" : record(path, key, index)) + ")";
  std::fprintf(stderr, "%s\n", log.c_str());
  return {index, TilingSource::tuned, log};
}

size_t gemm_tiling() {
  static const size_t index = choose_tiling(cache_dir()).index;
  return index;
}

}  // namespace sf::opencl_backend
