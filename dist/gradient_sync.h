// How a step's gradients become the whole batch's: the one point where the
// training step of a single process and of data-parallel ranks differ
// (docs/12-data-parallel.md). A process alone already has them
// (GradientSync's defaults); ranks sum theirs over the communicator
// (GradientReducer) and, with ZeRO-1, each updates only its own runs of the
// parameters and then gathers everyone's. The trainer picks one at the start,
// by the communicator's size; the step calls the same four functions either
// way, with no test of how many ranks there are.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include "autograd/engine.h"
#include "dist/communicator.h"
#include "dist/data_parallel.h"
#include "optim/clip.h"
#include "optim/optimizer.h"

namespace sf::dist {

// The sum of the squares of the gradient elements that finish() took: of
// every element the optimizer updates (`whole`), or of this rank's runs
// alone, which the ranks then add up. `elements`: how many it took.
struct StepSquares {
  double sum = 0.0;
  int64_t elements = 0;
  bool whole = true;
};

// The squares of the gradient elements the optimizer updates (its owned()),
// all taken at once.
StepSquares squares_of_owned(const optim::Optimizer& optimizer, bool whole);

class GradientSync {
 public:
  virtual ~GradientSync() = default;
  // For the backward of an optimizer step's last batch.
  virtual BackwardHooks hooks() { return {}; }
  // After that backward: the gradients are the whole batch's (under ZeRO-1,
  // in this rank's runs, and the optimizer is sharded from the first step).
  // Returns the squares for the gradient norm (optim::grad_squares): a
  // process alone takes them all; ranks each take their own runs (once the
  // first step has fixed them), so that no rank reads every gradient again.
  virtual StepSquares finish(optim::Optimizer& optimizer) { return squares_of_owned(optimizer, true); }
  // After the optimizer's update: every rank's updated parameters everywhere.
  virtual void after_update(optim::Optimizer&) {}
  // After the step: the gradients zeroed for the next.
  virtual void zero_grad(optim::Optimizer& optimizer) { optimizer.zero_grad(); }
  // The optimizer's whole state, as one process holds it (for a checkpoint,
  // written by the writer).
  virtual optim::OptimizerState whole_state(const optim::Optimizer& optimizer) { return optimizer.state_dict(); }
  // The reducer of data-parallel ranks; null for a process alone.
  virtual const GradientReducer* reducer() const { return nullptr; }
};

// A process alone (`comm` of size 1): the defaults. Ranks: their gradients
// summed in buckets of about `bucket_bytes`, overlapping backward when
// `overlap`, the optimizer sharded when `zero`.
std::unique_ptr<GradientSync> make_gradient_sync(const NamedTensors& params, Communicator& comm, size_t bucket_bytes,
                                                 bool overlap, bool zero);

}  // namespace sf::dist
