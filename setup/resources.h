// What a run will need, checked before it starts rather than discovered after
// an epoch of work: memory for the model against the machine's, and output
// folders that exist (or can be made) and can be written; and the threads it
// computes on.
#pragma once
#include <cstdint>
#include <string>

#include "nn/transformer.h"

namespace sf::setup {

// Bytes a training step needs, roughly: weights, gradients and two Adam
// moments (16 bytes a parameter) plus the activations kept for backward.
double training_bytes(const nn::TransformerConfig& model, int64_t batch_size);
// Bytes translation needs, roughly: the weights and a batch of beams' caches.
double inference_bytes(const nn::TransformerConfig& model, int64_t batch_size, int64_t beam);
// Fails, naming `source`, when `bytes` exceed the machine's physical memory.
void check_fits_in_memory(double bytes, const std::string& what, const std::string& source);

// Creates `folder` (with parents) if missing and checks a file can be created
// in it; fails naming the config key otherwise.
void check_writable_folder(const std::string& folder, const std::string& source, const std::string& key);

// The kernels' thread count for the config key `threads`: the key itself when
// > 0; for 0, the cores this process may run on. With `communication_thread`
// (data parallelism: each rank's MPI thread, dist/mpi/communicator.cpp),
// one core of an unbound machine is left to the ranks' communication threads.
int threads_to_use(int64_t threads_key, int ranks_on_this_machine = 1, bool communication_thread = false);

}  // namespace sf::setup
