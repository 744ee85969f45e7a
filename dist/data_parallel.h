// Data parallelism (docs/12-data-parallel.md): N processes ("ranks") train
// one model. Each holds a replica, takes its share of every batch, and the
// ranks sum their gradients before every optimizer step, so that N ranks take
// exactly the step one process takes on the whole batch:
//
//   loss = (1 / T) * sum over the batch's T label tokens of the token's loss
//        = sum over ranks r of (T_r / T) * (rank r's mean over its T_r tokens)
//
// so rank r scales its mean loss by T_r / T (T all-reduced first), and the
// all-reduced sum of the ranks' gradients is the gradient of the whole batch.
//
// The pieces here are what the trainer calls; the communicator
// (dist/communicator.h) carries the bytes.
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "autograd/engine.h"
#include "base/random.h"
#include "optim/optimizer.h"
#include "dist/communicator.h"

namespace sf::dist {

// How wide a pair's rows are in a batch: its source's and its target's
// framed lengths where batches are padded to their longest (bucket), the
// fixed width where they are not (data::BatchedDataset::padded_widths).
struct PairWidths {
  int64_t source = 0, target = 0;
};

// Rank `rank`'s share of a batch's examples (`widths[k]`: example k's): a
// contiguous run. A share is padded to its longest source and target, so it
// costs its size times their sum; the shares make the most costly of them as
// cheap as it can be, and each rank in turn takes the longest run that keeps
// the rest to that: with equal widths the runs differ by at most one (the
// first size % ranks ranks take one more). A rank may get none when the
// batch has fewer examples than there are ranks.
std::vector<size_t> rank_share(const std::vector<size_t>& batch, const std::vector<PairWidths>& widths, int rank,
                               int ranks);

// Sums the ranks' gradients in buckets while backward still runs, as
// PyTorch's DistributedDataParallel does: a bucket (a few MB of gradients, in
// the order backward finishes them: reverse parameter order at first, then
// the order the first step saw) starts its all-reduce as soon as its last
// gradient is final, so the communication of one bucket overlaps the
// computation of the next ones.
// Buckets start in the same order on every rank (MPI's rule for collectives).
//
// Each parameter's gradient is a view into its bucket (DDP's
// gradient_as_bucket_view): backward accumulates into the bucket itself, the
// communicator sums the bucket where it lies, and the optimizer reads the sums
// there, so gradients are never copied into or out of a bucket, and a bucket
// is allocated once. Where the ranks share a machine, the buckets lie in
// memory they all map (Communicator::shared_buffers), and a sum reads the
// other ranks' buckets where they lie. Within a bucket each gradient starts
// at a multiple of kAlign elements.
//
// ZeRO-1 (Rajbhandari et al. 2020, stage 1) cuts every bucket into one run
// per rank (on multiples of kAlign); rank r keeps the optimizer state of the
// elements in its runs and updates only those. So a bucket needs only a
// reduce-scatter (each rank gets the sums of its own run), and after the
// optimizer's step an all-gather of the parameters: together the traffic of
// one all-reduce, as plain data parallelism. The runs follow the buckets, and
// the buckets settle after the first step, so the first step all-reduces
// whole buckets and its finish() fixes the runs (shard_runs()).
class GradientReducer {
 public:
  // `overlap` false: nothing happens during backward; finish() reduces every
  // bucket after it (to measure what overlapping saves).
  // Buckets hold about `bucket_bytes` of gradients each, but the first, which
  // holds at most kFirstBucketBytes, and the last ones, the k-th from the end
  // at most kFirstBucketBytes * 2^k (or one parameter where that is larger).
  // `zero`: ZeRO-1's reduce-scatter.
  GradientReducer(const NamedTensors& params, Communicator& comm, size_t bucket_bytes, bool overlap = true,
                  bool zero = false);
  static constexpr size_t kFirstBucketBytes = size_t{1} << 20;
  // SIMD kernels treat a run's last few elements (those past its last whole
  // vector) with scalar code, which may round differently: ZeRO's cuts fall
  // on multiples of this many elements from a parameter's start, so that
  // every element is updated as a single process updates it.
  static constexpr int64_t kAlign = 64;
  // For the backward of a step's last batch (earlier batches of an
  // accumulated step only accumulate locally, as DDP's no_sync).
  BackwardHooks hooks();
  // After that backward: starts what is left and waits for every bucket;
  // then each gradient holds the sum over ranks (with zero, once the runs are
  // fixed: in this rank's run alone). A rank whose share of the batch was
  // empty calls it too, contributing zeros. `summed`, where given, gets each
  // bucket's parameters as soon as their sums are in: with the overlap, while
  // the later buckets are still summed, so that work on the sums (the
  // gradient norm's squares) hides the communication of the last bucket,
  // which backward cannot; without, after every bucket.
  using SummedHook = std::function<void(std::span<const size_t> params)>;
  void finish(const SummedHook& summed = {});
  // After the optimizer's step, instead of its zero_grad(): zeroes the
  // buckets. After the first step it moves the gradients into the buckets
  // that follow that step's order, the old ones freed first.
  void zero_grad();

  size_t buckets() const { return buckets_.size(); }
  int64_t bytes_per_step() const;
  bool overlapping() const { return overlap_; }
  // Seconds finish() waited for the reductions, one figure per step (its
  // time less `summed`'s): the communication that backward and `summed` did
  // not hide, and the time this rank waited for a slower one to reach the
  // same sums.
  const std::vector<double>& waits() const { return waits_; }
  // The gradients' buffer of bucket b (a test looks at where gradients lie).
  const Tensor& bucket_values(size_t b) const { return buckets_[b].values; }

  // Once the first step's finish() has fixed the buckets: rank r's run of
  // parameter i is its elements [shard_runs()[i][r], shard_runs()[i][r + 1]),
  // and a rank's slice of every parameter is owned(rank). Before, empty.
  // Under ZeRO-1 a rank updates its runs alone; without, it takes only their
  // squares for the gradient norm.
  const std::vector<std::vector<int64_t>>& shard_runs() const { return runs_; }
  std::vector<optim::Slice> owned(int rank) const;

 private:
  struct Bucket {
    std::vector<size_t> params;        // indices into params_
    Tensor values;                     // their gradients, each a view into it
    std::span<float> summed;           // what the communicator sums: values' memory, or a host copy
    std::vector<float> staging;        // that copy's memory, where the communicator shares none
    bool copied = false;               // summed is a copy (values lie where the sum cannot run)
    int64_t elements = 0;              // the gradients', each padded to a multiple of kAlign
    std::vector<int64_t> rank_begins;  // ZeRO: rank r's run is [rank_begins[r], rank_begins[r + 1])
    size_t ready = 0;                  // parameters whose gradient is final, this step
    Communicator::Request request = 0;
  };
  void plan_buckets(const std::vector<size_t>& order);
  void allocate_buckets();
  void gradient_ready(size_t param);
  void start_ready_buckets();

  const NamedTensors& params_;
  Communicator& comm_;
  size_t bucket_bytes_;
  bool overlap_, zero_;
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_, offset_of_;  // per parameter
  std::vector<bool> final_;                    // per parameter, this step
  std::vector<size_t> arrival_;                // parameters in the order their gradients came, this step
  bool rebuilt_ = false;                       // buckets follow the first step's arrival order
  bool allocated_ = false;                     // the planned buckets hold the gradients
  bool in_allocator_ = false;                  // some bucket lies in memory of the CPU allocator
  std::vector<std::vector<int64_t>> runs_;     // every rank's runs, once rebuilt
  std::unordered_map<const TensorImpl*, size_t> index_of_;
  size_t started_ = 0;  // buckets started this step, in order
  std::vector<double> waits_;
};

// Rank `rank`'s dropout stream: rank 0's own; rank r > 0 draws from a stream
// of its own (seeded from rank 0's and r), so that the ranks' shares of a
// batch are not dropped alike.
Rng::State rank_dropout_state(const Rng::State& rank0, int rank);

// Copies the writer's values of every tensor to the other ranks.
void broadcast_tensors(const NamedTensors& tensors, Communicator& comm);
// The writer's string on every rank.
std::string broadcast_string(const std::string& text, Communicator& comm);

// ZeRO-1 (GradientReducer): after a sharded step, every rank's updated
// elements to every rank (`runs`: the reducer's shard_runs()).
void all_gather_parameters(const optim::Optimizer& sharded, const std::vector<std::vector<int64_t>>& runs,
                           Communicator& comm);
// The whole state of a sharded optimizer, as a single process's optimizer
// would hold it (on the writer; the other ranks get an empty state).
optim::OptimizerState gather_optimizer_state(const optim::Optimizer& sharded,
                                             const std::vector<std::vector<int64_t>>& runs, Communicator& comm);
// Rank 0's optimizer state (read from a checkpoint) on every rank.
optim::OptimizerState broadcast_optimizer_state(const optim::OptimizerState& on_root, Communicator& comm);

// Fails (ErrorOnEveryRank naming `source`, on every rank) unless every
// rank's `digest` of `what` equals rank 0's.
void check_same_on_every_rank(uint64_t digest, const std::string& what, const std::string& source,
                              Communicator& comm);

}  // namespace sf::dist
