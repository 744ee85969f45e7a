#include "gradient_sync.h"

namespace sf::dist {

namespace {

// Data-parallel ranks: the reducer's buckets, and ZeRO-1's shards.
class RankGradients final : public GradientSync {
 public:
  RankGradients(const NamedTensors& params, Communicator& comm, size_t bucket_bytes, bool overlap, bool zero)
      : reducer_(params, comm, bucket_bytes, overlap, zero), comm_(comm), zero_(zero) {}

  BackwardHooks hooks() override { return reducer_.hooks(); }
  // The buckets settle at the first step's finish(), and the runs with
  // them: under ZeRO the optimizer is sharded then, before its first update,
  // and only then are the squares of this rank's runs known. Afterwards each
  // bucket's squares are taken as soon as its sums are in, of this rank's
  // runs alone (every rank holds every sum without ZeRO, but reading them
  // all is a pass over the gradients that each of R ranks would repeat).
  StepSquares finish(optim::Optimizer& optimizer) override {
    if (zero_ && !optimizer.sharded()) {
      reducer_.finish();
      optimizer.shard(reducer_.owned(comm_.rank()));
      return squares_of_owned(optimizer, false);
    }
    const bool runs = !reducer_.shard_runs().empty();
    const std::vector<optim::Slice> slices = runs ? reducer_.owned(comm_.rank()) : optimizer.owned();
    optim::GradSquares squares(optimizer.params(), slices);
    reducer_.finish([&squares](std::span<const size_t> params) { squares.add(params); });
    return {squares.total(), squares.elements(), !runs};
  }
  void after_update(optim::Optimizer& optimizer) override {
    if (optimizer.sharded()) all_gather_parameters(optimizer, reducer_.shard_runs(), comm_);
  }
  void zero_grad(optim::Optimizer&) override { reducer_.zero_grad(); }
  optim::OptimizerState whole_state(const optim::Optimizer& optimizer) override {
    return optimizer.sharded() ? gather_optimizer_state(optimizer, reducer_.shard_runs(), comm_)
                               : optimizer.state_dict();
  }
  const GradientReducer* reducer() const override { return &reducer_; }

 private:
  GradientReducer reducer_;
  Communicator& comm_;
  bool zero_;
};

}  // namespace

StepSquares squares_of_owned(const optim::Optimizer& optimizer, bool whole) {
  optim::GradSquares squares(optimizer.params(), optimizer.owned());
  squares.add_all();
  return {squares.total(), squares.elements(), whole};
}

std::unique_ptr<GradientSync> make_gradient_sync(const NamedTensors& params, Communicator& comm, size_t bucket_bytes,
                                                 bool overlap, bool zero) {
  if (comm.size() == 1) return std::make_unique<GradientSync>();
  return std::make_unique<RankGradients>(params, comm, bucket_bytes, overlap, zero);
}

}  // namespace sf::dist
