// The gradients' sum by messages. MPI_Iallreduce (Open MPI's libnbc) copies
// its buffer into memory it allocates at every call and pays the page faults
// of it; a bucket's all-reduce is instead a ring: the bucket is cut into one
// chunk per rank; in N - 1 steps each rank sends a chunk to the next rank and
// adds the chunk it receives from the previous one into its own (a
// reduce-scatter: each rank then holds one chunk summed over all ranks), and
// in N - 1 more steps passes the summed chunks around (an all-gather). Each
// rank sends and receives 2 (N - 1) / N of the bucket, the least any
// all-reduce can. ZeRO's reduce-scatter is the ring's first half alone, over
// chunks its caller cuts.
//
// The messages are persistent requests (MPI_Send_init, MPI_Recv_init) made
// once per bucket, a chunk travels in segments that land in two halves of a
// buffer allocated once, each added while the next arrives and while it is
// still in cache, and the sums are a vectorised loop of ours: nothing is
// allocated or faulted in per step. Every chunk's sum is formed on one rank
// and copied to the others, so every rank gets the same bits.
#include "ring.h"

namespace sf::dist {

namespace {

// A ring step's chunk travels in segments of this many floats (1 MiB): two
// fit in a core's L2 cache, and each pays MPI's few microseconds per message.
constexpr size_t kSegment = size_t{1} << 18;

// Starts the first `count` of `requests` (an empty chunk has none: Open MPI
// refuses MPI_Startall of none).
void start(std::vector<MPI_Request>& requests, size_t count) {
  if (count > 0) MPI_Startall(int(count), requests.data());
}

}  // namespace

int64_t RingSums::sum(std::span<float> values, const std::vector<int64_t>& begins, bool all_gather) {
  Ring& ring = ring_of(values, begins, all_gather);
  int64_t sent = 0;
  for (Step& step : ring.steps) {
    start(step.sends, step.sends.size());
    if (!step.add_into) {
      start(step.receives, step.receives.size());
      liveness_.wait_for(step.receives, kAllReduce, size_t(step.bytes));
    } else {
      add_received(ring, step);
    }
    liveness_.wait_for(step.sends, kAllReduce);
    sent += step.bytes;
  }
  return sent;
}

// A reduce-scatter step's receives, two segments in flight: each is added
// into this rank's chunk as it lands, while the next one arrives.
void RingSums::add_received(Ring& ring, Step& step) {
  const size_t segments = step.receives.size();
  start(step.receives, std::min<size_t>(2, segments));
  for (size_t k = 0; k < segments; ++k) {
    liveness_.wait_for({&step.receives[k], 1}, kAllReduce, kSegment * sizeof(float));
    float* into = step.add_into + k * kSegment;
    const float* add = ring.received.data() + (k % 2) * kSegment;
    for (size_t i = 0, n = std::min(kSegment, step.add_count - k * kSegment); i < n; ++i)
      into[i] += add[i];  // vectorised by the compiler
    if (k + 2 < segments) MPI_Start(&step.receives[k + 2]);
  }
}

// The persistent requests of `values`' ring, made at its first sum.
// Reduce-scatter step s sends chunk (rank - s - 1) and receives chunk
// (rank - s - 2), adding it into its own, so that rank r ends with chunk r
// summed; all-gather step s sends chunk (rank - s), summed, and receives
// chunk (rank - s - 1) in place. Sender and receiver cut a chunk into the
// same segments, and MPI matches one sender's messages in the order sent.
RingSums::Ring& RingSums::ring_of(std::span<float> values, const std::vector<int64_t>& begins, bool all_gather) {
  auto [found, added] = rings_.try_emplace(values.data());
  Ring& ring = found->second;
  if (!added && ring.elements == values.size() && ring.begins == begins && ring.all_gather == all_gather) return ring;
  free_ring(ring);  // another sum over the same address
  ring = Ring{values.size(), begins, all_gather, {}, {}};
  const int rank = ranks_.rank, size = ranks_.size;
  const int next = (rank + 1) % size, previous = (rank + size - 1) % size;
  auto chunk = [&](int c) { return ((c % size) + size) % size; };
  ring.received.assign(2 * kSegment, 0.0f);  // touched once, here
  for (int s = 0; s < (all_gather ? 2 : 1) * (size - 1); ++s) {
    const bool scatter = s < size - 1;
    const int step = scatter ? s : s - (size - 1);
    const int send = chunk(rank - step - (scatter ? 1 : 0)), receive = chunk(rank - step - (scatter ? 2 : 1));
    Step& r = ring.steps.emplace_back();
    for (int64_t at = begins[send]; at < begins[send + 1]; at += kSegment) {
      const int count = int(std::min<int64_t>(kSegment, begins[send + 1] - at));
      MPI_Send_init(values.data() + at, count, MPI_FLOAT, next, kRing, ranks_.comm, &r.sends.emplace_back());
      r.bytes += count * int64_t(sizeof(float));
    }
    for (int64_t at = begins[receive], k = 0; at < begins[receive + 1]; at += kSegment, ++k) {
      const int count = int(std::min<int64_t>(kSegment, begins[receive + 1] - at));
      float* into = scatter ? ring.received.data() + (k % 2) * kSegment : values.data() + at;
      MPI_Recv_init(into, count, MPI_FLOAT, previous, kRing, ranks_.comm, &r.receives.emplace_back());
    }
    if (scatter) {
      r.add_into = values.data() + begins[receive];
      r.add_count = size_t(begins[receive + 1] - begins[receive]);
    }
  }
  return ring;
}

void RingSums::free_all() {
  for (auto& [buffer, ring] : rings_) free_ring(ring);
}

void RingSums::free_ring(Ring& ring) {
  for (Step& step : ring.steps) {
    for (MPI_Request& r : step.sends) MPI_Request_free(&r);
    for (MPI_Request& r : step.receives) MPI_Request_free(&r);
  }
}

}  // namespace sf::dist
