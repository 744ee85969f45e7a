#include "data_parallel_report.h"

#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <span>
#include <string>
#include <vector>

namespace sf::dist {

namespace {

// Each step's wait on every rank. A rank that waits also for a slower one to
// finish backward counts that skew as waiting; the rank that finished last
// waits for the communication alone: each step's least wait over the ranks
// is the communication that backward did not hide.
std::vector<double> least_waits(Communicator& comm, const std::vector<double>& waits) {
  std::vector<double> all_waits(waits.size() * static_cast<size_t>(comm.size()));
  comm.all_gather(std::as_bytes(std::span(waits)), std::as_writable_bytes(std::span(all_waits)));
  std::vector<double> least = waits;
  for (size_t step = 0; step < waits.size(); ++step)
    for (int r = 0; r < comm.size(); ++r) least[step] = std::min(least[step], all_waits[r * waits.size() + step]);
  return least;
}

// Figure k of every rank, comma-separated (`all` holds `count` figures a rank,
// one rank after the other); in MiB when `mib`.
std::string per_rank(const std::vector<int64_t>& all, size_t count, size_t k, bool mib) {
  std::string text;
  for (size_t r = 0; r < all.size() / count; ++r) {
    char figure[32];
    int64_t value = all[r * count + k];
    if (mib)
      std::snprintf(figure, sizeof figure, "%.1f", value / 1048576.0);
    else
      std::snprintf(figure, sizeof figure, "%lld", static_cast<long long>(value));
    text.append(r > 0 ? ", " : "").append(figure);
  }
  return text;
}

}  // namespace

// What data parallelism cost this run: the communication backward did not
// hide, and each rank's memory (ZeRO-1 shrinks the optimizer state's share);
// what each rank trained on, whose sums are the whole batches'; and where
// each rank saved work: the gradient elements it squared (its own runs, which
// add up to the model's parameters) and where its sums ran (in shared memory
// where the ranks share a machine).
void report_data_parallel(Communicator& comm, const GradientReducer& reducer, const RankTally& mine) {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const Communicator::SumPaths sums = comm.sum_paths();
  const std::vector<int64_t> figures{mine.pairs,           mine.label_tokens,          mine.empty_shares,
                                     usage.ru_maxrss * 1024, mine.optimizer_state_bytes, mine.step_bytes_sent,
                                     mine.step_elements_squared, sums.in_shared_memory,   sums.by_messages};
  std::vector<int64_t> all(figures.size() * static_cast<size_t>(comm.size()));
  comm.all_gather(std::as_bytes(std::span(figures)), std::as_writable_bytes(std::span(all)));
  auto column = [&](size_t k, bool mib) { return per_rank(all, figures.size(), k, mib); };
  // The figures leave out the first two steps (where there are more), which
  // set the buckets up and are said apart: the first sums buckets planned
  // before backward's order was known, the second is the first on the
  // buckets in that order (its sums measured 10-20x slower than later steps').
  const std::vector<double>& waits = reducer.waits();
  const std::vector<double> least = least_waits(comm, waits);
  const size_t setup = waits.size() > 2 ? 2 : 0;
  char setup_steps[128] = "";
  if (setup)
    std::snprintf(setup_steps, sizeof setup_steps,
                  "; from the third step: the first two, which set the buckets up, exposed %.1f ms and %.1f ms",
                  least[0] * 1e3, least[1] * 1e3);
  const double per_step_ms = waits.size() == setup ? 0.0 : 1e3 / static_cast<double>(waits.size() - setup);
  say(comm, "data parallel: %.2f ms per step waiting for gradient all-reduces after backward (overlap %s), "
      "%.2f ms of it exposed communication (each step's least wait over the ranks%s); "
      "per rank: pairs %s, label tokens %s, empty shares %s, peak RSS %s MiB, optimizer state %s MiB, "
      "sent in the last step %s bytes, gradient elements squared in the last step %s, "
      "gradient sums in shared memory %s, by messages %s\n",
      std::accumulate(waits.begin() + setup, waits.end(), 0.0) * per_step_ms,
      reducer.overlapping() ? "on" : "off", std::accumulate(least.begin() + setup, least.end(), 0.0) * per_step_ms,
      setup_steps, column(0, false).c_str(), column(1, false).c_str(), column(2, false).c_str(),
      column(3, true).c_str(), column(4, true).c_str(), column(5, false).c_str(), column(6, false).c_str(),
      column(7, false).c_str(), column(8, false).c_str());
}

}  // namespace sf::dist
