// The all-reduce table of `make MPI=1 bench`: the time to sum a buffer of
// floats over the ranks, from 1 KB to 64 MB, through our communicator (a
// gradient bucket's all-reduce: start_all_reduce_sum, then wait) or through
// a bare blocking MPI_Allreduce, beside the bandwidth of memcpy on this
// machine. Run under mpirun:
//
//   mpirun -np 2 BUILD/mpi/allreduce-bench ours|mpi
//
// Rank 0 prints one JSON line per size: {"bytes", "seconds"} (the mean over
// the timed repetitions, after warm-up ones), and, with `ours`, "memcpy_gbs",
// the best of memcpy between two buffers of that size. Every buffer is
// allocated and touched before it is timed, as a training run's buckets are.
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "train/mpi/communicator.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// Enough repetitions that a size takes about a tenth of a second, at least 5.
int repetitions(size_t bytes) { return static_cast<int>(std::clamp<size_t>((size_t{64} << 20) / bytes, 5, 2000)); }

double memcpy_gbs(size_t bytes) {
  std::vector<char> from(bytes, 1), to(bytes, 0);
  double best = 1e30;
  for (int r = 0; r < repetitions(bytes); ++r) {
    auto start = Clock::now();
    std::memcpy(to.data(), from.data(), bytes);
    best = std::min(best, seconds_since(start));
  }
  return bytes / best / 1e9;
}

// `sum(values)` for each size, timed; `sync()` lines the ranks up first.
template <class Sum, class Sync>
void table(bool rank0, bool with_memcpy, Sum sum, Sync sync) {
  for (size_t bytes = size_t{1} << 10; bytes <= size_t{64} << 20; bytes *= 4) {
    std::vector<float> values(bytes / sizeof(float), 1.0f);
    const int reps = repetitions(bytes), warmup = std::max(2, reps / 10);
    for (int r = 0; r < warmup; ++r) sum(values);
    sync();
    auto start = Clock::now();
    for (int r = 0; r < reps; ++r) sum(values);
    double seconds = seconds_since(start) / reps;
    if (!rank0) continue;
    std::printf("{\"bytes\": %zu, \"seconds\": %.9g", bytes, seconds);
    if (with_memcpy) std::printf(", \"memcpy_gbs\": %.4g", memcpy_gbs(bytes));
    std::printf("}\n");
    std::fflush(stdout);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "ours") {
    auto comm = sf::train::mpi_world(&argc, &argv);
    std::vector<double> token(1);
    table(
        comm->rank() == 0, true, [&](std::vector<float>& v) { comm->wait(comm->start_all_reduce_sum(v)); },
        [&] { comm->all_reduce_sum(token); });
    return 0;
  }
  if (mode == "mpi") {
    MPI_Init(&argc, &argv);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    table(
        rank == 0, false,
        [](std::vector<float>& v) {
          MPI_Allreduce(MPI_IN_PLACE, v.data(), static_cast<int>(v.size()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        },
        [] { MPI_Barrier(MPI_COMM_WORLD); });
    MPI_Finalize();
    return 0;
  }
  std::fprintf(stderr, "usage: mpirun -np N %s ours|mpi\n", argv[0]);
  return 2;
}
