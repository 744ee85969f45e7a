// Training progress on stderr: a bar redrawn in place on a terminal (batch k/n,
// loss, lr, tokens/s, ETA), or, when stderr is not a terminal (a log file, CI),
// a plain line every few seconds and at the end of each epoch.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>

namespace sf::report {

class Progress {
 public:
  Progress(int64_t epoch, int64_t num_epochs, int64_t batches, int64_t first_batch);
  // After batch `batch` (1-based) of the epoch; `tokens`: label tokens trained in the epoch so far.
  void update(int64_t batch, float loss, float lr, int64_t tokens);
  void finish(float mean_loss);

 private:
  std::string line(int64_t batch, float loss, float lr, int64_t tokens) const;

  int64_t epoch_, num_epochs_, batches_, first_batch_;
  bool terminal_;
  std::chrono::steady_clock::time_point start_, last_print_;
};

}  // namespace sf::report
