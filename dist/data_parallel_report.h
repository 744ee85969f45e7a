// The line a data-parallel run ends with: what the ranks' communication cost
// and what each rank did (docs/12-data-parallel.md shows one).
#pragma once
#include <cstdint>

#include "dist/communicator.h"
#include "dist/data_parallel.h"

namespace sf::dist {

// What this rank trained on in this process, and what its last optimizer
// step cost it: the figures the line gives per rank, beside the peak memory
// and where its sums ran, which it reads itself.
struct RankTally {
  int64_t pairs = 0, label_tokens = 0, empty_shares = 0;
  int64_t optimizer_state_bytes = 0;
  int64_t step_bytes_sent = 0, step_elements_squared = 0;
};

// A collective: every rank gives its tally, and the writer prints the line.
void report_data_parallel(Communicator& comm, const GradientReducer& reducer, const RankTally& mine);

}  // namespace sf::dist
