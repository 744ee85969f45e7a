// The gradient buckets in memory that all the ranks of one machine map (an
// MPI-3 shared window, MPI_Win_allocate_shared), and their sum there by loads
// and stores, without messages; shared_window.cpp says how. Private to
// dist/mpi/: the communicator's thread allocates, sums and frees it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "dist/communicator.h"
#include "liveness.h"
#include "ranks.h"

namespace sf::dist {

// SCRATCHFORMER_MPI_SHARED_SUMS: 1 (the default) or 0; another value is bad input.
bool shared_sums_from_environment();

// Where buffers of `elements` floats each lie in a rank's part of the window:
// each on a cache line of its own, after a line of the barrier's counters.
struct WindowLayout {
  explicit WindowLayout(const std::vector<size_t>& elements);
  std::vector<size_t> elements, offsets;  // of each buffer, in floats from the buffers' start
  size_t buffer_floats = 0;               // all of them, padded
  size_t part_bytes() const;              // a rank's part: counters and buffers
};

// Whether the machine's shared memory has room for `bytes` more, on every
// rank's view of it: a collective over `comm`. Where it has not, the writer
// says so once (`said`: whether it has already).
bool shared_memory_holds(Communicator& comm, size_t bytes, bool& said);

class SharedWindow {
 public:
  SharedWindow(const MpiRanks& ranks, Liveness& liveness) : ranks_(ranks), liveness_(liveness) {}
  SharedWindow(const SharedWindow&) = delete;
  SharedWindow& operator=(const SharedWindow&) = delete;

  // A collective of every rank: the window of `layout`, zeroed.
  void allocate(const WindowLayout& layout);
  // This rank's buffers in it.
  std::vector<std::span<float>> buffers(const WindowLayout& layout) const;
  void free();  // nothing may use the buffers by then
  bool holds(std::span<float> values) const;

  // The sum over ranks of `values`, a buffer of the window, as RingSums::sum
  // leaves it; returns the bytes of the other ranks' memory this rank read
  // and wrote (what a ring would have sent).
  int64_t sum(std::span<float> values, const std::vector<int64_t>& begins, bool all_gather);

 private:
  void barrier();

  const MpiRanks& ranks_;
  Liveness& liveness_;
  MPI_Win window_ = MPI_WIN_NULL;
  std::span<float> mine_;        // this rank's buffers
  std::vector<float*> parts_;    // every rank's buffers, by rank, in this process's memory
  int64_t* arrived_ = nullptr;   // the barriers' count of arrivals, in rank 0's part
  uint32_t* opened_ = nullptr;   // barriers completed (a word to sleep on), beside it
  uint32_t* sleepers_ = nullptr; // ranks asleep on it, or about to be
  int64_t barriers_ = 0;         // that this rank has passed
};

}  // namespace sf::dist
