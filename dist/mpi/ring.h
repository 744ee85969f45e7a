// The ring all-reduce of the gradient buckets, by messages (Patarasuk & Yuan
// 2009, the algorithm of NCCL and Horovod), and its first half alone, ZeRO's
// reduce-scatter; ring.cpp says how it runs. Private to dist/mpi/: the
// communicator's thread runs it, and it makes MPI calls.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include "liveness.h"
#include "ranks.h"

namespace sf::dist {

// Chunk c of an all-reduce of `n` elements over `size` ranks:
// [chunk_begin(n, size, c), chunk_begin(n, size, c + 1)).
inline size_t chunk_begin(size_t n, int size, int c) { return n / size * c + std::min<size_t>(c, n % size); }

class RingSums {
 public:
  RingSums(const MpiRanks& ranks, Liveness& liveness) : ranks_(ranks), liveness_(liveness) {}
  RingSums(const RingSums&) = delete;
  RingSums& operator=(const RingSums&) = delete;

  // Afterwards every rank holds, in `values`, the sum over ranks of chunk c
  // ([begins[c], begins[c + 1])) at least where c is this rank, and of every
  // chunk when `all_gather`. Returns the bytes this rank sent.
  int64_t sum(std::span<float> values, const std::vector<int64_t>& begins, bool all_gather);

  // Frees every ring's persistent requests: before MPI ends.
  void free_all();

 private:
  // One step of a bucket's ring: the chunk it sends and the one it receives,
  // each cut into segments of at most kSegment elements, a message each. A
  // reduce-scatter step receives segment k into half k % 2 of the ring's
  // buffer and adds it into `add_into` while segment k + 1 arrives in the other
  // half: the received values are added while still in cache, not after the
  // whole chunk has gone through memory. An all-gather step receives in place.
  struct Step {
    std::vector<MPI_Request> sends, receives;  // persistent, one per segment
    int64_t bytes = 0;                         // sent
    float* add_into = nullptr;                 // a reduce-scatter step's own chunk; null in the all-gather
    size_t add_count = 0;                      // its elements
  };
  // One bucket's ring: its steps' persistent requests, made once, and the
  // buffer the received segments land in.
  struct Ring {
    size_t elements = 0;          // the bucket's
    std::vector<int64_t> begins;  // chunk c is [begins[c], begins[c + 1])
    bool all_gather = true;       // an all-reduce; else a reduce-scatter
    std::vector<Step> steps;      // N - 1, or 2 (N - 1) with the all-gather
    std::vector<float> received;  // two segments
  };

  Ring& ring_of(std::span<float> values, const std::vector<int64_t>& begins, bool all_gather);
  void add_received(Ring& ring, Step& step);
  static void free_ring(Ring& ring);

  const MpiRanks& ranks_;
  Liveness& liveness_;
  std::map<const float*, Ring> rings_;  // each bucket's ring, by its buffer
};

}  // namespace sf::dist
