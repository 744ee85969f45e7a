// Backend conformance driven by the kernel list (autograd/kernels/kernels.h),
// in the spirit of ggml's test-backend-ops: a backend's test file names, for
// every entry of the kernel table, the check that compares it with the scalar
// reference. `KernelChecks` has one member per entry, expanded from the list,
// and each is a reference that must be bound, so a new entry without a check
// is a compile error, not a kernel that no test runs.
#pragma once
#include <doctest/doctest.h>

#include <string>
#include <utility>
#include <vector>

#include "autograd/kernels/kernels.h"

namespace sf::testing {

struct KernelChecks {
#define SF_KERNEL_CHECK(entry) void (&entry)();
  SF_KERNEL_LIST(SF_KERNEL_CHECK)
#undef SF_KERNEL_CHECK
};

// Runs each distinct check once (one may cover several entries, e.g. a kernel
// and its backward pass), as a subcase named by the entries it covers.
inline void run_kernel_checks(const KernelChecks& checks) {
  std::vector<std::pair<void (*)(), std::string>> runs;
  auto add = [&](void (*check)(), const char* entry) {
    for (auto& [seen, entries] : runs)
      if (seen == check) return void(entries += std::string(", ") + entry);
    runs.emplace_back(check, entry);
  };
#define SF_ADD_CHECK(entry) add(&checks.entry, #entry);
  SF_KERNEL_LIST(SF_ADD_CHECK)
#undef SF_ADD_CHECK
  for (const auto& [check, entries] : runs)
    SUBCASE(entries.c_str()) { check(); }
}

}  // namespace sf::testing
