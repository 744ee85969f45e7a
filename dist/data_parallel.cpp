#include "data_parallel.h"

#include <algorithm>
#include <chrono>
#include <limits>

#include <nlohmann/json.hpp>

#include "base/error.h"

namespace sf::dist {

namespace {

template <class T>
std::span<std::byte> as_bytes(std::vector<T>& values) {
  return std::as_writable_bytes(std::span<T>(values));
}

// A tensor's elements [begin, end) to the host, and back.
void read_elements(const Tensor& t, int64_t begin, int64_t end, float* host) {
  t.device().read(t.mem() + begin, host, static_cast<size_t>(end - begin) * sizeof(float));
}
void write_elements(const Tensor& t, int64_t begin, const float* host, int64_t count) {
  t.device().write(host, t.mem() + begin, static_cast<size_t>(count) * sizeof(float));
}

int64_t round_up(int64_t n, int64_t multiple) { return (n + multiple - 1) / multiple * multiple; }

}  // namespace

// ---- Shares of a batch -----------------------------------------------------

namespace {

// The end of the longest run of pairs from `begin` that costs at most `cap`
// padded (pairs times the longest source plus the longest target).
size_t run_end(const std::vector<PairWidths>& widths, size_t begin, int64_t cap) {
  int64_t source = 0, target = 0;
  size_t end = begin;
  for (; end < widths.size(); ++end) {
    source = std::max(source, widths[end].source);
    target = std::max(target, widths[end].target);
    if (static_cast<int64_t>(end + 1 - begin) * (source + target) > cap) break;
  }
  return end;
}

// The least cap under which the pairs from `begin` on fit in `runs` runs.
// A run's cost only grows as it grows, so taking each run as long as the cap
// allows fits them if anything does.
int64_t least_cap(const std::vector<PairWidths>& widths, size_t begin, int runs) {
  auto fits = [&](int64_t cap) {
    size_t at = begin;
    for (int r = 0; r < runs && at < widths.size(); ++r) at = run_end(widths, at, cap);
    return at == widths.size();
  };
  int64_t low = 0, high = std::numeric_limits<int64_t>::max() / 2;  // fits(high): one run holds everything
  while (low < high) {
    const int64_t mid = low + (high - low) / 2;
    if (fits(mid)) high = mid;
    else low = mid + 1;
  }
  return low;
}

}  // namespace

// Each rank's run is the longest that leaves the pairs after it a partition
// as cheap as the least for them: with the first rank's run at the least cap
// of all, no share costs more. A batch is sorted by length (bucketing), so
// equal counts give the rank of its longest sentences the costliest share,
// and every other rank waits for it: on Multi30k's batches of 64 the
// costliest was 1.05, 1.08 and 1.11 times the mean share on 2, 4 and 16
// ranks, and is 1.01, 1.02 and 1.07 times it with these shares.
std::vector<size_t> rank_share(const std::vector<size_t>& batch, const std::vector<PairWidths>& widths, int rank,
                               int ranks) {
  if (widths.size() != batch.size())
    internal_fail("rank_share: ", widths.size(), " widths for a batch of ", batch.size());
  size_t begin = 0;
  for (int r = 0; r < rank; ++r) begin = run_end(widths, begin, least_cap(widths, begin, ranks - r));
  const size_t end = run_end(widths, begin, least_cap(widths, begin, ranks - rank));
  return {batch.begin() + begin, batch.begin() + end};
}

// ---- Gradient buckets ------------------------------------------------------

GradientReducer::GradientReducer(const NamedTensors& params, Communicator& comm, size_t bucket_bytes, bool overlap,
                                 bool zero)
    : params_(params), comm_(comm), bucket_bytes_(bucket_bytes), overlap_(overlap), zero_(zero),
      final_(params.size(), false) {
  std::vector<size_t> reverse;
  for (size_t i = params.size(); i-- > 0;) {
    reverse.push_back(i);
    index_of_[params[i].second.id()] = i;
  }
  plan_buckets(reverse);
  allocate_buckets();
}

// Consecutive parameters of `order` share a bucket up to its size, as
// PyTorch's DDP sizes them: the first bucket small, so that its sum starts as
// soon as backward's last layers are done, the others large, so that each sum
// moves data at full speed and pays MPI's fixed cost per call rarely. Ours
// also shrinks the buckets towards backward's end: what is left to sum once
// backward ends is the last bucket and whatever sums still queue before it,
// so the k-th bucket from the end holds at most kFirstBucketBytes * 2^k (or
// one parameter, where that is larger), up to the size of the others: each
// of those sums runs while backward computes the gradients of the next,
// smaller bucket, which takes far longer than summing twice their bytes.
void GradientReducer::plan_buckets(const std::vector<size_t>& order) {
  buckets_.clear();
  allocated_ = false;
  bucket_of_.assign(params_.size(), 0);
  offset_of_.assign(params_.size(), 0);
  if (order.empty()) return;
  const size_t small = std::min(kFirstBucketBytes, bucket_bytes_);
  auto bytes = [&](size_t at) {
    return static_cast<size_t>(round_up(params_[order[at]].second.numel(), kAlign)) * sizeof(float);
  };
  // Where each bucket begins in `order`: the first bucket's from the front,
  // then the shrinking ones' from the back, then the others' between.
  std::vector<size_t> begins{0};
  size_t middle = 0;  // where the middle buckets begin
  for (size_t held = 0; middle < order.size() && (middle == 0 || held + bytes(middle) <= small); ++middle)
    held += bytes(middle);
  std::vector<size_t> tail;  // last bucket first
  size_t end = order.size();
  for (size_t limit = small; end > middle && limit < bucket_bytes_; limit *= 2) {
    size_t held = bytes(--end);
    while (end > middle && held + bytes(end - 1) <= limit) held += bytes(--end);
    tail.push_back(end);
  }
  for (size_t at = middle, held = 0; at < end; ++at) {
    if (at == middle || held + bytes(at) > bucket_bytes_) {
      begins.push_back(at);
      held = 0;
    }
    held += bytes(at);
  }
  begins.insert(begins.end(), tail.rbegin(), tail.rend());
  for (size_t k = 0; k < begins.size(); ++k) {
    Bucket& b = buckets_.emplace_back();
    for (size_t at = begins[k]; at < (k + 1 < begins.size() ? begins[k + 1] : order.size()); ++at) {
      const size_t i = order[at];
      bucket_of_[i] = k;
      offset_of_[i] = static_cast<size_t>(b.elements);
      b.params.push_back(i);
      b.elements += static_cast<int64_t>(bytes(at) / sizeof(float));
    }
  }
  // ZeRO's runs: equal (the last may be shorter, runs past the end empty).
  const int ranks = comm_.size();
  for (Bucket& b : buckets_) {
    int64_t run = round_up((b.elements + ranks - 1) / ranks, kAlign);
    for (int r = 0; r <= ranks; ++r) b.rank_begins.push_back(std::min(b.elements, r * run));
  }
}

// Zeroed buckets, and each parameter's gradient a view into its bucket.
// What the communicator sums lies in the memory it shares among the ranks
// when it has some (Communicator::shared_buffers): there the gradients
// themselves on the CPU, their host copies on another device.
void GradientReducer::allocate_buckets() {
  in_allocator_ = false;
  std::vector<size_t> sizes;
  for (const Bucket& b : buckets_) sizes.push_back(static_cast<size_t>(b.elements));
  const std::vector<std::span<float>> shared = comm_.shared_buffers(sizes);
  for (size_t k = 0; k < buckets_.size(); ++k) {
    Bucket& b = buckets_[k];
    Device& device = params_[b.params[0]].second.device();
    b.copied = shared.empty() ? !device.host_addressable() : &device != &cpu();
    if (!shared.empty() && !b.copied) {
      b.values = Tensor::over(shared[k]);  // zeroed by shared_buffers
    } else {
      b.values = Tensor::zeros({b.elements}, DType::F32, device);
      in_allocator_ = in_allocator_ || &device == &cpu();
    }
    if (!b.copied) {
      b.summed = {b.values.data(), sizes[k]};
    } else if (!shared.empty()) {
      b.summed = shared[k];
    } else {
      b.staging.assign(sizes[k], 0.0f);
      b.summed = b.staging;
    }
    for (size_t i : b.params) {
      const Tensor& p = params_[i].second;
      p.set_grad(b.values.view(static_cast<int64_t>(offset_of_[i]), p.shape()));
    }
  }
  allocated_ = true;
}

void GradientReducer::zero_grad() {
  if (allocated_) {  // marked zero: backward's first accumulation overwrites each
    for (const auto& [name, p] : params_) p.zero_grad();
    return;
  }
  // Old buckets that came from the allocator go back to the system (it would
  // cache them), so that the new ones, of other sizes, do not add to the peak
  // memory. Not those in shared memory: a new window replaces the old one,
  // and emptying the cache would only make the next step fault in all of its
  // activations again (0.5 s on a cloud VM for the small bench model).
  for (const auto& [name, p] : params_) p.set_grad(Tensor());
  if (in_allocator_) release_cached_cpu_memory();
  allocate_buckets();
}

int64_t GradientReducer::bytes_per_step() const {
  int64_t bytes = 0;
  for (const Bucket& b : buckets_) bytes += b.elements * static_cast<int64_t>(sizeof(float));
  return bytes;
}

std::vector<optim::Slice> GradientReducer::owned(int rank) const {
  std::vector<optim::Slice> slices;
  for (const std::vector<int64_t>& begins : runs_) slices.push_back({begins[rank], begins[rank + 1]});
  return slices;
}

BackwardHooks GradientReducer::hooks() {
  if (!overlap_) return {};
  return {[this](const Tensor& leaf) {
    auto it = index_of_.find(leaf.id());
    if (it != index_of_.end()) gradient_ready(it->second);
  }};
}

// The parameter's gradient, in its bucket, is final: starts every bucket that
// is now complete.
void GradientReducer::gradient_ready(size_t i) {
  if (final_[i]) return;
  final_[i] = true;
  arrival_.push_back(i);
  ++buckets_[bucket_of_[i]].ready;
  start_ready_buckets();
}

// In bucket order only: every rank must start the same sums in the same
// order, whatever order its gradients became final in.
void GradientReducer::start_ready_buckets() {
  while (started_ < buckets_.size() && buckets_[started_].ready == buckets_[started_].params.size()) {
    Bucket& b = buckets_[started_++];
    for (size_t i : b.params) params_[i].second.grad();  // writes the zeros of a gradient no op gave
    if (b.copied) b.values.device().read(b.values.mem(), b.summed.data(), b.summed.size_bytes());
    b.request = zero_ && rebuilt_ ? comm_.start_reduce_scatter_sum(b.summed, b.rank_begins)
                                  : comm_.start_all_reduce_sum(b.summed);
  }
}

void GradientReducer::finish(const SummedHook& summed) {
  using Clock = std::chrono::steady_clock;
  // Timed from here: with the overlap off, starting the buckets is exposed too.
  const Clock::time_point start = Clock::now();
  Clock::duration in_summed{0};
  for (size_t i = 0; i < params_.size(); ++i) gradient_ready(i);
  for (Bucket& b : buckets_) {
    comm_.wait(b.request);
    if (b.copied) b.values.device().write(b.summed.data(), b.values.mem(), b.summed.size_bytes());
    if (!summed || !overlap_) continue;
    const Clock::time_point called = Clock::now();
    summed(b.params);
    in_summed += Clock::now() - called;
  }
  waits_.push_back(std::chrono::duration<double>(Clock::now() - start - in_summed).count());
  if (summed && !overlap_)
    for (const Bucket& b : buckets_) summed(b.params);
  std::fill(final_.begin(), final_.end(), false);
  for (Bucket& b : buckets_) b.ready = 0;
  started_ = 0;
  // Parameter order is only a guess at backward's order: the embeddings,
  // registered before the layers, get their gradients last. After the first
  // step the buckets follow the order the gradients really came in (as DDP
  // rebuilds its buckets), rank 0's, so that every rank has the same buckets.
  // The gradients stay where they are until zero_grad().
  if (!rebuilt_) {
    std::vector<int64_t> order(arrival_.begin(), arrival_.end());
    comm_.broadcast(as_bytes(order), 0);
    plan_buckets({order.begin(), order.end()});
    rebuilt_ = true;
    // Rank r's run of a parameter: where the bucket's run r meets it.
    for (size_t i = 0; i < params_.size(); ++i) {
      const Bucket& b = buckets_[bucket_of_[i]];
      const int64_t offset = static_cast<int64_t>(offset_of_[i]), n = params_[i].second.numel();
      std::vector<int64_t> begins;
      for (int64_t at : b.rank_begins) begins.push_back(std::clamp(at - offset, int64_t{0}, n));
      runs_.push_back(std::move(begins));
    }
  }
  arrival_.clear();
}

// ---- Broadcasts ------------------------------------------------------------

void broadcast_tensors(const NamedTensors& tensors, Communicator& comm) {
  if (comm.size() == 1) return;  // alone, the writer's values are already everyone's
  for (const auto& [name, t] : tensors) {
    std::vector<float> values(static_cast<size_t>(t.numel()));
    if (comm.writes()) read_elements(t, 0, t.numel(), values.data());
    comm.broadcast(as_bytes(values), Communicator::kWriter);
    if (!comm.writes()) write_elements(t, 0, values.data(), t.numel());
  }
}

Rng::State rank_dropout_state(const Rng::State& rank0, int rank) {
  if (rank == 0) return rank0;
  return Rng(rank0[0] ^ (0x9E3779B97F4A7C15ULL * static_cast<uint64_t>(rank))).state();
}

std::string broadcast_string(const std::string& text, Communicator& comm) {
  std::vector<int64_t> size{static_cast<int64_t>(text.size())};
  comm.broadcast(as_bytes(size), Communicator::kWriter);
  std::vector<char> bytes(text.begin(), text.end());
  bytes.resize(static_cast<size_t>(size[0]));
  comm.broadcast(as_bytes(bytes), Communicator::kWriter);
  return {bytes.begin(), bytes.end()};
}

// ---- ZeRO-1 ----------------------------------------------------------------

// Each parameter gathered where it lies. A parameter off the host (OpenCL)
// goes through a host copy of itself alone.
void all_gather_parameters(const optim::Optimizer& sharded, const std::vector<std::vector<int64_t>>& runs,
                           Communicator& comm) {
  const NamedTensors& params = sharded.params();
  std::vector<Communicator::Runs> arrays;
  std::vector<std::vector<float>> host_copies;  // of parameters off the host
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& p = params[i].second;
    float* values = nullptr;
    if (p.device().host_addressable()) {
      values = p.data();
    } else {
      host_copies.emplace_back(static_cast<size_t>(p.numel()));
      values = host_copies.back().data();
      const optim::Slice& own = sharded.owned(i);
      read_elements(p, own.begin, own.end, values + own.begin);
    }
    arrays.push_back({{values, static_cast<size_t>(p.numel())}, runs[i]});
  }
  comm.all_gather_in_place(arrays);
  for (size_t i = 0, copy = 0; i < params.size(); ++i)
    if (!params[i].second.device().host_addressable())
      write_elements(params[i].second, 0, host_copies[copy++].data(), params[i].second.numel());
}

// Each state tensor gathered on the writer alone, from every rank's slices of it:
// the other ranks send their slices from where they lie.
optim::OptimizerState gather_optimizer_state(const optim::Optimizer& sharded,
                                             const std::vector<std::vector<int64_t>>& runs, Communicator& comm) {
  const NamedTensors& params = sharded.params();
  optim::OptimizerState whole{sharded.name(), sharded.steps(), {}};
  // The writer assembles the whole state, which ZeRO keeps it from holding
  // while it trains: it makes room first among the blocks the step's
  // activations left in the allocator's cache.
  if (comm.writes()) release_cached_cpu_memory();
  // A single process's optimizer lists each parameter's state in name order.
  std::vector<std::string> keys = sharded.state_names();
  std::sort(keys.begin(), keys.end());
  std::vector<std::vector<Tensor>> per_key(keys.size(), std::vector<Tensor>(params.size()));
  for (size_t k = 0; k < keys.size(); ++k) {
    // A state exists once its parameter has been updated, on whichever rank owns it.
    std::vector<int64_t> exists(params.size(), 0);
    for (size_t i = 0; i < params.size(); ++i) exists[i] = sharded.find_state(i, keys[k]) != nullptr;
    comm.all_reduce_max(exists);
    std::vector<Communicator::Runs> arrays;
    std::vector<std::vector<float>> host_copies;  // of slices off the host, or of none yet (zeros)
    for (size_t i = 0; i < params.size(); ++i) {
      if (!exists[i]) continue;
      const Tensor& p = params[i].second;
      const optim::Slice& own = sharded.owned(i);
      const Tensor* piece = sharded.find_state(i, keys[k]);
      std::span<float> values;
      if (comm.writes()) {
        per_key[k][i] = Tensor::zeros(p.shape());
        if (piece && own.size() > 0) read_elements(*piece, 0, own.size(), per_key[k][i].data() + own.begin);
        values = {per_key[k][i].data(), static_cast<size_t>(p.numel())};
      } else if (piece && piece->device().host_addressable()) {
        values = {piece->data(), static_cast<size_t>(own.size())};
      } else {
        host_copies.emplace_back(static_cast<size_t>(own.size()), 0.0f);
        if (piece && own.size() > 0) read_elements(*piece, 0, own.size(), host_copies.back().data());
        values = host_copies.back();
      }
      arrays.push_back({values, runs[i]});
    }
    comm.gather_in_place(arrays, Communicator::kWriter);
  }
  for (size_t i = 0; i < params.size(); ++i)
    for (size_t k = 0; k < keys.size(); ++k)
      if (per_key[k][i].defined()) whole.tensors.emplace_back(keys[k] + "." + params[i].first, per_key[k][i]);
  return whole;
}

optim::OptimizerState broadcast_optimizer_state(const optim::OptimizerState& on_root, Communicator& comm) {
  if (comm.size() == 1) return on_root;
  nlohmann::json header = {{"kind", on_root.kind}, {"steps", on_root.steps}, {"tensors", nlohmann::json::array()}};
  for (const auto& [name, t] : on_root.tensors) header["tensors"].push_back({name, t.shape()});
  header = nlohmann::json::parse(broadcast_string(comm.writes() ? header.dump() : "", comm));
  optim::OptimizerState state{header["kind"], header["steps"], {}};
  for (size_t i = 0; i < header["tensors"].size(); ++i) {
    Shape shape = header["tensors"][i][1].get<Shape>();
    Tensor t = comm.writes() ? on_root.tensors[i].second.to(cpu()) : Tensor::empty(shape);
    comm.broadcast(std::as_writable_bytes(std::span<float>(t.data(), static_cast<size_t>(t.numel()))),
                   Communicator::kWriter);
    state.tensors.emplace_back(header["tensors"][i][0].get<std::string>(), t);
  }
  return state;
}

// ---- Consistency -----------------------------------------------------------

void check_same_on_every_rank(uint64_t digest, const std::string& what, const std::string& source,
                              Communicator& comm) {
  std::vector<uint64_t> all(static_cast<size_t>(comm.size()));
  comm.all_gather(std::as_bytes(std::span<const uint64_t>(&digest, 1)), as_bytes(all));
  for (int r = 1; r < comm.size(); ++r)
    if (all[r] != all[0])
      fail_as<ErrorOnEveryRank>(source, ": rank ", r, " read other ", what, " than rank 0 (digest ", std::hex, all[r],
                                " vs ", all[0], "): every rank must train on the same config and data");
}

}  // namespace sf::dist
