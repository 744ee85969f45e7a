// Gradient accumulation: one optimizer step per `every` batches. Each batch's
// loss is scaled by 1/every before backward, so the summed gradient is the
// mean over the accumulated batches: what one batch `every` times larger gives
// when the batches hold equally many label tokens (each loss is a mean over
// its batch's tokens). An epoch's last step may come after fewer batches; its
// gradient is still their sum over `every`, so that step is a smaller one.
#pragma once
#include <cstdint>

#include "autograd/error.h"

namespace sf::optim {

class GradAccumulation {
 public:
  explicit GradAccumulation(int64_t every) : every_(every) {
    if (every < 1) fail("grad_accum must be >= 1, got ", every);
  }
  float loss_scale() const { return 1.0f / static_cast<float>(every_); }
  // Counts a batch; true when an optimizer step is due (every `every` batches,
  // and at the last batch of an epoch so no gradient is carried over).
  bool step_due(bool last_batch_of_epoch) {
    if (++pending_ < every_ && !last_batch_of_epoch) return false;
    pending_ = 0;
    return true;
  }
  int64_t pending() const { return pending_; }
  void set_pending(int64_t pending) { pending_ = pending; }

 private:
  int64_t every_;
  int64_t pending_ = 0;
};

}  // namespace sf::optim
