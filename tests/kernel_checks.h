// Backend conformance driven by the kernel list (autograd/kernels/kernels.h),
// in the spirit of ggml's test-backend-ops: one table, below, names for every
// entry of the kernel table the check that compares it with the scalar
// reference, and each backend's test file defines a check of each name
// (tests/test_kernels.cpp for the fast CPU kernels, tests/test_backend.cpp for
// OpenCL). `KernelChecks` has one member per entry, expanded from the list,
// and each is a reference that must be bound, so a new entry without a line in
// the table, or a backend without the check it names, is a compile error, not
// a kernel that no test runs.
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

// The check of each entry, in the list's order. A check may cover several
// entries (a kernel and its backward pass, or kernels tested on the same data).
#define SF_KERNEL_CHECKS(X)                                                                                 \
  X(gemm, check_gemm) X(gemm_bf16, check_gemm_bf16) X(unary, check_unary) X(binary, check_broadcasting) X(predicate, check_broadcasting)  \
  X(predicate_int, check_broadcasting) X(fill_where, check_broadcasting)                                   \
  X(bias_relu, check_layer_norm_relu_dropout) X(relu_backward, check_layer_norm_relu_dropout)              \
  X(dropout, check_layer_norm_relu_dropout) X(dropout_add, check_layer_norm_relu_dropout)                  \
  X(sum_to, check_reductions) X(max_axis, check_reductions) X(dot, check_dot_and_optimizers)               \
  X(topk, check_topk) X(log_softmax, check_rows) X(log_softmax_backward, check_rows)                       \
  X(masked_softmax, check_rows) X(masked_softmax_backward, check_rows)                                     \
  X(layer_norm, check_layer_norm_relu_dropout) X(layer_norm_backward, check_layer_norm_relu_dropout)       \
  X(cross_entropy, check_rows) X(cross_entropy_backward, check_rows) X(copy_rows, check_copies)            \
  X(copy_strided, check_copies) X(gather_rows, check_copies) X(scatter_add_rows, check_copies)             \
  X(float_to_bf16, check_bf16_conversions) X(bf16_to_float, check_bf16_conversions)                        \
  X(adam_step, check_dot_and_optimizers) X(sgd_step, check_dot_and_optimizers)
#define SF_KERNEL_CHECK_ENTRY(entry, check) .entry = check,
// The table, in a file where the checks it names are in scope.
#define SF_KERNEL_CHECK_TABLE \
  sf::testing::KernelChecks { SF_KERNEL_CHECKS(SF_KERNEL_CHECK_ENTRY) }

// The same for the thread count (tests/test_kernels.cpp): for every entry, the
// check that runs its fast version at 1, 2 and 3 threads on shapes it splits,
// or check_serial_kernels where the fast table runs it on one thread.
#define SF_KERNEL_SPLIT_CHECKS(X)                                                                             \
  X(gemm, check_gemm_split) X(gemm_bf16, check_gemm_bf16_split) X(unary, check_unary_split)                \
  X(binary, check_broadcasting_split) X(predicate, check_serial_kernels)                                   \
  X(predicate_int, check_serial_kernels) X(fill_where, check_broadcasting_split)                           \
  X(bias_relu, check_layer_norm_relu_dropout_split) X(relu_backward, check_layer_norm_relu_dropout_split)  \
  X(dropout, check_layer_norm_relu_dropout_split) X(dropout_add, check_layer_norm_relu_dropout_split)      \
  X(sum_to, check_reductions_split) X(max_axis, check_reductions_split)                                    \
  X(dot, check_dot_and_optimizers_split) X(topk, check_serial_kernels) X(log_softmax, check_rows_split)    \
  X(log_softmax_backward, check_rows_split) X(masked_softmax, check_rows_split)                            \
  X(masked_softmax_backward, check_rows_split) X(layer_norm, check_layer_norm_relu_dropout_split)          \
  X(layer_norm_backward, check_layer_norm_relu_dropout_split) X(cross_entropy, check_rows_split)           \
  X(cross_entropy_backward, check_rows_split) X(copy_rows, check_copies_split)                             \
  X(copy_strided, check_copies_split) X(gather_rows, check_copies_split)                                   \
  X(scatter_add_rows, check_serial_kernels) X(float_to_bf16, check_bf16_conversions_split)                 \
  X(bf16_to_float, check_bf16_conversions_split) X(adam_step, check_dot_and_optimizers_split)              \
  X(sgd_step, check_dot_and_optimizers_split)
#define SF_KERNEL_SPLIT_CHECK_TABLE \
  sf::testing::KernelChecks { SF_KERNEL_SPLIT_CHECKS(SF_KERNEL_CHECK_ENTRY) }

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
