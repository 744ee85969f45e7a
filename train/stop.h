// Stopping a run on SIGINT / SIGTERM (docs/07-training.md): a signal only
// sets a flag; the training loop finishes its step, saves the position
// reached and exits 130. A second signal ends the process at once.
#pragma once
#include <atomic>

#include "train/communicator.h"

namespace sf::train {

extern std::atomic<bool> g_stop_requested;
void install_stop_handlers();

// Whether any rank has been asked to stop (a collective).
bool stop_requested_anywhere(Communicator& comm);

}  // namespace sf::train
