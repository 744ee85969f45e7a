// The doctest runner. After doctest's own report it prints the plain summary
// line CI reads: "tests: N passed, M failed[, K skipped]" (test cases, and
// the skipped parts of test cases: skip.h), counting the test cases it ran:
// with --first/--last, those of that range. A run whose filters match no
// test case fails.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>

#include "skip.h"

int& sf::testing::skipped_count() {
  static int count = 0;
  return count;
}

int& sf::testing::skipped_parts() {
  static int count = 0;
  return count;
}

namespace {

doctest::TestRunStats g_stats;
unsigned g_cases_run = 0;  // in the range --first/--last give (run-tests's chunks), not all that pass the filters

struct SummaryListener : doctest::IReporter {
  explicit SummaryListener(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats& stats) override { g_stats = stats; }
  void test_case_start(const doctest::TestCaseData&) override { ++g_cases_run; }
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {}
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};

}  // namespace

REGISTER_LISTENER("summary", 1, SummaryListener);

int main(int argc, char** argv) {
  doctest::Context context(argc, argv);
  // The make target for ThreadSanitizer runs only the threaded tests.
  if (const char* filter = std::getenv("SF_TEST_FILTER")) context.addFilter("test-case", filter);
  int status = context.run();
  if (context.shouldExit()) return status;
  // A filter (-tc, -ts, SF_TEST_FILTER) that matches nothing is a mistake, not
  // a pass: a misspelt name in a command would otherwise report success.
  if (g_stats.numTestCasesPassingFilters == 0) {
    std::fprintf(stderr, "error: no test case matches the filters\n");
    std::printf("tests: 0 passed, 0 failed\n");
    return 1;
  }
  // Skipped: the test cases that skipped, and the parts of others that did
  // (those cases count as passed or failed by what they ran).
  unsigned failed = g_stats.numTestCasesFailed;
  unsigned skipped_cases = static_cast<unsigned>(sf::testing::skipped_count());
  unsigned passed = g_cases_run - failed - skipped_cases;
  unsigned skipped = skipped_cases + static_cast<unsigned>(sf::testing::skipped_parts());
  if (skipped)
    std::printf("tests: %u passed, %u failed, %u skipped\n", passed, failed, skipped);
  else
    std::printf("tests: %u passed, %u failed\n", passed, failed);
  return status;
}
