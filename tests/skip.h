// Skipping a test at run time (doctest can only skip statically): the test case
// prints why and is counted as skipped, not passed, in the summary line. Or
// one part of a test case (skip_part: a bf16 level the CPU lacks): it prints
// why and adds one to the skipped count, and the rest of the case runs on.
// tools/run-tests checks every printed reason against the machine.
#pragma once
#include <cstdio>

namespace sf::testing {
int& skipped_count();
int& skipped_parts();

inline void skip_part(const char* reason) {
  std::printf("SKIPPED: %s\n", reason);
  ++skipped_parts();
}
}  // namespace sf::testing

#define SF_SKIP(reason)                         \
  do {                                          \
    std::printf("SKIPPED: %s\n", reason);       \
    ++sf::testing::skipped_count();             \
    return;                                     \
  } while (0)
