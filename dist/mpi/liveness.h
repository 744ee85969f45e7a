// How the MPI communicator waits, and what it does when a wait lasts too
// long: the one wait loop of its communication thread, the census that
// names the ranks that no longer respond, and the end of the job. Private
// to dist/mpi/; liveness.cpp says how the census works.
//
// Waiting. The communication thread starts each collective's requests and
// completes them in this loop, which tests them (MPI_Testall): without pause
// at first, since most collectives end within microseconds, then with short
// sleeps, so that a long wait (a peer still computing) leaves the core to the
// compute threads: where every core computes, a thread that spins or yields
// while it waits takes its share of them (measured: a step 2% slower with the
// overlap than without). A blocking MPI call would wait forever for a rank
// that hangs; our loop can look at the clock.
#pragma once
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <span>
#include <thread>
#include <vector>

#include "ranks.h"

namespace sf::dist {

using Clock = std::chrono::steady_clock;

// What a rank waits in: for the messages, and as a census reply's content.
enum Op : int { kAllReduce, kBroadcast, kAllGather, kFinalBarrier };

// SCRATCHFORMER_MPI_TIMEOUT, in seconds (default 30); a bad value is bad input.
Clock::duration timeout_from_environment();

// Ends every rank of the job with exit status `code`, adding nothing to the
// line that said why.
[[noreturn]] void end_job(int code);

class Liveness {
 public:
  // `ranks` are filled as MPI starts, before the first wait; `abort_code`,
  // once >= 0, ends the job from within a wait.
  Liveness(const MpiRanks& ranks, Clock::duration timeout, const std::atomic<int>& abort_code)
      : ranks_(ranks), timeout_(timeout), abort_code_(abort_code) {}

  // Tests until `requests` are done. `bytes`: what the awaited transfer moves.
  void wait_for(std::span<MPI_Request> requests, Op op, size_t bytes = 0);

  // Tests until done() says so, answers censuses, and runs one when the
  // timeout passes. After the spin, block(longest) pauses between tests, at
  // most `longest` (until the next census poll); by default a sleep.
  template <class Done>
  void wait_until(Op op, size_t bytes, Done done) {
    wait_until(op, bytes, done, [](Clock::duration) { std::this_thread::sleep_for(kSleep); });
  }
  template <class Done, class Block>
  void wait_until(Op op, size_t bytes, Done done, Block block) {
    Wait wait = begin_wait(op, bytes);
    while (!done()) {
      // (A signal may cut a sleep short; the clock, not the sleeps, decides.)
      const auto now = Clock::now();
      watch(wait, now);
      if (now - wait.since >= wait.spin) block(std::min(wait.next_poll, wait.deadline) - now);
    }
  }

 private:
  static constexpr auto kSleep = std::chrono::microseconds(100);  // between tests, after the spin

  struct Wait {
    Op op;
    Clock::time_point since;
    Clock::duration spin;  // how long it tests without pause
    Clock::time_point deadline, next_poll;
  };
  Wait begin_wait(Op op, size_t bytes);
  // Between two tests of `wait`: answers the census messages when a poll is
  // due, runs a census at the deadline, and ends the job when asked to.
  void watch(Wait& wait, Clock::time_point now);
  int serve_census(std::vector<int>* replies);
  void census(Op op, Clock::time_point since);

  const MpiRanks& ranks_;
  const Clock::duration timeout_;
  const std::atomic<int>& abort_code_;
  Op waiting_in_ = kAllReduce;  // what the current (or last) wait is in, for census replies
};

}  // namespace sf::dist
