// The all-reduce table of `make MPI=1 bench`: the time to sum a buffer of
// floats over the ranks, from 1 KB to 64 MB, through our communicator (a
// gradient bucket's all-reduce: start_all_reduce_sum, then wait) or through
// a bare blocking MPI_Allreduce, beside the bandwidth of memcpy on this
// machine. Run under mpirun:
//
//   mpirun -np 2 BUILD/mpi/allreduce-bench ours|mpi|check
//
// Rank 0 prints one JSON line per size: {"bytes", "seconds"} (the mean over
// the timed repetitions, after warm-up ones), and, with `ours`, "memcpy_gbs",
// the best of memcpy between two buffers of that size. Every buffer is
// allocated and touched before it is timed, as a training run's buckets are;
// ours are where a training run's are: in the memory the communicator shares
// among the ranks where it has some (SCRATCHFORMER_MPI_SHARED_SUMS=0: in the
// rank's own, summed by the ring).
// `check` times nothing: it sums known values through our communicator, in
// buckets from one element to several of the ring's segments per chunk, in
// the rank's own memory (the ring) and in shared memory (which it requires
// where the ranks share a machine, unless SCRATCHFORMER_MPI_SHARED_SUMS=0),
// and exits 1 at the first wrong element, or if a sum ran elsewhere than
// there (tests/test_mpi.cpp runs it). Shared memory holds every rank's
// buckets at once, 20 MB a rank: where it has no room for them all (a
// container's /dev/shm holds 64 MB), the largest are left out of that part,
// and rank 0 says so.
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "base/environment.h"
#include "dist/mpi/communicator.h"

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

// `sum(values)` for each size, timed, over `buffer(n)` (n floats); `sync()`
// lines the ranks up first.
template <class Buffer, class Sum, class Sync>
void table(bool rank0, bool with_memcpy, Buffer buffer, Sum sum, Sync sync) {
  for (size_t bytes = size_t{1} << 10; bytes <= size_t{64} << 20; bytes *= 4) {
    std::span<float> values = buffer(bytes / sizeof(float));
    std::fill(values.begin(), values.end(), 1.0f);
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

// Rank r's element i: small integers, so that every sum is exact in float.
float known_value(int rank, size_t i) { return static_cast<float>((rank + 1) * (i % 1000 + 1)); }

// The all-reduce and the reduce-scatter (runs of unequal lengths, one empty)
// of known values in buffers of `sizes`, each from `buffers`; 0 when every
// element holds the exact sum.
int check_sums(sf::dist::Communicator& comm, const std::vector<size_t>& sizes,
               const std::vector<std::span<float>>& buffers) {
  const int ranks = comm.size(), rank = comm.rank();
  const float rank_sum = static_cast<float>(ranks * (ranks + 1) / 2);
  for (size_t k = 0; k < sizes.size(); ++k) {
    const size_t n = sizes[k];
    std::span<float> values = buffers[k];
    for (size_t i = 0; i < n; ++i) values[i] = known_value(rank, i);
    comm.wait(comm.start_all_reduce_sum(values));
    for (size_t i = 0; i < n; ++i)
      if (values[i] != rank_sum * known_value(0, i)) {
        std::fprintf(stderr, "rank %d: all-reduce of %zu floats: element %zu is %g, not %g\n", rank, n, i, values[i],
                     rank_sum * known_value(0, i));
        return 1;
      }
    // The reduce-scatter's runs: rank 0's empty, rank r's of a length in proportion to r.
    std::vector<int64_t> begins{0, 0};
    const int64_t weights = ranks * (ranks - 1) / 2;
    for (int r = 1; r < ranks; ++r) begins.push_back(r + 1 == ranks ? int64_t(n) : begins.back() + int64_t(n) * r / weights);
    for (size_t i = 0; i < n; ++i) values[i] = known_value(rank, i);
    comm.wait(comm.start_reduce_scatter_sum(values, begins));
    for (int64_t i = begins[rank]; i < begins[rank + 1]; ++i)
      if (values[size_t(i)] != rank_sum * known_value(0, size_t(i))) {
        std::fprintf(stderr, "rank %d: reduce-scatter of %zu floats: element %lld is %g, not %g\n", rank, n,
                     static_cast<long long>(i), values[size_t(i)], rank_sum * known_value(0, size_t(i)));
        return 1;
      }
  }
  return 0;
}

// 0 when this rank has run `in_shared_memory` of its sums there and
// `by_messages` by messages.
int check_paths(const sf::dist::Communicator& comm, size_t in_shared_memory, size_t by_messages) {
  const sf::dist::Communicator::SumPaths paths = comm.sum_paths();
  if (paths.in_shared_memory == int64_t(in_shared_memory) && paths.by_messages == int64_t(by_messages)) return 0;
  std::fprintf(stderr, "rank %d: %lld sums ran in shared memory and %lld by messages, not %zu and %zu\n", comm.rank(),
               static_cast<long long>(paths.in_shared_memory), static_cast<long long>(paths.by_messages),
               in_shared_memory, by_messages);
  return 1;
}

// The sums in the rank's own memory, then in shared memory: two sums (the
// all-reduce and the reduce-scatter) of each bucket.
int check(sf::dist::Communicator& comm) {
  const std::vector<size_t> sizes = {1, 1000, 262144 * 3 + 17, (1 << 22) + 5};
  std::vector<std::vector<float>> own;
  std::vector<std::span<float>> buffers;
  for (size_t n : sizes) buffers.push_back(own.emplace_back(n));
  if (check_sums(comm, sizes, buffers) != 0 || check_paths(comm, 0, 2 * sizes.size()) != 0) return 1;
  const char* shared_sums = sf::environment::value("SCRATCHFORMER_MPI_SHARED_SUMS");
  if (comm.local_size() < comm.size() || (shared_sums && std::string(shared_sums) == "0")) return 0;
  // As many buckets, smallest first, as shared memory has room for, as the
  // communicator finds it (statvfs, agreed by every rank).
  std::vector<size_t> fitting = sizes;
  while (!fitting.empty() && (buffers = comm.shared_buffers(fitting)).empty()) fitting.pop_back();
  if (fitting.empty()) {
    std::fprintf(stderr, "rank %d: the %d ranks share this machine, and the communicator gave no shared memory\n",
                 comm.rank(), comm.size());
    return 1;
  }
  if (fitting.size() < sizes.size() && comm.rank() == 0) {
    size_t floats = 0;
    for (size_t n : sizes) floats += n;
    std::printf("shared memory has no room for the buckets of %zu floats and up on %d ranks: all of them need %zu "
                "MiB\n", sizes[fitting.size()], comm.size(), (floats * sizeof(float) * size_t(comm.size()) >> 20) + 1);
  }
  if (check_sums(comm, fitting, buffers) != 0) return 1;
  return check_paths(comm, 2 * fitting.size(), 2 * sizes.size());
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "ours") {
    auto comm = sf::dist::mpi_world(&argc, &argv);
    std::vector<double> token(1);
    std::vector<float> own;
    table(
        comm->rank() == 0, true,
        [&](size_t n) {
          std::vector<std::span<float>> shared = comm->shared_buffers({n});
          if (!shared.empty()) return shared[0];
          own.assign(n, 0.0f);
          return std::span<float>(own);
        },
        [&](std::span<float> v) { comm->wait(comm->start_all_reduce_sum(v)); }, [&] { comm->all_reduce_sum(token); });
    return 0;
  }
  if (mode == "check") return check(*sf::dist::mpi_world(&argc, &argv));
  if (mode == "mpi") {
    MPI_Init(&argc, &argv);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    std::vector<float> own;
    table(
        rank == 0, false,
        [&](size_t n) {
          own.assign(n, 0.0f);
          return std::span<float>(own);
        },
        [](std::span<float> v) {
          MPI_Allreduce(MPI_IN_PLACE, v.data(), static_cast<int>(v.size()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        },
        [] { MPI_Barrier(MPI_COMM_WORLD); });
    MPI_Finalize();
    return 0;
  }
  std::fprintf(stderr, "usage: mpirun -np N %s ours|mpi|check\n", argv[0]);
  return 2;
}
