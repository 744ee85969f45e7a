// Learning-rate schedules, steps counted from 1 (formulas in docs/06-optim.md;
// noam is Vaswani et al. 2017, §5.3).
#pragma once
#include <cstdint>
#include <string>

namespace sf::optim {

enum class Schedule { Constant, Noam, Cosine };

Schedule parse_schedule(const std::string& name);  // "constant" | "noam" | "cosine"

struct ScheduleOptions {
  Schedule kind = Schedule::Constant;
  float lr = 1e-4f;            // for noam, the factor
  int64_t warmup_steps = 4000;
  int64_t total_steps = 1;     // cosine reaches 0 here
  int64_t d_model = 512;       // noam scales by d_model^-0.5
};

// constant: lr
// noam:     lr * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)
// cosine:   lr * step / warmup while step <= warmup, then
//           lr * (1 + cos(pi * (step - warmup) / (total - warmup))) / 2
float learning_rate(const ScheduleOptions& options, int64_t step);

}  // namespace sf::optim
