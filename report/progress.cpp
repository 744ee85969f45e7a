#include "progress.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>

namespace sf::report {

namespace {
constexpr double kPlainInterval = 10.0;  // seconds between plain log lines
constexpr int kBarWidth = 24;

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// "1:02:03" or "02:03".
std::string format_duration(double seconds) {
  auto s = static_cast<long long>(std::llround(std::max(seconds, 0.0)));
  char buffer[32];
  if (s >= 3600)
    std::snprintf(buffer, sizeof buffer, "%lld:%02lld:%02lld", s / 3600, s / 60 % 60, s % 60);
  else
    std::snprintf(buffer, sizeof buffer, "%02lld:%02lld", s / 60, s % 60);
  return buffer;
}
}  // namespace

Progress::Progress(int64_t epoch, int64_t num_epochs, int64_t batches, int64_t first_batch)
    : epoch_(epoch), num_epochs_(num_epochs), batches_(batches), first_batch_(first_batch),
      terminal_(isatty(STDERR_FILENO) != 0), start_(std::chrono::steady_clock::now()), last_print_(start_) {}

std::string Progress::line(int64_t batch, float loss, float lr, int64_t tokens) const {
  double elapsed = seconds_since(start_);
  int64_t done = batch - first_batch_;
  double eta = done > 0 ? elapsed / static_cast<double>(done) * static_cast<double>(batches_ - batch) : 0.0;
  char buffer[256];
  std::snprintf(buffer, sizeof buffer, "epoch %02lld/%02lld %lld/%lld loss %.4f lr %.3g %.0f tok/s ETA %s",
                static_cast<long long>(epoch_), static_cast<long long>(num_epochs_ - 1),
                static_cast<long long>(batch), static_cast<long long>(batches_), loss, lr,
                tokens / std::max(elapsed, 1e-9), format_duration(eta).c_str());
  return buffer;
}

void Progress::update(int64_t batch, float loss, float lr, int64_t tokens) {
  if (terminal_) {
    int filled = batches_ > 0 ? static_cast<int>(kBarWidth * batch / batches_) : kBarWidth;
    std::string bar(filled, '#');
    bar.resize(kBarWidth, '.');
    std::fprintf(stderr, "\r[%s] %s\033[K", bar.c_str(), line(batch, loss, lr, tokens).c_str());
    std::fflush(stderr);
  } else if (seconds_since(last_print_) >= kPlainInterval) {
    std::fprintf(stderr, "%s\n", line(batch, loss, lr, tokens).c_str());
    last_print_ = std::chrono::steady_clock::now();
  }
}

void Progress::finish(float mean_loss) {
  if (terminal_) std::fprintf(stderr, "\r\033[K");
  std::fprintf(stderr, "epoch %02lld: %lld batches, mean loss %.4f, %s\n", static_cast<long long>(epoch_),
               static_cast<long long>(batches_), mean_loss, format_duration(seconds_since(start_)).c_str());
}

}  // namespace sf::report
