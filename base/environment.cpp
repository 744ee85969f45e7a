#include "environment.h"

#include <cstdlib>
#include <string>

#include "error.h"

namespace sf::environment {

namespace {

// Why each SCRATCHFORMER_* setting is a variable and not a config key: it
// must hold where there is no config, or before one is read.
//  - The MPI ones (timeout, shared sums) are read as MPI starts, first thing
//    in main: the ranks read the config over MPI, so its collectives, and
//    the timeout that guards them, run before any config exists.
//  - The OpenCL and bf16 ones describe this machine, not the experiment: a
//    config travels between machines, a device number or a forced kernel
//    level does not; and the tests and benchmarks, which run the kernels
//    without a config, force them through the same variables.
//  - The file steps are a test's hook into any command (translate and
//    export write files too), read at the process's first file step.
//  - The cache folder is where a machine keeps what it tuned, shared by
//    every config run there.
constexpr Variable kVariables[] = {
    {"SCRATCHFORMER_BF16_GEMM", "the fastest level this CPU runs",
     "forces the bf16 matrix products' level: portable, avx512_bf16, amx_bf16 (neon_bf16 on ARM)"},
    {"SCRATCHFORMER_CACHE_DIR", "$XDG_CACHE_HOME/scratchformer, else $HOME/.cache/scratchformer",
     "the folder of the OpenCL GEMM tilings tuned on this machine"},
    {"SCRATCHFORMER_FILE_STEPS", "no file step is counted",
     "list, KILL:N, INT:N, STOP:N, ENOSPC:N or POWER:N: a test acts at a save's N-th file step"},
    {"SCRATCHFORMER_MPI_SHARED_SUMS", "1", "0: ranks on one machine sum gradients by messages, not in shared memory"},
    {"SCRATCHFORMER_MPI_TIMEOUT", "30", "seconds a rank waits in a collective before it finds the ranks that died"},
    {"SCRATCHFORMER_OPENCL_DEVICE", "the first GPU, else the first device", "N: the OpenCL backend uses device N"},
    {"SCRATCHFORMER_OPENCL_GEMM_TILING", "tuned for the device", "forces the OpenCL GEMM's tiling, e.g. 128x128x16-8x8"},
    {"SCRATCHFORMER_OPENCL_SHAPES", "by the device's type", "cpu or gpu: forces the OpenCL kernels' launch shapes"},
    // Set by others: the system's cache folders, Open MPI's and launchers'.
    {"HOME", "no tuning cache (without SCRATCHFORMER_CACHE_DIR and XDG_CACHE_HOME)",
     "the user's home: the tuning cache's last choice of folder"},
    {"OMPI_COMM_WORLD_SIZE", "not started by Open MPI", "set by Open MPI's mpirun: MPI starts"},
    {"OMPI_MCA_osc_sm_backing_directory", "/dev/shm",
     "the folder of Open MPI's shared windows, checked for room for the gradient buckets"},
    {"PMIX_RANK", "not started by a PMIx launcher", "set by a PMIx launcher: MPI starts"},
    {"PMI_RANK", "not started by a PMI launcher", "set by a PMI-1 or PMI-2 launcher: MPI starts"},
    {"XDG_CACHE_HOME", "$HOME/.cache", "the user's cache folder: the tuning cache's is under it"},
};

}  // namespace

std::span<const Variable> variables() { return kVariables; }

const char* value(std::string_view name) {
  for (const Variable& variable : kVariables)
    if (name == variable.name) return std::getenv(variable.name);
  internal_fail("environment variable ", name, " is read but not in the table of base/environment.cpp");
}

}  // namespace sf::environment
