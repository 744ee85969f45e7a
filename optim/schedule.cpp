#include "schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "base/error.h"

namespace sf::optim {

Schedule parse_schedule(const std::string& name) {
  if (name == "constant") return Schedule::Constant;
  if (name == "noam") return Schedule::Noam;
  if (name == "cosine") return Schedule::Cosine;
  internal_fail("unknown schedule '", name, "' (expected constant, noam or cosine)");
}

float learning_rate(const ScheduleOptions& o, int64_t step) {
  if (step < 1) internal_fail("learning_rate: steps count from 1, got ", step);
  double s = static_cast<double>(step), warmup = static_cast<double>(std::max<int64_t>(o.warmup_steps, 1));
  switch (o.kind) {
    case Schedule::Constant:
      return o.lr;
    case Schedule::Noam:
      return static_cast<float>(o.lr / std::sqrt(double(o.d_model)) *
                                std::min(1.0 / std::sqrt(s), s * std::pow(warmup, -1.5)));
    case Schedule::Cosine: {
      if (o.warmup_steps > 0 && step <= o.warmup_steps) return static_cast<float>(o.lr * s / warmup);
      double span = static_cast<double>(std::max<int64_t>(o.total_steps - o.warmup_steps, 1));
      double progress = std::min((s - static_cast<double>(o.warmup_steps)) / span, 1.0);
      return static_cast<float>(o.lr * 0.5 * (1.0 + std::cos(std::numbers::pi * progress)));
    }
  }
  return o.lr;
}

}  // namespace sf::optim
