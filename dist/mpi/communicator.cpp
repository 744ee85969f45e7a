// The MPI communicator: the collectives of dist/communicator.h over MPI, and
// the timeout that turns a rank that stops responding into one clear error.
// Its parts, each a file of dist/mpi/: the communication thread that makes
// every MPI call (comm_thread.h), the wait loop and the census of the ranks
// that no longer respond (liveness.h), the gradients' sum by messages in a
// ring (ring.h), and in memory the ranks of one machine share
// (shared_window.h). This file starts and ends MPI and hands each collective
// to the part that runs it.
//
// Everything travels on a duplicate of MPI_COMM_WORLD (MPI_Comm_dup): the
// census's point-to-point messages, on their own tags, cannot meet anything
// else. MPI's default error handler, MPI_ERRORS_ARE_FATAL, ends the job on any
// MPI error, so no call's return code needs checking.
#include "communicator.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "base/environment.h"
#include "base/error.h"
#include "comm_thread.h"
#include "liveness.h"
#include "ranks.h"
#include "ring.h"
#include "shared_window.h"

namespace sf::dist {

namespace {

// MPI counts elements in an int: a longer span goes as several collectives.
constexpr size_t kMaxCount = INT_MAX;

// The MPI type of a reduction's elements.
template <class T>
MPI_Datatype mpi_type() {
  if constexpr (std::is_same_v<T, float>) {
    return MPI_FLOAT;
  } else if constexpr (std::is_same_v<T, double>) {
    return MPI_DOUBLE;
  } else {
    static_assert(std::is_same_v<T, int64_t>);
    return MPI_INT64_T;
  }
}

class MpiWorld final : public Communicator {
 public:
  // MPI starts on the communication thread, which then serves the queue.
  MpiWorld(int* argc, char*** argv, Clock::duration timeout, bool shared_sums)
      : liveness_(ranks_, timeout, thread_.abort_code()), shared_sums_(shared_sums) {
    thread_.start([&] { start_mpi(argc, argv); });
  }
  MpiWorld(const MpiWorld&) = delete;
  MpiWorld& operator=(const MpiWorld&) = delete;

  // The final barrier: a rank that ends early (out of step with the others)
  // keeps answering censuses here, where MPI_Finalize would just block. It has
  // a communicator of its own so that it cannot pass for the others' collectives.
  ~MpiWorld() override {
    collective(kFinalBarrier, 0, [&](size_t, int, MPI_Request* r) { MPI_Ibarrier(final_comm_, r); });
    thread_.run_and_wait([this] {
      rings_.free_all();
      window_.free();
      MPI_Comm_free(&final_comm_);
      MPI_Comm_free(&ranks_.comm);
      MPI_Finalize();
    });
    thread_.stop();
  }

  int rank() const override { return ranks_.rank; }
  int size() const override { return ranks_.size; }
  int local_rank() const override { return local_rank_; }
  int local_size() const override { return local_size_; }

  void all_reduce_sum(std::span<double> values) override { reduce(values, MPI_SUM); }
  void all_reduce_sum(std::span<int64_t> values) override { reduce(values, MPI_SUM); }
  void all_reduce_max(std::span<int64_t> values) override { reduce(values, MPI_MAX); }

  void broadcast(std::span<std::byte> bytes, int root) override {
    if (root < 0 || root >= size()) internal_fail("broadcast from rank ", root, " of ", size());
    collective(kBroadcast, bytes.size(), [&](size_t at, int count, MPI_Request* r) {
      MPI_Ibcast(bytes.data() + at, count, MPI_BYTE, root, ranks_.comm, r);
    });
  }

  // Not split into pieces: the pieces of every rank would interleave in `all`.
  void all_gather(std::span<const std::byte> mine, std::span<std::byte> all) override {
    if (all.size() != mine.size() * size())
      internal_fail("all_gather: ", all.size(), " bytes for ", size(), " ranks of ", mine.size());
    if (mine.size() > kMaxCount) internal_fail("all_gather: ", mine.size(), " bytes per rank, more than MPI's INT_MAX");
    collective(kAllGather, mine.size(), [&](size_t, int count, MPI_Request* r) {
      MPI_Iallgather(mine.data(), count, MPI_BYTE, all.data(), count, MPI_BYTE, ranks_.comm, r);
    });
  }

  // One MPI_Iallgatherv per array, started together and awaited together.
  void all_gather_in_place(const std::vector<Runs>& arrays) override { gather_runs(arrays, -1); }
  // The same with MPI_Igatherv.
  void gather_in_place(const std::vector<Runs>& arrays, int root) override {
    if (root < 0 || root >= size()) internal_fail("gather to rank ", root, " of ", size());
    gather_runs(arrays, root);
  }

  // Queued: they run on the communication thread while the caller goes on.
  Request start_all_reduce_sum(std::span<float> values) override {
    std::vector<int64_t> begins;
    for (int c = 0; c <= size(); ++c) begins.push_back(int64_t(chunk_begin(values.size(), size(), c)));
    return thread_.post([=, this] { sum(values, begins, true); });
  }
  Request start_reduce_scatter_sum(std::span<float> values, std::vector<int64_t> begins) override {
    if (begins.size() != size_t(size()) + 1 || begins.front() != 0 || begins.back() != int64_t(values.size()) ||
        !std::is_sorted(begins.begin(), begins.end()))
      internal_fail("reduce-scatter: ", begins.size(), " offsets that do not cut ", values.size(), " elements into ",
                    size(), " runs");
    return thread_.post([=, this] { sum(values, begins, false); });
  }

  int64_t bytes_sent() const override { return bytes_sent_; }
  SumPaths sum_paths() const override { return {sums_in_shared_memory_, sums_by_messages_}; }

  std::vector<std::span<float>> shared_buffers(const std::vector<size_t>& elements) override {
    if (!shared_sums_ || size() == 1 || local_size_ != size()) return {};
    const WindowLayout layout(elements);
    thread_.run_and_wait([&] { window_.free(); });
    if (!shared_memory_holds(*this, layout.part_bytes() * size_t(local_size_), said_no_room_)) return {};
    thread_.run_and_wait([&] { window_.allocate(layout); });
    return window_.buffers(layout);
  }

  void wait(Request request) override { thread_.wait(request); }
  void abort(int code) override { thread_.abort(code); }

 private:
  void start_mpi(int* argc, char*** argv) {
    int provided = 0;
    MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
    if (provided < MPI_THREAD_FUNNELED) {
      MPI_Finalize();
      fail("this MPI library does not allow a threaded program (MPI_THREAD_FUNNELED)");
    }
    MPI_Comm_dup(MPI_COMM_WORLD, &ranks_.comm);
    MPI_Comm_dup(MPI_COMM_WORLD, &final_comm_);
    MPI_Comm_rank(ranks_.comm, &ranks_.rank);
    MPI_Comm_size(ranks_.comm, &ranks_.size);
    // The ranks that share this machine's memory: the machine's ranks.
    MPI_Comm local;
    MPI_Comm_split_type(ranks_.comm, MPI_COMM_TYPE_SHARED, ranks_.rank, MPI_INFO_NULL, &local);
    MPI_Comm_rank(local, &local_rank_);
    MPI_Comm_size(local, &local_size_);
    MPI_Comm_free(&local);
  }

  // A bucket's sum, on the communication thread: in the shared window when
  // the bucket lies there, else by the ring's messages.
  void sum(std::span<float> values, const std::vector<int64_t>& begins, bool all_gather) {
    if (size() == 1) return;
    if (window_.holds(values)) {
      bytes_sent_ += window_.sum(values, begins, all_gather);
      ++sums_in_shared_memory_;
      return;
    }
    bytes_sent_ += rings_.sum(values, begins, all_gather);
    ++sums_by_messages_;
  }

  // Each array's runs to `root`, or to every rank when root is -1.
  void gather_runs(const std::vector<Runs>& arrays, int root) {
    const int rank = ranks_.rank;
    std::vector<std::vector<int>> counts(arrays.size()), displacements(arrays.size());
    for (size_t a = 0; a < arrays.size(); ++a) {
      const std::vector<int64_t>& begins = arrays[a].begins;
      const bool whole = root < 0 || rank == root;
      if (begins.size() != size_t(size()) + 1 || begins.back() > int64_t(kMaxCount) ||
          int64_t(arrays[a].values.size()) != (whole ? begins.back() : begins[rank + 1] - begins[rank]))
        internal_fail("gathering runs: ", begins.size(), " offsets for ", size(), " ranks, and ", arrays[a].values.size(),
                      " elements here");
      for (int r = 0; r < size(); ++r) {
        if (begins[r + 1] < begins[r]) internal_fail("gathering runs: rank ", r, "'s run ends before it begins");
        displacements[a].push_back(int(begins[r]));
        counts[a].push_back(int(begins[r + 1] - begins[r]));
      }
      if (root != rank) bytes_sent_ += counts[a][rank] * int64_t(sizeof(float)) * (root < 0 ? size() - 1 : 1);
    }
    thread_.run_and_wait([&] {
      std::vector<MPI_Request> requests(arrays.size());
      for (size_t a = 0; a < arrays.size(); ++a) {
        float* values = arrays[a].values.data();
        if (root < 0)
          MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, values, counts[a].data(), displacements[a].data(),
                          MPI_FLOAT, ranks_.comm, &requests[a]);
        else if (rank == root)
          MPI_Igatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, values, counts[a].data(), displacements[a].data(), MPI_FLOAT,
                       root, ranks_.comm, &requests[a]);
        else
          MPI_Igatherv(values, counts[a][rank], MPI_FLOAT, nullptr, nullptr, nullptr, MPI_FLOAT, root, ranks_.comm,
                       &requests[a]);
      }
      liveness_.wait_for(requests, kAllGather);
    });
  }

  template <class T>
  void reduce(std::span<T> values, MPI_Op op) {
    collective(kAllReduce, values.size(), [&](size_t at, int count, MPI_Request* r) {
      MPI_Iallreduce(MPI_IN_PLACE, values.data() + at, count, mpi_type<T>(), op, ranks_.comm, r);
    });
  }

  // Runs one collective over `count` elements on the communication thread,
  // as requests of at most kMaxCount elements, and waits for it;
  // issue(at, n, request) starts the piece [at, at + n). An empty span still
  // starts one (empty) collective: every rank joins it.
  template <class Issue>
  void collective(Op op, size_t count, Issue issue) {
    thread_.run_and_wait([&] {
      std::vector<MPI_Request> requests;
      size_t at = 0;
      do {
        int n = int(std::min(count - at, kMaxCount));
        requests.emplace_back();
        issue(at, n, &requests.back());
        at += n;
      } while (at < count);
      liveness_.wait_for(requests, op);
    });
  }

  MpiRanks ranks_;       // on our duplicate of MPI_COMM_WORLD
  MPI_Comm final_comm_;  // another, for the final barrier only
  int local_rank_ = 0, local_size_ = 1;
  CommunicationThread thread_;
  Liveness liveness_;
  RingSums rings_{ranks_, liveness_};     // the sums by messages, each bucket's ring by its buffer
  SharedWindow window_{ranks_, liveness_};  // the buffers of shared_buffers()
  bool shared_sums_;                        // SCRATCHFORMER_MPI_SHARED_SUMS
  bool said_no_room_ = false;               // that shared memory had no room for the buckets
  std::atomic<int64_t> bytes_sent_{0};
  std::atomic<int64_t> sums_in_shared_memory_{0}, sums_by_messages_{0};  // sum_paths()
};

}  // namespace

bool started_by_launcher() {
  for (const char* variable : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK"})
    if (environment::value(variable)) return true;
  return false;
}

std::unique_ptr<Communicator> mpi_world(int* argc, char*** argv) {
  // A bad value: exit before MPI starts.
  Clock::duration timeout = timeout_from_environment();
  bool shared_sums = shared_sums_from_environment();
  return std::make_unique<MpiWorld>(argc, argv, timeout, shared_sums);
}

}  // namespace sf::dist
