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
// The census's point-to-point messages travel on the communicator's own
// duplicate of MPI_COMM_WORLD, on tags of their own: they cannot meet
// anything else.
#include "liveness.h"

#include <pmix.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>

#include "base/environment.h"
#include "base/error.h"

namespace sf::dist {

namespace {

using namespace std::chrono_literals;

constexpr const char* kOpNames[] = {"an all-reduce", "a broadcast", "an all-gather",
                                    "the final barrier (its program has ended)"};
// A census reply sends its Op from here: MPI may read an MPI_Isend's buffer
// until the send completes, and this array lives as long as the program.
constexpr int kOpCodes[] = {kAllReduce, kBroadcast, kAllGather, kFinalBarrier};

constexpr auto kSpin = 50us;  // a wait tests without pause this long: short collectives end sooner
// A message moves only while MPI is called: without a single-copy mechanism
// (where the machine forbids one process reading another's memory, CMA),
// Open MPI's shared memory copies it through small fragments, a few per call,
// and a wait that slept between tests would stretch a ring step of 8 MB from
// ~2 ms to ~16 ms. So a wait for a transfer of `bytes` tests without pause
// for as long as moving them could take at this rate before it sleeps.
constexpr double kSpinBytesPerNanosecond = 1.0;  // 1 GB/s
constexpr auto kPollEvery = 50ms;  // how often a waiting rank looks for census messages
constexpr auto kGrace = 2s;        // how long a census collects replies (at most the timeout)

}  // namespace

// The bound keeps the deadline arithmetic inside the clock's range; 1e9 s is "never".
Clock::duration timeout_from_environment() {
  const char* text = environment::value("SCRATCHFORMER_MPI_TIMEOUT");
  if (!text) return 30s;
  char* end = nullptr;
  double seconds = std::strtod(text, &end);
  if (end == text || *end != '\0' || !std::isfinite(seconds) || seconds <= 0 || seconds > 1e9)
    fail("SCRATCHFORMER_MPI_TIMEOUT=\"", text, "\": expected a number of seconds > 0 (at most 1e9)");
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// Open MPI's MPI_Abort prints an 8-line banner ("MPI_ABORT was invoked on
// rank ...") before it asks the launcher to end the job through PMIx, then
// exits; this asks it the same way, without the banner. MPI_Abort remains
// for a launcher that does not serve PMIx.
void end_job(int code) {
  pmix_proc_t self;
  if (PMIx_Init(&self, nullptr, 0) == PMIX_SUCCESS && PMIx_Abort(code, nullptr, nullptr, 0) == PMIX_SUCCESS)
    std::_Exit(code);
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);  // MPI_Abort does not return; this says so to the compiler
}

void Liveness::wait_for(std::span<MPI_Request> requests, Op op, size_t bytes) {
  wait_until(op, bytes, [&] {
    int done = 0;
    MPI_Testall(int(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE);
    return done != 0;
  });
}

Liveness::Wait Liveness::begin_wait(Op op, size_t bytes) {
  waiting_in_ = op;
  const auto since = Clock::now();
  const auto spin = kSpin + std::chrono::nanoseconds(int64_t(double(bytes) / kSpinBytesPerNanosecond));
  return {op, since, spin, since + timeout_, since + kPollEvery};
}

void Liveness::watch(Wait& wait, Clock::time_point now) {
  if (now >= wait.next_poll) {
    wait.next_poll = now + kPollEvery;
    if (serve_census(nullptr) < ranks_.size) wait.deadline = now + timeout_;
  }
  if (now >= wait.deadline) {
    census(wait.op, wait.since);  // returns only if a lower rank runs its own
    wait.deadline = Clock::now() + timeout_;
  }
  if (abort_code_ >= 0) end_job(abort_code_);
}

// Receives the census messages that have arrived: answers each ask with the
// Op this rank waits in; records each reply in `replies` (a detector's), or
// drops it (a reply to a census this rank left to a lower rank). Returns the
// lowest rank that asked, or the number of ranks if none did.
int Liveness::serve_census(std::vector<int>* replies) {
  int lowest_asker = ranks_.size;
  for (;;) {
    int arrived = 0;
    MPI_Status status;
    MPI_Iprobe(MPI_ANY_SOURCE, kCensusAsk, ranks_.comm, &arrived, &status);
    if (!arrived) break;
    MPI_Recv(nullptr, 0, MPI_INT, status.MPI_SOURCE, kCensusAsk, ranks_.comm, MPI_STATUS_IGNORE);
    MPI_Request reply;  // freed at once: MPI completes it on its own
    MPI_Isend(&kOpCodes[waiting_in_], 1, MPI_INT, status.MPI_SOURCE, kCensusReply, ranks_.comm, &reply);
    MPI_Request_free(&reply);
    lowest_asker = std::min(lowest_asker, status.MPI_SOURCE);
  }
  for (;;) {
    int arrived = 0, op = 0;
    MPI_Status status;
    MPI_Iprobe(MPI_ANY_SOURCE, kCensusReply, ranks_.comm, &arrived, &status);
    if (!arrived) break;
    MPI_Recv(&op, 1, MPI_INT, status.MPI_SOURCE, kCensusReply, ranks_.comm, MPI_STATUS_IGNORE);
    if (replies) (*replies)[status.MPI_SOURCE] = op;
  }
  return lowest_asker;
}

// This rank's wait in `op`, begun at `since`, timed out: asks every other
// rank, collects replies for the grace period, reports and ends the job.
// Returns instead if a lower rank asks meanwhile: it runs a census too, and
// reports for both.
void Liveness::census(Op op, Clock::time_point since) {
  const int rank = ranks_.rank, size = ranks_.size;
  for (int r = 0; r < size; ++r) {
    if (r == rank) continue;
    MPI_Request ask;
    MPI_Isend(nullptr, 0, MPI_INT, r, kCensusAsk, ranks_.comm, &ask);
    MPI_Request_free(&ask);
  }
  std::vector<int> replies(size, -1);  // each rank's Op, -1 while it has not answered
  replies[rank] = op;
  const auto end = Clock::now() + std::min<Clock::duration>(kGrace, timeout_);
  while (Clock::now() < end && std::count(replies.begin(), replies.end(), -1) > 0) {
    if (serve_census(&replies) < rank) return;
    std::this_thread::sleep_for(kSleep);
  }

  std::ostringstream line;
  line.setf(std::ios::fixed);
  line.precision(1);
  const double waited = std::chrono::duration<double>(Clock::now() - since).count();
  std::vector<int> silent;
  for (int r = 0; r < size; ++r)
    if (replies[r] < 0) silent.push_back(r);
  line << "scratchformer: error: ";
  if (!silent.empty()) {
    line << (silent.size() == 1 ? "rank " : "ranks ");
    for (size_t i = 0; i < silent.size(); ++i) line << (i ? ", " : "") << silent[i];
    line << " (of " << size << ") " << (silent.size() == 1 ? "has" : "have") << " not responded for " << waited
         << " s while rank " << rank << " waited in " << kOpNames[op] << ": "
         << (silent.size() == 1 ? "it died or hangs" : "they died or hang")
         << " (SCRATCHFORMER_MPI_TIMEOUT sets how long to wait); stopping every rank";
  } else {
    line << "rank " << rank << " (of " << size << ") waited " << waited << " s in " << kOpNames[op]
         << " and every rank answered, so the job is out of step: the ranks wait in different collectives: ";
    for (int r = 0; r < size; ++r) line << (r ? ", " : "") << "rank " << r << " in " << kOpNames[replies[r]];
    line << "; stopping every rank";
  }
  line << '\n';
  std::fputs(line.str().c_str(), stderr);
  end_job(1);
}

}  // namespace sf::dist
