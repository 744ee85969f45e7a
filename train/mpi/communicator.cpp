// The MPI communicator: the collectives of train/communicator.h over MPI, and
// the timeout that turns a rank that stops responding into one clear error.
//
// Waiting. MPI moves data only while the process is inside an MPI call (Open
// MPI runs no progress thread of its own by default): that is MPI's progress
// rule, and why the trainer calls progress() during backward. Every collective
// is started in its non-blocking form (MPI_Iallreduce, MPI_Ibcast, ...) and
// completed by one wait loop of our own that tests it (MPI_Testall): without
// pause at first, since most collectives end within microseconds, then with
// short sleeps so that a long wait leaves the core to others. A blocking
// MPI_Allreduce would wait forever for a rank that hangs; our loop can look at
// the clock.
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
// report to it, so only one line is printed.
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

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "autograd/error.h"

namespace sf::train {

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// What a rank waits in: for the messages, and as a census reply's content.
enum Op : int { kAllReduce, kBroadcast, kAllGather, kFinalBarrier };
constexpr const char* kOpNames[] = {"an all-reduce", "a broadcast", "an all-gather",
                                    "the final barrier (its program has ended)"};
// A census reply sends its Op from here: MPI may read an MPI_Isend's buffer
// until the send completes, and this array lives as long as the program.
constexpr int kOpCodes[] = {kAllReduce, kBroadcast, kAllGather, kFinalBarrier};

constexpr int kCensusAsk = 1;    // tag of "are you alive?" (no content)
constexpr int kCensusReply = 2;  // tag of the answer: the Op the rank waits in

constexpr auto kSpin = 100us;      // a wait tests without pause this long: short collectives end sooner
constexpr auto kSleep = 150us;     // then sleeps between tests, leaving the core to others
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

// SCRATCHFORMER_MPI_TIMEOUT, in seconds (default 30). The bound keeps the
// deadline arithmetic inside the clock's range; 1e9 s is "never".
Clock::duration timeout_from_environment() {
  const char* text = std::getenv("SCRATCHFORMER_MPI_TIMEOUT");
  if (!text) return 30s;
  char* end = nullptr;
  double seconds = std::strtod(text, &end);
  if (end == text || *end != '\0' || !std::isfinite(seconds) || seconds <= 0 || seconds > 1e9)
    fail("SCRATCHFORMER_MPI_TIMEOUT=\"", text, "\": expected a number of seconds > 0 (at most 1e9)");
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

class MpiWorld final : public Communicator {
 public:
  MpiWorld(int* argc, char*** argv, Clock::duration timeout) : timeout_(timeout) {
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
  MpiWorld(const MpiWorld&) = delete;
  MpiWorld& operator=(const MpiWorld&) = delete;

  // The final barrier: a rank that ends early (out of step with the others)
  // keeps answering censuses here, where MPI_Finalize would just block. It has
  // a communicator of its own so that it cannot pass for the others' collectives.
  ~MpiWorld() override {
    wait(start(kFinalBarrier, 0, [&](size_t, int, MPI_Request* r) { MPI_Ibarrier(final_comm_, r); }));
    MPI_Comm_free(&final_comm_);
    MPI_Comm_free(&comm_);
    MPI_Finalize();
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  int local_size() const override { return local_size_; }

  void all_reduce_sum(std::span<double> values) override { wait(start_reduce(values, MPI_SUM)); }
  void all_reduce_sum(std::span<int64_t> values) override { wait(start_reduce(values, MPI_SUM)); }
  void all_reduce_max(std::span<int64_t> values) override { wait(start_reduce(values, MPI_MAX)); }

  void broadcast(std::span<std::byte> bytes, int root) override {
    if (root < 0 || root >= size_) internal_fail("broadcast from rank ", root, " of ", size_);
    wait(start(kBroadcast, bytes.size(), [&](size_t at, int count, MPI_Request* r) {
      MPI_Ibcast(bytes.data() + at, count, MPI_BYTE, root, comm_, r);
    }));
  }

  // Not split into pieces: the pieces of every rank would interleave in `all`.
  void all_gather(std::span<const std::byte> mine, std::span<std::byte> all) override {
    if (all.size() != mine.size() * size_)
      internal_fail("all_gather: ", all.size(), " bytes for ", size_, " ranks of ", mine.size());
    if (mine.size() > kMaxCount) internal_fail("all_gather: ", mine.size(), " bytes per rank, more than MPI's INT_MAX");
    wait(start(kAllGather, mine.size(), [&](size_t, int count, MPI_Request* r) {
      MPI_Iallgather(mine.data(), count, MPI_BYTE, all.data(), count, MPI_BYTE, comm_, r);
    }));
  }

  Request start_all_reduce_sum(std::span<float> values) override { return start_reduce(values, MPI_SUM); }

  // Testing the outstanding requests is what moves their data (the progress
  // rule); MPI_Testall does that for all of them in one call.
  void progress() override {
    if (requests_.empty()) return;
    int all_done = 0;
    MPI_Testall(int(requests_.size()), requests_.data(), &all_done, MPI_STATUSES_IGNORE);
  }

  void wait(Request request) override {
    auto first = std::find_if(owners_.begin(), owners_.end(), [&](const Owner& o) { return o.request == request; });
    if (first == owners_.end()) internal_fail("wait: request ", request, " is not outstanding");
    auto last = std::find_if(first, owners_.end(), [&](const Owner& o) { return o.request != request; });
    size_t at = first - owners_.begin(), count = last - first;
    wait_loop({requests_.data() + at, count}, first->op);
    requests_.erase(requests_.begin() + at, requests_.begin() + at + count);
    owners_.erase(first, last);
  }

  void abort(int code) override {
    std::fflush(stdout);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);
  }

 private:
  struct Owner {
    Request request;
    Op op;
  };

  // Starts one collective over `count` elements as requests of at most
  // kMaxCount elements; issue(at, n, request) starts the piece [at, at + n).
  // An empty span still starts one (empty) collective: every rank joins it.
  template <class Issue>
  Request start(Op op, size_t count, Issue issue) {
    Request request = next_request_++;
    size_t at = 0;
    do {
      int n = int(std::min(count - at, kMaxCount));
      requests_.emplace_back();
      owners_.push_back({request, op});
      issue(at, n, &requests_.back());
      at += n;
    } while (at < count);
    return request;
  }

  template <class T>
  Request start_reduce(std::span<T> values, MPI_Op reduce) {
    return start(kAllReduce, values.size(), [&](size_t at, int count, MPI_Request* r) {
      MPI_Iallreduce(MPI_IN_PLACE, values.data() + at, count, mpi_type<T>(), reduce, comm_, r);
    });
  }

  // The one wait loop: tests until `requests` are done, answers censuses, and
  // runs one when the timeout passes.
  void wait_loop(std::span<MPI_Request> requests, Op op) {
    waiting_in_ = op;
    const auto since = Clock::now();
    auto deadline = since + timeout_, next_poll = since + kPollEvery;
    for (;;) {
      int done = 0;
      MPI_Testall(int(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE);
      if (done) return;
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
      if (now - since >= kSpin) std::this_thread::sleep_for(kSleep);
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
    abort(1);
  }

  MPI_Comm comm_;        // our duplicate of MPI_COMM_WORLD
  MPI_Comm final_comm_;  // another, for the final barrier only
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
  Clock::duration timeout_;
  Op waiting_in_ = kAllReduce;  // what the current (or last) wait is in, for census replies
  // The started collectives not yet waited for, in start order: one MPI request
  // per piece (requests_, an array as MPI_Testall takes it) and whose it is.
  std::vector<MPI_Request> requests_;
  std::vector<Owner> owners_;
  Request next_request_ = 0;
};

}  // namespace

std::unique_ptr<Communicator> mpi_world(int* argc, char*** argv) {
  Clock::duration timeout = timeout_from_environment();  // a bad value: exit before MPI starts
  return std::make_unique<MpiWorld>(argc, argv, timeout);
}

}  // namespace sf::train
