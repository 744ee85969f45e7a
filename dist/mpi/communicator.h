// The communicator of an MPI job (make MPI=1; the interface is
// dist/communicator.h): every process `mpirun -np N` starts is one rank.
#pragma once
#include <memory>

#include "dist/communicator.h"

namespace sf::dist {

// Starts MPI on a communication thread of its own, which makes every MPI
// call of the process (MPI_Init_thread with MPI_THREAD_FUNNELED: MPI's main
// thread is that one, never the compute threads), and returns the
// communicator of all the job's ranks; destroying it waits for every rank to
// get there, then ends MPI (MPI_Finalize). Call it once, first thing in main.
//
// A collective that waits longer than SCRATCHFORMER_MPI_TIMEOUT seconds
// (environment variable, default 30) for the other ranks ends the job with
// one line naming the rank that does not respond. A value that is not a
// number > 0 is bad input (sf::Error), reported before MPI starts.
//
// Ranks that all share one machine sum the gradients in shared memory
// (Communicator::shared_buffers); SCRATCHFORMER_MPI_SHARED_SUMS=0 makes them
// send messages instead, as ranks on separate machines must (to measure or
// test that case on one machine, with mpirun --mca btl self,tcp).
std::unique_ptr<Communicator> mpi_world(int* argc, char*** argv);

// Whether a launcher started this process as a rank of a job, as the
// variables launchers set tell: OMPI_COMM_WORLD_SIZE (Open MPI's mpirun and
// mpiexec), PMIX_RANK (any PMIx launcher: those, prterun, srun --mpi=pmix) or
// PMI_RANK (a PMI-1 or PMI-2 one: MPICH's mpiexec, srun --mpi=pmi2). In a
// process started by hand, MPI_Init would start MPI's runtime for a job of
// one rank.
bool started_by_launcher();

}  // namespace sf::dist
