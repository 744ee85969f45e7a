// libFuzzer's entry point for one target, chosen at compile time:
// -DSF_FUZZ_TARGET=tokenizer builds the tokenizer's fuzzer (see the Makefile).
#include <cstddef>
#include <cstdint>

#include "autograd/kernels/thread_pool.h"
#include "targets.h"

// The kernels on this thread alone: the inputs are small, and `make test`
// runs two fuzzers side by side on two cores, where pools of threads that
// spin while they wait for work would take each other's cores.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  sf::kernels::set_num_threads(1);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static constexpr sf::fuzz::Target target{"", sf::fuzz::SF_FUZZ_TARGET};
  sf::fuzz::run(target, std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
