// The processes that train one model together (data parallelism), and the
// few collective operations that needs. Every process runs the same program
// on its share of each batch; the communicator is how they agree.
//
// A single process is a communicator of size 1 whose operations return at
// once (single_process()). The MPI build (make MPI=1) adds one over
// MPI_COMM_WORLD (dist/mpi/communicator.cpp, and its parts beside it);
// nothing else in the library calls MPI, and a build without it needs no
// MPI at all.
//
// Every collective must be called by every rank, in the same order, with the
// same sizes: that is MPI's rule, and a rank that breaks it hangs the others.
// A rank that dies or stops responding ends the whole job with one line
// naming it (the MPI communicator's timeout), never a hang.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <vector>

#include "base/error.h"

namespace sf::dist {

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;  // 0 .. size() - 1
  virtual int size() const = 0;
  // This process's place among the ranks on its own machine, and their
  // number: to share the machine's cores and devices out among them.
  virtual int local_rank() const = 0;
  virtual int local_size() const = 0;

  // The writer: the one rank that speaks for all and keeps the run's files.
  // It prints, saves the tokenizers, appends to metrics.jsonl, writes the
  // checkpoints and the report, and alone reads a checkpoint or a preload
  // file, then broadcasts what it read (root kWriter). The other ranks compute
  // the same and write nothing. A single process is the writer. Every choice
  // of who writes or speaks is this one.
  static constexpr int kWriter = 0;
  bool writes() const { return rank() == kWriter; }

  // Element-wise over all ranks, in place; every rank receives the same values.
  virtual void all_reduce_sum(std::span<double> values) = 0;
  virtual void all_reduce_sum(std::span<int64_t> values) = 0;
  virtual void all_reduce_max(std::span<int64_t> values) = 0;
  // Rank `root`'s bytes to every rank.
  virtual void broadcast(std::span<std::byte> bytes, int root) = 0;
  // Each rank's `mine` (the same size on every rank) lands in `all` at
  // rank * mine.size(); `all` holds size() * mine.size() bytes.
  virtual void all_gather(std::span<const std::byte> mine, std::span<std::byte> all) = 0;
  // An array of which each rank holds a run of its own: rank r's elements are
  // [begins[r], begins[r + 1]) (begins: size() + 1 offsets, rising).
  struct Runs {
    std::span<float> values;
    std::vector<int64_t> begins;
  };
  // Afterwards every rank holds every rank's run of each array, in place:
  // nothing is staged.
  virtual void all_gather_in_place(const std::vector<Runs>& arrays) = 0;
  // Afterwards rank `root` holds every rank's run of each array, in place.
  // There `values` is the whole array; on the other ranks it is this rank's
  // run alone, which is all they send.
  virtual void gather_in_place(const std::vector<Runs>& arrays, int root) = 0;

  // Sums that run while the caller computes (the gradient buckets during
  // backward): started reductions run one after another, in start order, on
  // a thread of the communicator's own. `values` must stay untouched until
  // wait(); reductions of the same buffer reuse what the first one set up,
  // so a caller keeps its buffers (allocated once).
  using Request = int64_t;
  // Afterwards every rank holds the sum over ranks of `values`.
  virtual Request start_all_reduce_sum(std::span<float> values) = 0;
  // A reduce-scatter (ZeRO's): afterwards rank r's run [begins[r],
  // begins[r + 1]) of `values` holds the sum over ranks, and the rest of
  // `values` is left undefined. Half an all-reduce's traffic.
  virtual Request start_reduce_scatter_sum(std::span<float> values, std::vector<int64_t> begins) = 0;
  virtual void wait(Request request) = 0;

  // Memory for the buffers that those sums run over (the gradient buckets):
  // buffer i holds `elements[i]` floats, zeroed. Every rank asks for the same
  // sizes at the same point (a collective). Where all ranks share this
  // machine, each rank can read and write the others' buffers (MPI-3 shared
  // memory), and a sum of them is loads and stores: no message, no copy.
  // Empty where the communicator has no such memory; the caller then
  // allocates its own. The buffers stay valid until the next call, which
  // frees them (nothing may use them by then), or the communicator's end.
  virtual std::vector<std::span<float>> shared_buffers(const std::vector<size_t>& elements) {
    (void)elements;
    return {};
  }

  // The bytes this rank has sent in the sums above and the in-place gathers
  // (the gradients and ZeRO's parameters and state): a ring's messages as
  // they are, and in a gather its own runs once for each rank that receives
  // them, which any algorithm must send (MPI's may relay more).
  virtual int64_t bytes_sent() const = 0;

  // How many of the sums above (start_all_reduce_sum, start_reduce_scatter_sum)
  // this rank has run in shared memory and how many by messages: where the
  // ranks share a machine, the gradient buckets lie in shared memory, and a
  // sum of them that went by messages would still be right, only slower, so
  // the count is how a run shows which path its sums took.
  struct SumPaths {
    int64_t in_shared_memory = 0, by_messages = 0;
  };
  // A communicator that moves nothing (a process alone) runs no sum at all.
  virtual SumPaths sum_paths() const { return {}; }

  // Ends every rank of the job at once with exit status `code`, after this
  // rank has printed why. In a single process it returns (the caller exits).
  virtual void abort(int code) = 0;
};

// Bad input that every rank meets at once, having compared what all of them
// hold (check_same_on_every_rank): the writer reports it for all and ends
// the job, and the other ranks keep quiet meanwhile (cli/main.cpp).
class ErrorOnEveryRank : public Error {
 public:
  using Error::Error;
};

// The communicator of a process training alone.
std::unique_ptr<Communicator> single_process();

// printf to stderr on the writer; the other ranks keep quiet.
template <class... Args>
void say(const Communicator& comm, const char* format, Args... args) {
  if (!comm.writes()) return;
  if constexpr (sizeof...(Args) == 0)
    std::fputs(format, stderr);  // no arguments: the text as it is, no format to read
  else
    std::fprintf(stderr, format, args...);
}

}  // namespace sf::dist
