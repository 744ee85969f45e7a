#include "stop.h"

#include <csignal>
#include <vector>

namespace sf::train {

std::atomic<bool> g_stop_requested{false};

static void request_stop(int) {
  g_stop_requested = true;
  // A second signal, of either kind (Ctrl-C, then kill), ends the process at once.
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
}

void install_stop_handlers() {
  std::signal(SIGINT, request_stop);
  std::signal(SIGTERM, request_stop);
}

bool stop_requested_anywhere(Communicator& comm) {
  std::vector<int64_t> stop{g_stop_requested ? 1 : 0};
  comm.all_reduce_max(stop);
  return stop[0] > 0;
}

}  // namespace sf::train
