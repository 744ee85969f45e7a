// Skipping a test at run time (doctest can only skip statically): the test case
// prints why and is counted as skipped, not passed, in the summary line.
#pragma once
#include <cstdio>

namespace sf::testing {
int& skipped_count();
}

#define SF_SKIP(reason)                         \
  do {                                          \
    std::printf("SKIPPED: %s\n", reason);       \
    ++sf::testing::skipped_count();             \
    return;                                     \
  } while (0)
