// The doctest runner. After doctest's own report it prints the plain summary
// line CI reads: "tests: N passed, M failed[, K skipped]" (test cases, and
// the skipped parts of test cases: skip.h), counting the test cases it ran:
// with --first/--last, those of that range. A run whose filters match no
// test case fails. With --case-times=FILE it also writes each test case's
// wall time to FILE, a line "SECONDS<tab>NAME" each: tools/run-tests cuts the
// suite into chunks of equal time by them.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

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
unsigned g_cases_run = 0;  // in the range --first/--last give, not all that pass the filters
std::FILE* g_case_times = nullptr;  // --case-times=FILE
const char* g_case_name = "";

struct SummaryListener : doctest::IReporter {
  explicit SummaryListener(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats& stats) override { g_stats = stats; }
  void test_case_start(const doctest::TestCaseData& data) override {
    ++g_cases_run;
    g_case_name = data.m_name;
  }
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats& stats) override {
    // doctest's time of the whole case, every subcase's re-entry included.
    // (Flushed at once: a test that forks must not write it again from its child.)
    if (g_case_times) {
      std::fprintf(g_case_times, "%.3f\t%s\n", stats.seconds, g_case_name);
      std::fflush(g_case_times);
    }
  }
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
  // The programs the tests start write to this same standard output. Filled
  // and flushed as a block, a line of ours could be cut anywhere by theirs
  // ("SKIPPED: ...(amx_bf16, amxdata: 269 training pairs..." in a log, which
  // tools/run-tests then reads as a skip reason): flushed at each newline,
  // every line goes out in one write, whole.
  std::setvbuf(stdout, nullptr, _IOLBF, BUFSIZ);
  doctest::Context context(argc, argv);
  // The make target for ThreadSanitizer runs only the threaded tests.
  if (const char* filter = std::getenv("SF_TEST_FILTER")) context.addFilter("test-case", filter);
  // (doctest passes over options it does not know.)
  const char* prefix = "--case-times=";
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], prefix, std::strlen(prefix)) == 0) {
      const char* path = argv[i] + std::strlen(prefix);
      g_case_times = std::fopen(path, "w");
      if (!g_case_times) {
        std::fprintf(stderr, "error: cannot write the test cases' times to %s\n", path);
        return 2;
      }
    }
  int status = context.run();
  if (g_case_times) std::fclose(g_case_times);
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
