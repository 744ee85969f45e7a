// The MPI communicator: the collectives of dist/communicator.h over MPI, and
// the timeout that turns a rank that stops responding into one clear error.
//
// The communication thread. MPI moves data only while the process is inside
// an MPI call (Open MPI runs no progress thread of its own): that is MPI's
// progress rule. So a thread of our own makes every MPI call of the process,
// MPI_Init_thread included (MPI_THREAD_FUNNELED: MPI's main thread is this
// one). The other threads hand it collectives through a queue, which it runs
// one after another in the order they came, the same order on every rank (MPI's
// rule for collectives). A gradient bucket's all-reduce thus runs while the
// compute threads run backward's products; a blocking collective (a
// broadcast, the loss's sum) is a queued one that its caller waits for.
//
// Waiting. The thread starts each collective's requests and completes them in
// one wait loop of ours that tests them (MPI_Testall): without pause at first,
// since most collectives end within microseconds, then with short sleeps, so
// that a long wait (a peer still computing) leaves the core to the compute
// threads: where every core computes, a thread that spins or yields while it
// waits takes its share of them (measured: a step 2% slower with the overlap
// than without). A blocking MPI call would wait forever for a rank that
// hangs; our loop can look at the clock.
//
// The gradients' sum. MPI_Iallreduce (Open MPI's libnbc) copies its buffer
// into memory it allocates at every call and pays the page faults of it; a
// bucket's all-reduce is instead a ring (Patarasuk & Yuan 2009, the
// algorithm of NCCL and Horovod): the bucket is cut into one chunk per rank;
// in N - 1 steps each rank sends a chunk to the next rank and adds the chunk
// it receives from the previous one into its own (a reduce-scatter: each rank
// then holds one chunk summed over all ranks), and in N - 1 more steps passes
// the summed chunks around (an all-gather). Each rank sends and receives
// 2 (N - 1) / N of the bucket, the least any all-reduce can. ZeRO's
// reduce-scatter is the ring's first half alone, over chunks its caller cuts.
// The messages are
// persistent requests (MPI_Send_init, MPI_Recv_init) made once per bucket,
// a chunk travels in segments that land in two halves of a buffer allocated
// once, each added while the next arrives and while it is still in cache,
// and the sums are a vectorised loop of ours: nothing is allocated or
// faulted in per step. Every
// chunk's sum is formed on one rank and copied to the others, so every rank
// gets the same bits.
//
// The census. A wait that lasts SCRATCHFORMER_MPI_TIMEOUT seconds means some
// rank is not where it should be, but not which one. The rank that timed out
// (the detector) asks every other rank, point to point, "are you alive?", and
// collects replies for a short grace period. A rank answers from inside its own
// wait loop, so an answer means "alive, waiting in a collective"; no answer
// means dead, stopped, or stuck computing. The detector prints one line naming
// the silent ranks (or, when all answered, saying the ranks wait in collectives
// that do not match) and aborts the whole job. The other waiting ranks time
// out at about the same moment; answering an ask pushes a rank's own deadline
// back by a full timeout, and a detector asked by a lower rank leaves the
// report to it, so only one line is printed. A rank whose communication thread
// has no collective to run (its compute threads are busy) answers nothing
// until it has one, as a rank that never reaches a collective should.
//
// Shared memory. Where every rank runs on this machine, the buckets lie in
// memory that all the ranks map (an MPI-3 shared window,
// MPI_Win_allocate_shared), and a sum needs no messages at all: after a
// barrier (every rank's bucket is final), rank r adds chunk r of every rank's
// bucket and, for an all-reduce, stores the sum into every rank's bucket; a
// second barrier, and every rank holds every sum. Each rank reads and writes
// 2 (N - 1) / N of the bucket in the others' memory, as much as the ring
// sends, but at the speed of its own loads and stores: a message between two
// processes costs a copy into the receiver (Linux's process_vm_readv, ~25%
// slower than memcpy here) and the adding of it after; measured between 2
// ranks on a 2-core Xeon, a 16 MB bucket took 2.9 ms by the ring and 0.6 ms
// in shared memory. Ranks on several machines use the ring.
//
// Everything travels on a duplicate of MPI_COMM_WORLD (MPI_Comm_dup): the
// census's point-to-point messages, on their own tags, cannot meet anything
// else. MPI's default error handler, MPI_ERRORS_ARE_FATAL, ends the job on any
// MPI error, so no call's return code needs checking.
#include "communicator.h"

// Open MPI's mpi.h also declares the deprecated C++ bindings (MPI::), which
// we do not use and which do not compile cleanly under -Wextra.
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>
#include <pmix.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <exception>
#include <future>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "base/environment.h"
#include "base/error.h"
#include "base/platform.h"

namespace sf::dist {

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// Sequentially consistent operations on a word of the shared window, which
// other processes change too. (What std::atomic_ref does, with the builtins
// it is made of in GCC and Clang: libc++ has atomic_ref only from LLVM 19.)
template <class T>
struct SharedWord {
  T* word;
  T load() const { return __atomic_load_n(word, __ATOMIC_SEQ_CST); }
  T fetch_add(T value) { return __atomic_fetch_add(word, value, __ATOMIC_SEQ_CST); }
  T fetch_sub(T value) { return __atomic_fetch_sub(word, value, __ATOMIC_SEQ_CST); }
};

// What a rank waits in: for the messages, and as a census reply's content.
enum Op : int { kAllReduce, kBroadcast, kAllGather, kFinalBarrier };
constexpr const char* kOpNames[] = {"an all-reduce", "a broadcast", "an all-gather",
                                    "the final barrier (its program has ended)"};
// A census reply sends its Op from here: MPI may read an MPI_Isend's buffer
// until the send completes, and this array lives as long as the program.
constexpr int kOpCodes[] = {kAllReduce, kBroadcast, kAllGather, kFinalBarrier};

constexpr int kCensusAsk = 1;    // tag of "are you alive?" (no content)
constexpr int kCensusReply = 2;  // tag of the answer: the Op the rank waits in
constexpr int kRing = 3;         // tag of the ring all-reduce's chunks
// A ring step's chunk travels in segments of this many floats (1 MiB): two
// fit in a core's L2 cache, and each pays MPI's few microseconds per message.
constexpr size_t kSegment = size_t{1} << 18;

constexpr auto kSpin = 50us;       // a wait tests without pause this long: short collectives end sooner
constexpr auto kSleep = 100us;     // then sleeps between tests, leaving the core to the compute threads
// A message moves only while MPI is called: without a single-copy mechanism
// (where the machine forbids one process reading another's memory, CMA),
// Open MPI's shared memory copies it through small fragments, a few per call,
// and a wait that slept between tests would stretch a ring step of 8 MB from
// ~2 ms to ~16 ms. So a wait for a transfer of `bytes` tests without pause
// for as long as moving them could take at this rate before it sleeps.
constexpr double kSpinBytesPerNanosecond = 1.0;  // 1 GB/s
constexpr auto kPollEvery = 50ms;  // how often a waiting rank looks for census messages
constexpr auto kGrace = 2s;        // how long a census collects replies (at most the timeout)

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

// SCRATCHFORMER_MPI_SHARED_SUMS: 1 (the default) or 0.
bool shared_sums_from_environment() {
  const char* text = environment::value("SCRATCHFORMER_MPI_SHARED_SUMS");
  if (!text) return true;
  const std::string value = text;
  if (value != "0" && value != "1") fail("SCRATCHFORMER_MPI_SHARED_SUMS=\"", value, "\": expected 0 or 1");
  return value == "1";
}

// SCRATCHFORMER_MPI_TIMEOUT, in seconds (default 30). The bound keeps the
// deadline arithmetic inside the clock's range; 1e9 s is "never".
Clock::duration timeout_from_environment() {
  const char* text = environment::value("SCRATCHFORMER_MPI_TIMEOUT");
  if (!text) return 30s;
  char* end = nullptr;
  double seconds = std::strtod(text, &end);
  if (end == text || *end != '\0' || !std::isfinite(seconds) || seconds <= 0 || seconds > 1e9)
    fail("SCRATCHFORMER_MPI_TIMEOUT=\"", text, "\": expected a number of seconds > 0 (at most 1e9)");
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// One step of a bucket's ring: the chunk it sends and the one it receives,
// each cut into segments of at most kSegment elements, a message each. A
// reduce-scatter step receives segment k into half k % 2 of the ring's
// buffer and adds it into `add_into` while segment k + 1 arrives in the other
// half: the received values are added while still in cache, not after the
// whole chunk has gone through memory. An all-gather step receives in place.
struct RingStep {
  std::vector<MPI_Request> sends, receives;  // persistent, one per segment
  int64_t bytes = 0;                         // sent
  float* add_into = nullptr;                 // a reduce-scatter step's own chunk; null in the all-gather
  size_t add_count = 0;                      // its elements
};

// One bucket's ring (see the top of the file): its steps' persistent
// requests, made once, and the buffer the received segments land in.
struct Ring {
  size_t elements = 0;          // the bucket's
  std::vector<int64_t> begins;  // chunk c is [begins[c], begins[c + 1])
  bool all_gather = true;       // an all-reduce; else a reduce-scatter
  std::vector<RingStep> steps;  // N - 1, or 2 (N - 1) with the all-gather
  std::vector<float> received;  // two segments
};

// The shared window of the buckets: this rank's part, and where each
// rank's part lies in this process's memory. Every rank's part has the same
// layout, so a bucket at offset k of this rank's part is at offset k of each.
struct SharedWindow {
  MPI_Win window = MPI_WIN_NULL;
  std::span<float> mine;
  std::vector<float*> parts;  // by rank
  int64_t* arrived = nullptr;  // the barriers' count of arrivals, in rank 0's part
  uint32_t* opened = nullptr;  // barriers completed (a word to sleep on), beside it
  uint32_t* sleepers = nullptr;  // ranks asleep on it, or about to be
  int64_t barriers = 0;        // that this rank has passed
};
// Each part begins with a cache line for the barrier's counters, and each
// buffer in it on a cache line of its own.
constexpr size_t kLineFloats = 64 / sizeof(float);
constexpr size_t kHeaderFloats = kLineFloats;

class MpiWorld final : public Communicator {
 public:
  // MPI starts on the communication thread, which then serves the queue.
  MpiWorld(int* argc, char*** argv, Clock::duration timeout, bool shared_sums)
      : timeout_(timeout), shared_sums_(shared_sums) {
    std::promise<void> started;
    std::future<void> ready = started.get_future();
    thread_ = std::thread([&] {
      try {
        start_mpi(argc, argv);
      } catch (...) {
        started.set_exception(std::current_exception());
        return;
      }
      started.set_value();
      serve();
    });
    try {
      ready.get();
    } catch (...) {
      thread_.join();
      throw;
    }
  }
  MpiWorld(const MpiWorld&) = delete;
  MpiWorld& operator=(const MpiWorld&) = delete;

  // The final barrier: a rank that ends early (out of step with the others)
  // keeps answering censuses here, where MPI_Finalize would just block. It has
  // a communicator of its own so that it cannot pass for the others' collectives.
  ~MpiWorld() override {
    collective(kFinalBarrier, 0, [&](size_t, int, MPI_Request* r) { MPI_Ibarrier(final_comm_, r); });
    run_and_wait([this] {
      for (auto& [buffer, ring] : rings_) free_ring(ring);
      free_window();
      MPI_Comm_free(&final_comm_);
      MPI_Comm_free(&comm_);
      MPI_Finalize();
    });
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    work_.notify_all();
    thread_.join();
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  int local_size() const override { return local_size_; }

  void all_reduce_sum(std::span<double> values) override { reduce(values, MPI_SUM); }
  void all_reduce_sum(std::span<int64_t> values) override { reduce(values, MPI_SUM); }
  void all_reduce_max(std::span<int64_t> values) override { reduce(values, MPI_MAX); }

  void broadcast(std::span<std::byte> bytes, int root) override {
    if (root < 0 || root >= size_) internal_fail("broadcast from rank ", root, " of ", size_);
    collective(kBroadcast, bytes.size(), [&](size_t at, int count, MPI_Request* r) {
      MPI_Ibcast(bytes.data() + at, count, MPI_BYTE, root, comm_, r);
    });
  }

  // Not split into pieces: the pieces of every rank would interleave in `all`.
  void all_gather(std::span<const std::byte> mine, std::span<std::byte> all) override {
    if (all.size() != mine.size() * size_)
      internal_fail("all_gather: ", all.size(), " bytes for ", size_, " ranks of ", mine.size());
    if (mine.size() > kMaxCount) internal_fail("all_gather: ", mine.size(), " bytes per rank, more than MPI's INT_MAX");
    collective(kAllGather, mine.size(), [&](size_t, int count, MPI_Request* r) {
      MPI_Iallgather(mine.data(), count, MPI_BYTE, all.data(), count, MPI_BYTE, comm_, r);
    });
  }

  // One MPI_Iallgatherv per array, started together and awaited together.
  void all_gather_in_place(const std::vector<Runs>& arrays) override { gather_runs(arrays, -1); }
  // The same with MPI_Igatherv.
  void gather_in_place(const std::vector<Runs>& arrays, int root) override {
    if (root < 0 || root >= size_) internal_fail("gather to rank ", root, " of ", size_);
    gather_runs(arrays, root);
  }

  // Queued: they run on the communication thread while the caller goes on.
  Request start_all_reduce_sum(std::span<float> values) override {
    std::vector<int64_t> begins;
    for (int c = 0; c <= size_; ++c) begins.push_back(int64_t(chunk_begin(values.size(), c)));
    return post([=, this] { ring_sum(values, begins, true); });
  }
  Request start_reduce_scatter_sum(std::span<float> values, std::vector<int64_t> begins) override {
    if (begins.size() != size_t(size_) + 1 || begins.front() != 0 || begins.back() != int64_t(values.size()) ||
        !std::is_sorted(begins.begin(), begins.end()))
      internal_fail("reduce-scatter: ", begins.size(), " offsets that do not cut ", values.size(), " elements into ",
                    size_, " runs");
    return post([=, this] { ring_sum(values, begins, false); });
  }

  int64_t bytes_sent() const override { return bytes_sent_; }
  SumPaths sum_paths() const override { return {sums_in_shared_memory_, sums_by_messages_}; }

  // One window holds every buffer, each starting on a cache line of its own.
  std::vector<std::span<float>> shared_buffers(const std::vector<size_t>& elements) override {
    if (!shared_sums_ || size_ == 1 || local_size_ != size_) return {};
    std::vector<size_t> offsets;
    size_t total = 0;
    for (size_t n : elements) {
      offsets.push_back(total);
      total += (n + kLineFloats - 1) / kLineFloats * kLineFloats;
    }
    const size_t part_floats = kHeaderFloats + total;
    run_and_wait([&] { free_window(); });
    if (!shared_memory_holds(part_floats * sizeof(float) * size_t(local_size_))) return {};
    run_and_wait([&] {
      MPI_Info info;
      MPI_Info_create(&info);
      MPI_Info_set(info, "alloc_shared_noncontig", "true");  // each rank's part in its own pages
      float* mine = nullptr;
      MPI_Win_allocate_shared(MPI_Aint(part_floats * sizeof(float)), sizeof(float), info, comm_, &mine,
                              &shared_.window);
      MPI_Info_free(&info);
      std::fill(mine, mine + part_floats, 0.0f);  // the counter too
      shared_.mine = {mine + kHeaderFloats, total};
      for (int r = 0; r < size_; ++r) {
        MPI_Aint bytes = 0;
        int unit = 0;
        float* part = nullptr;
        MPI_Win_shared_query(shared_.window, r, &bytes, &unit, &part);
        if (size_t(bytes) < part_floats * sizeof(float))
          internal_fail("shared buffers: rank ", r, "'s part holds ", bytes, " bytes, not ", part_floats * sizeof(float));
        shared_.parts.push_back(part + kHeaderFloats);
      }
      shared_.arrived = reinterpret_cast<int64_t*>(shared_.parts[0] - kHeaderFloats);
      shared_.opened = reinterpret_cast<uint32_t*>(shared_.arrived + 1);
      shared_.sleepers = shared_.opened + 1;
      // Rank 0's counter is zero before any rank counts on it.
      MPI_Request request;
      MPI_Ibarrier(comm_, &request);
      wait_loop({&request, 1}, kAllReduce);
    });
    std::vector<std::span<float>> buffers;
    for (size_t i = 0; i < elements.size(); ++i) buffers.push_back(shared_.mine.subspan(offsets[i], elements[i]));
    return buffers;
  }

  void wait(Request request) override {
    std::unique_lock lock(mutex_);
    if (request >= next_request_) internal_fail("wait: request ", request, " was never started");
    done_.wait(lock, [&] { return pending_.count(request) == 0; });
    if (failure_) std::rethrow_exception(std::exchange(failure_, nullptr));
  }

  // MPI_Abort is an MPI call too: the communication thread makes it, as soon
  // as it sees the flag (between two tests of a wait, or at once when idle).
  void abort(int code) override {
    std::fflush(stdout);
    std::fflush(stderr);
    if (std::this_thread::get_id() == thread_.get_id()) mpi_abort(code);
    {
      std::lock_guard lock(mutex_);
      abort_code_ = code;
    }
    work_.notify_all();
    for (;;) std::this_thread::sleep_for(1s);  // MPI_Abort ends this process
  }

 private:
  struct Job {
    Request request;
    std::function<void()> run;
  };

  void start_mpi(int* argc, char*** argv) {
    int provided = 0;
    MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
    if (provided < MPI_THREAD_FUNNELED) {
      MPI_Finalize();
      fail("this MPI library does not allow a threaded program (MPI_THREAD_FUNNELED)");
    }
    MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
    MPI_Comm_dup(MPI_COMM_WORLD, &final_comm_);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    // The ranks that share this machine's memory: the machine's ranks.
    MPI_Comm local;
    MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local);
    MPI_Comm_rank(local, &local_rank_);
    MPI_Comm_size(local, &local_size_);
    MPI_Comm_free(&local);
  }

  // ---- The queue ------------------------------------------------------------

  Request post(std::function<void()> run) {
    std::lock_guard lock(mutex_);
    Request request = next_request_++;
    queue_.push_back({request, std::move(run)});
    pending_.insert(request);
    work_.notify_all();
    return request;
  }

  void run_and_wait(std::function<void()> run) { wait(post(std::move(run))); }

  // The communication thread's loop: each job runs to its end, in order.
  void serve() {
    for (;;) {
      Job job;
      {
        std::unique_lock lock(mutex_);
        work_.wait(lock, [&] { return !queue_.empty() || stopping_ || abort_code_ >= 0; });
        if (abort_code_ >= 0) mpi_abort(abort_code_);
        if (queue_.empty()) return;  // stopping, after MPI_Finalize
        job = std::move(queue_.front());
        queue_.pop_front();
      }
      try {
        job.run();
      } catch (...) {
        std::lock_guard lock(mutex_);
        failure_ = std::current_exception();
      }
      {
        std::lock_guard lock(mutex_);
        pending_.erase(job.request);
      }
      done_.notify_all();
    }
  }

  // Ends every rank of the job with exit status `code`, adding nothing to
  // the line that said why. Open MPI's MPI_Abort prints an 8-line banner
  // ("MPI_ABORT was invoked on rank ...") before it asks the launcher to end
  // the job through PMIx, then exits; this asks it the same way, without the
  // banner. MPI_Abort remains for a launcher that does not serve PMIx.
  [[noreturn]] void mpi_abort(int code) {
    pmix_proc_t self;
    if (PMIx_Init(&self, nullptr, 0) == PMIX_SUCCESS && PMIx_Abort(code, nullptr, nullptr, 0) == PMIX_SUCCESS)
      std::_Exit(code);
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);  // MPI_Abort does not return; this says so to the compiler
  }

  // Each array's runs to `root`, or to every rank when root is -1.
  void gather_runs(const std::vector<Runs>& arrays, int root) {
    std::vector<std::vector<int>> counts(arrays.size()), displacements(arrays.size());
    for (size_t a = 0; a < arrays.size(); ++a) {
      const std::vector<int64_t>& begins = arrays[a].begins;
      const bool whole = root < 0 || rank_ == root;
      if (begins.size() != size_t(size_) + 1 || begins.back() > int64_t(kMaxCount) ||
          int64_t(arrays[a].values.size()) != (whole ? begins.back() : begins[rank_ + 1] - begins[rank_]))
        internal_fail("gathering runs: ", begins.size(), " offsets for ", size_, " ranks, and ", arrays[a].values.size(),
                      " elements here");
      for (int r = 0; r < size_; ++r) {
        if (begins[r + 1] < begins[r]) internal_fail("gathering runs: rank ", r, "'s run ends before it begins");
        displacements[a].push_back(int(begins[r]));
        counts[a].push_back(int(begins[r + 1] - begins[r]));
      }
      if (root != rank_) bytes_sent_ += counts[a][rank_] * int64_t(sizeof(float)) * (root < 0 ? size_ - 1 : 1);
    }
    run_and_wait([&] {
      std::vector<MPI_Request> requests(arrays.size());
      for (size_t a = 0; a < arrays.size(); ++a) {
        float* values = arrays[a].values.data();
        if (root < 0)
          MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, values, counts[a].data(), displacements[a].data(),
                          MPI_FLOAT, comm_, &requests[a]);
        else if (rank_ == root)
          MPI_Igatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, values, counts[a].data(), displacements[a].data(), MPI_FLOAT,
                       root, comm_, &requests[a]);
        else
          MPI_Igatherv(values, counts[a][rank_], MPI_FLOAT, nullptr, nullptr, nullptr, MPI_FLOAT, root, comm_,
                       &requests[a]);
      }
      wait_loop(requests, kAllGather);
    });
  }

  // ---- Collectives, on the communication thread -----------------------------

  template <class T>
  void reduce(std::span<T> values, MPI_Op op) {
    collective(kAllReduce, values.size(), [&](size_t at, int count, MPI_Request* r) {
      MPI_Iallreduce(MPI_IN_PLACE, values.data() + at, count, mpi_type<T>(), op, comm_, r);
    });
  }

  // Chunk c of an all-reduce of `n` elements: [chunk_begin(c), chunk_begin(c + 1)).
  size_t chunk_begin(size_t n, int c) const { return n / size_ * c + std::min<size_t>(c, n % size_); }

  // The persistent requests of `values`' ring, made at its first sum.
  // Reduce-scatter step s sends chunk (rank - s - 1) and receives chunk
  // (rank - s - 2), adding it into its own, so that rank r ends with chunk r
  // summed; all-gather step s sends chunk (rank - s), summed, and receives
  // chunk (rank - s - 1) in place. Sender and receiver cut a chunk into the
  // same segments, and MPI matches one sender's messages in the order sent.
  Ring& ring_of(std::span<float> values, const std::vector<int64_t>& begins, bool all_gather) {
    auto [found, added] = rings_.try_emplace(values.data());
    Ring& ring = found->second;
    if (!added && ring.elements == values.size() && ring.begins == begins && ring.all_gather == all_gather) return ring;
    free_ring(ring);  // another sum over the same address
    ring = Ring{values.size(), begins, all_gather, {}, {}};
    const int next = (rank_ + 1) % size_, previous = (rank_ + size_ - 1) % size_;
    auto chunk = [&](int c) { return ((c % size_) + size_) % size_; };
    ring.received.assign(2 * kSegment, 0.0f);  // touched once, here
    for (int s = 0; s < (all_gather ? 2 : 1) * (size_ - 1); ++s) {
      const bool scatter = s < size_ - 1;
      const int step = scatter ? s : s - (size_ - 1);
      const int send = chunk(rank_ - step - (scatter ? 1 : 0)), receive = chunk(rank_ - step - (scatter ? 2 : 1));
      RingStep& r = ring.steps.emplace_back();
      for (int64_t at = begins[send]; at < begins[send + 1]; at += kSegment) {
        const int count = int(std::min<int64_t>(kSegment, begins[send + 1] - at));
        MPI_Send_init(values.data() + at, count, MPI_FLOAT, next, kRing, comm_, &r.sends.emplace_back());
        r.bytes += count * int64_t(sizeof(float));
      }
      for (int64_t at = begins[receive], k = 0; at < begins[receive + 1]; at += kSegment, ++k) {
        const int count = int(std::min<int64_t>(kSegment, begins[receive + 1] - at));
        float* into = scatter ? ring.received.data() + (k % 2) * kSegment : values.data() + at;
        MPI_Recv_init(into, count, MPI_FLOAT, previous, kRing, comm_, &r.receives.emplace_back());
      }
      if (scatter) {
        r.add_into = values.data() + begins[receive];
        r.add_count = size_t(begins[receive + 1] - begins[receive]);
      }
    }
    return ring;
  }

  void free_ring(Ring& ring) {
    for (RingStep& step : ring.steps) {
      for (MPI_Request& r : step.sends) MPI_Request_free(&r);
      for (MPI_Request& r : step.receives) MPI_Request_free(&r);
    }
  }

  // Starts the first `count` of `requests` (an empty chunk has none: Open MPI
  // refuses MPI_Startall of none).
  static void start(std::vector<MPI_Request>& requests, size_t count) {
    if (count > 0) MPI_Startall(int(count), requests.data());
  }

  // Whether the machine's shared memory has room for `bytes` more, on every
  // rank's view of it. Open MPI backs a shared window with a file in its
  // osc_sm_backing_directory (/dev/shm unless `mpirun --mca` sets another),
  // and a file larger than the room left there maps, but its first store past
  // the room ends the process (SIGBUS): a container's default /dev/shm is
  // 64 MB. Without the room the ranks sum by messages, and rank 0 says why, once.
  bool shared_memory_holds(size_t bytes) {
    const char* set = environment::value("OMPI_MCA_osc_sm_backing_directory");
    const std::string folder = set ? set : "/dev/shm";
    struct statvfs fs {};
    const bool room =
        statvfs(folder.c_str(), &fs) == 0 && double(fs.f_bavail) * double(fs.f_frsize) >= double(bytes);
    std::vector<int64_t> lacking{room ? 0 : 1};
    all_reduce_max(lacking);
    if (lacking[0] == 0) return true;
    if (!said_no_room_) {
      say(*this, "data parallel: %s has no room for the gradient buckets (%.1f MiB for %d ranks), so the ranks sum "
                 "them by messages, more slowly; give it more (docker run --shm-size=1g)\n",
          folder.c_str(), double(bytes) / (1 << 20), local_size_);
      said_no_room_ = true;
    }
    return false;
  }

  void free_window() {
    if (shared_.window == MPI_WIN_NULL) return;
    MPI_Win_free(&shared_.window);
    shared_ = SharedWindow{};
  }

  // Waits until every rank is here; their loads and stores of the window
  // before it then happen before this rank's after it. A counter in rank 0's
  // part that only rises (MPI's own barrier, which advances only inside MPI
  // calls, made a 1 KB sum take half a millisecond of sleeping waiters). A
  // rank that waits longer than kSpin sleeps in the kernel on the `opened`
  // word (Linux's futex, on memory the processes share: base/platform.h)
  // until the last rank to arrive wakes it: no core time while a peer still
  // computes, and no sleep's delay after it arrives. The last rank makes the
  // system call only when some rank sleeps: `sleepers` rises before a rank
  // sleeps, and `opened` before the last rank reads it (both sequentially
  // consistent), so either the last rank sees the sleeper or the sleeper's
  // wait sees `opened` changed and returns at once.
  void window_barrier() {
    SharedWord<int64_t> arrived{shared_.arrived};
    SharedWord<uint32_t> opened{shared_.opened}, sleepers{shared_.sleepers};
    const int64_t all_here = ++shared_.barriers * size_;
    const uint32_t closed = opened.load();  // read before arriving: the last rank changes it after
    if (arrived.fetch_add(1) + 1 == all_here) {
      opened.fetch_add(1);
      if (sleepers.load() > 0) platform::wake_all_waiters(shared_.opened);
      return;
    }
    wait_until(
        kAllReduce, 0, [&] { return arrived.load() >= all_here; },
        [&](Clock::duration longest) {
          sleepers.fetch_add(1);
          platform::wait_while_equal(shared_.opened, closed, longest);
          sleepers.fetch_sub(1);
        });
  }

  // The sum of `values`, in the shared window (see the top of the file).
  // Rank r's chunk is summed in blocks that stay in L1 cache, always in rank
  // order, so every rank gets the same bits.
  void shared_sum(std::span<float> values, const std::vector<int64_t>& begins, bool all_gather) {
    // This rank's chunk, as offsets into every rank's part of the window.
    const size_t offset = size_t(values.data() - shared_.mine.data());
    const size_t begin = offset + size_t(begins[rank_]), end = offset + size_t(begins[rank_ + 1]);
    const std::vector<float*>& parts = shared_.parts;
    window_barrier();
    constexpr size_t kBlock = 1024;
    float sum[kBlock];
    for (size_t at = begin; at < end; at += kBlock) {
      const size_t n = std::min(kBlock, end - at);
      std::copy_n(parts[0] + at, n, sum);
      for (int r = 1; r < size_; ++r)
        for (size_t i = 0; i < n; ++i) sum[i] += parts[r][at + i];  // vectorised by the compiler
      if (!all_gather) {
        std::copy_n(sum, n, parts[rank_] + at);
        continue;
      }
      for (float* part : parts) std::copy_n(sum, n, part + at);
    }
    // The others' memory this rank read, and wrote: a ring's messages.
    bytes_sent_ += int64_t((end - begin) * sizeof(float)) * (size_ - 1) * (all_gather ? 2 : 1);
    window_barrier();
    ++sums_in_shared_memory_;
  }

  bool in_window(std::span<float> values) const {
    return !shared_.mine.empty() && values.data() >= shared_.mine.data() &&
           values.data() + values.size() <= shared_.mine.data() + shared_.mine.size();
  }

  void ring_sum(std::span<float> values, const std::vector<int64_t>& begins, bool all_gather) {
    if (size_ == 1) return;
    if (in_window(values)) return shared_sum(values, begins, all_gather);
    Ring& ring = ring_of(values, begins, all_gather);
    for (RingStep& step : ring.steps) {
      start(step.sends, step.sends.size());
      if (!step.add_into) {
        start(step.receives, step.receives.size());
        wait_loop(step.receives, kAllReduce, size_t(step.bytes));
      } else {
        const size_t segments = step.receives.size();
        start(step.receives, std::min<size_t>(2, segments));
        for (size_t k = 0; k < segments; ++k) {
          wait_loop({&step.receives[k], 1}, kAllReduce, kSegment * sizeof(float));
          float* into = step.add_into + k * kSegment;
          const float* add = ring.received.data() + (k % 2) * kSegment;
          for (size_t i = 0, n = std::min(kSegment, step.add_count - k * kSegment); i < n; ++i)
            into[i] += add[i];  // vectorised by the compiler
          if (k + 2 < segments) MPI_Start(&step.receives[k + 2]);
        }
      }
      wait_loop(step.sends, kAllReduce);
      bytes_sent_ += step.bytes;
    }
    ++sums_by_messages_;
  }

  // Runs one collective over `count` elements on the communication thread,
  // as requests of at most kMaxCount elements, and waits for it;
  // issue(at, n, request) starts the piece [at, at + n). An empty span still
  // starts one (empty) collective: every rank joins it.
  template <class Issue>
  void collective(Op op, size_t count, Issue issue) {
    run_and_wait([&] {
      std::vector<MPI_Request> requests;
      size_t at = 0;
      do {
        int n = int(std::min(count - at, kMaxCount));
        requests.emplace_back();
        issue(at, n, &requests.back());
        at += n;
      } while (at < count);
      wait_loop(requests, op);
    });
  }

  // Tests until `requests` are done.
  void wait_loop(std::span<MPI_Request> requests, Op op, size_t bytes = 0) {
    wait_until(op, bytes, [&] {
      int done = 0;
      MPI_Testall(int(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE);
      return done != 0;
    });
  }

  // The one wait loop: tests until done() says so, answers censuses, and runs
  // one when the timeout passes. `bytes`: what the awaited transfer moves.
  // After the spin, block(longest) pauses between tests, at most `longest`
  // (until the next census poll): by default a sleep of kSleep.
  template <class Done>
  void wait_until(Op op, size_t bytes, Done done) {
    wait_until(op, bytes, done, [](Clock::duration) { std::this_thread::sleep_for(kSleep); });
  }
  template <class Done, class Block>
  void wait_until(Op op, size_t bytes, Done done, Block block) {
    waiting_in_ = op;
    const auto since = Clock::now();
    const auto spin = kSpin + std::chrono::nanoseconds(int64_t(double(bytes) / kSpinBytesPerNanosecond));
    auto deadline = since + timeout_, next_poll = since + kPollEvery;
    for (;;) {
      if (done()) return;
      // (A signal may cut a sleep short; the clock, not the sleeps, decides.)
      const auto now = Clock::now();
      if (now >= next_poll) {
        next_poll = now + kPollEvery;
        if (serve_census(nullptr) < size_) deadline = now + timeout_;
      }
      if (now >= deadline) {
        census(op, since);  // returns only if a lower rank runs its own
        deadline = Clock::now() + timeout_;
      }
      if (abort_code_ >= 0) mpi_abort(abort_code_);
      if (now - since >= spin) block(std::min(next_poll, deadline) - now);
    }
  }

  // Receives the census messages that have arrived: answers each ask with the
  // Op this rank waits in; records each reply in `replies` (a detector's), or
  // drops it (a reply to a census this rank left to a lower rank). Returns the
  // lowest rank that asked, or size_ if none did.
  int serve_census(std::vector<int>* replies) {
    int lowest_asker = size_;
    for (;;) {
      int arrived = 0;
      MPI_Status status;
      MPI_Iprobe(MPI_ANY_SOURCE, kCensusAsk, comm_, &arrived, &status);
      if (!arrived) break;
      MPI_Recv(nullptr, 0, MPI_INT, status.MPI_SOURCE, kCensusAsk, comm_, MPI_STATUS_IGNORE);
      MPI_Request reply;  // freed at once: MPI completes it on its own
      MPI_Isend(&kOpCodes[waiting_in_], 1, MPI_INT, status.MPI_SOURCE, kCensusReply, comm_, &reply);
      MPI_Request_free(&reply);
      lowest_asker = std::min(lowest_asker, status.MPI_SOURCE);
    }
    for (;;) {
      int arrived = 0, op = 0;
      MPI_Status status;
      MPI_Iprobe(MPI_ANY_SOURCE, kCensusReply, comm_, &arrived, &status);
      if (!arrived) break;
      MPI_Recv(&op, 1, MPI_INT, status.MPI_SOURCE, kCensusReply, comm_, MPI_STATUS_IGNORE);
      if (replies) (*replies)[status.MPI_SOURCE] = op;
    }
    return lowest_asker;
  }

  // This rank's wait in `op`, begun at `since`, timed out: asks every other
  // rank, collects replies for the grace period, reports and ends the job.
  // Returns instead if a lower rank asks meanwhile: it runs a census too, and
  // reports for both.
  void census(Op op, Clock::time_point since) {
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      MPI_Request ask;
      MPI_Isend(nullptr, 0, MPI_INT, r, kCensusAsk, comm_, &ask);
      MPI_Request_free(&ask);
    }
    std::vector<int> replies(size_, -1);  // each rank's Op, -1 while it has not answered
    replies[rank_] = op;
    const auto end = Clock::now() + std::min<Clock::duration>(kGrace, timeout_);
    while (Clock::now() < end && std::count(replies.begin(), replies.end(), -1) > 0) {
      if (serve_census(&replies) < rank_) return;
      std::this_thread::sleep_for(kSleep);
    }

    std::ostringstream line;
    line.setf(std::ios::fixed);
    line.precision(1);
    const double waited = std::chrono::duration<double>(Clock::now() - since).count();
    std::vector<int> silent;
    for (int r = 0; r < size_; ++r)
      if (replies[r] < 0) silent.push_back(r);
    line << "scratchformer: error: ";
    if (!silent.empty()) {
      line << (silent.size() == 1 ? "rank " : "ranks ");
      for (size_t i = 0; i < silent.size(); ++i) line << (i ? ", " : "") << silent[i];
      line << " (of " << size_ << ") " << (silent.size() == 1 ? "has" : "have") << " not responded for " << waited
           << " s while rank " << rank_ << " waited in " << kOpNames[op] << ": "
           << (silent.size() == 1 ? "it died or hangs" : "they died or hang")
           << " (SCRATCHFORMER_MPI_TIMEOUT sets how long to wait); stopping every rank";
    } else {
      line << "rank " << rank_ << " (of " << size_ << ") waited " << waited << " s in " << kOpNames[op]
           << " and every rank answered, so the job is out of step: the ranks wait in different collectives: ";
      for (int r = 0; r < size_; ++r) line << (r ? ", " : "") << "rank " << r << " in " << kOpNames[replies[r]];
      line << "; stopping every rank";
    }
    line << '\n';
    std::fputs(line.str().c_str(), stderr);
    mpi_abort(1);
  }

  MPI_Comm comm_;        // our duplicate of MPI_COMM_WORLD
  MPI_Comm final_comm_;  // another, for the final barrier only
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
  Clock::duration timeout_;
  Op waiting_in_ = kAllReduce;  // what the current (or last) wait is in, for census replies
  std::map<const float*, Ring> rings_;  // each bucket's ring, by its buffer
  bool shared_sums_;                    // SCRATCHFORMER_MPI_SHARED_SUMS
  bool said_no_room_ = false;           // that shared memory had no room for the buckets
  SharedWindow shared_;                 // the buffers of shared_buffers()

  // The queue, between the callers and the communication thread.
  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable work_, done_;
  std::deque<Job> queue_;
  std::set<Request> pending_;  // posted, not finished
  Request next_request_ = 0;
  std::exception_ptr failure_;  // a job's exception, rethrown to whoever waits next
  bool stopping_ = false;
  std::atomic<int> abort_code_{-1};
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
