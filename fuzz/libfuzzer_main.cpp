// libFuzzer's entry point for one target, chosen at compile time:
// -DSF_FUZZ_TARGET=tokenizer builds the tokenizer's fuzzer (see the Makefile).
#include <cstddef>
#include <cstdint>

#include "targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static constexpr sf::fuzz::Target target{"", sf::fuzz::SF_FUZZ_TARGET};
  sf::fuzz::run(target, std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
