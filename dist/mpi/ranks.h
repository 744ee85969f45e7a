// MPI's header, as every file of dist/mpi/ includes it, and the job's ranks
// as the MPI communicator's parts (liveness.h, ring.h, shared_window.h) see
// them: the communicator they talk on, this rank and their number, and the
// tags of the parts' messages on it. The communicator (communicator.cpp)
// fills it as MPI starts; the parts hold a reference to it. Private to
// dist/mpi/.
#pragma once
// Open MPI's mpi.h also declares the deprecated C++ bindings (MPI::), which
// we do not use and which do not compile cleanly under -Wextra.
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>

namespace sf::dist {

struct MpiRanks {
  MPI_Comm comm = MPI_COMM_NULL;  // our duplicate of MPI_COMM_WORLD
  int rank = 0, size = 1;
};

// The tags of the point-to-point messages on MpiRanks::comm, one per kind,
// so that no kind can take another's message for its own.
enum Tag : int {
  kCensusAsk = 1,    // "are you alive?" (no content; liveness.cpp)
  kCensusReply = 2,  // the answer: the Op the rank waits in
  kRing = 3,         // the ring all-reduce's chunks (ring.cpp)
};

}  // namespace sf::dist
