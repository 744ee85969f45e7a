// Choosing the tiled GEMM's tiling (gemm.h: kTilings) for a device: the
// fastest candidate on a couple of representative products, timed at the
// first GEMM in GPU shapes and cached in a JSON file, keyed by the device's
// name, its driver's version and a digest of the kernel's programs (so a new
// driver or a changed kernel is tuned anew).
#pragma once
#include <cstddef>
#include <string>

namespace sf::opencl_backend {

enum class TilingSource { forced, cached, tuned };

struct TilingChoice {
  size_t index;  // in kTilings
  TilingSource how;
  std::string log;  // the line printed to stderr when tuned, else empty
};

// The tuning cache's folder: $SCRATCHFORMER_CACHE_DIR, else
// $XDG_CACHE_HOME/scratchformer, else $HOME/.cache/scratchformer (empty when
// none of them is set: nothing is cached).
std::string cache_dir();

// The cache file in `dir`.
std::string tuning_cache_file(const std::string& dir);

// The tiling for the runtime's device: SCRATCHFORMER_OPENCL_GEMM_TILING's, if
// set (a name of tiling_name's; another is an sf::Error listing them); else
// the one the cache file in `dir` records for the device; else the fastest
// candidate, timed now (about a second), recorded there and announced on
// stderr. A cache file that cannot be read or parsed is replaced; one that
// cannot be written leaves the choice to be tuned again by the next process.
TilingChoice choose_tiling(const std::string& dir);

// choose_tiling(cache_dir()).index, chosen once per process.
size_t gemm_tiling();

}  // namespace sf::opencl_backend
