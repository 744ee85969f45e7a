// Gradient accumulation: one optimizer step per `every` batches. Each batch's
// loss is scaled by 1/(the number of batches in its step) before backward, so
// the summed gradient is the mean over the accumulated batches: what one batch
// that many times larger gives when the batches hold equally many label tokens
// (each loss is a mean over its batch's tokens). An epoch's last step may come
// after fewer batches (no gradient is carried into the next epoch); its
// batches are scaled by 1/(their number), so it is as large a step as the others.
#pragma once
#include <algorithm>
#include <cstdint>

#include "base/error.h"

namespace sf::optim {

class GradAccumulation {
 public:
  explicit GradAccumulation(int64_t every) : every_(every) {
    if (every < 1) internal_fail("grad_accum must be >= 1, got ", every);
  }
  // For the next batch, with `batches_left` batches in the epoch counting it.
  float loss_scale(int64_t batches_left) const {
    return 1.0f / static_cast<float>(std::min(every_, pending_ + batches_left));
  }
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
