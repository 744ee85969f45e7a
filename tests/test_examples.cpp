// The example programs run and do what they say.
#include <doctest/doctest.h>

#include <cstdio>
#include <string>
#include <sys/wait.h>

namespace {

// Runs a command; returns its exit status and what it printed.
std::pair<int, std::string> run(const std::string& command) {
  std::string output;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buffer[256];
  while (fgets(buffer, sizeof buffer, pipe)) output += buffer;
  int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

}  // namespace

TEST_CASE("examples: xor learns XOR with every optimizer") {
  for (std::string kind : {"adam", "adamw", "sgd"}) {
    CAPTURE(kind);
    auto [status, output] = run(std::string(SF_BUILD_DIR) + "/examples/xor " + kind);
    CAPTURE(output);
    CHECK(status == 0);
    CHECK(output.find("accuracy: 100%") != std::string::npos);
  }
  auto [status, output] = run(std::string(SF_BUILD_DIR) + "/examples/xor momentum");
  CHECK(status == 2);
  CHECK(output.find("unknown optimizer 'momentum'") != std::string::npos);
}

TEST_CASE("examples: train_toy learns to reverse and decodes held-out pairs") {
  auto [status, output] = run(std::string(SF_BUILD_DIR) + "/examples/train_toy");
  CAPTURE(output);
  CHECK(status == 0);
  size_t last = output.rfind("final loss ");
  REQUIRE(last != std::string::npos);
  float loss = 0.0f;
  int exact = 0, total = 0;
  REQUIRE(std::sscanf(output.c_str() + last, "final loss %f, %d of %d held-out pairs exact", &loss, &exact,
                      &total) == 3);
  CHECK(loss < 0.1f);  // from about 3.7 (log of the vocabulary size) at the start
  CHECK(total == 4);
  CHECK(exact >= 1);  // greedy decoding turns the trained model into whole reversals
}

TEST_CASE("examples: custom_op's softplus passes its gradient check, a wrong backward fails it") {
  auto [status, output] = run(std::string(SF_BUILD_DIR) + "/examples/custom_op");
  CAPTURE(output);
  CHECK(status == 0);
  CHECK(output.find("softplus gradient check: max |analytic - numeric| = ") != std::string::npos);
  CHECK(output.find("(ok)") != std::string::npos);
  auto [wrong_status, wrong_output] = run(std::string(SF_BUILD_DIR) + "/examples/custom_op --wrong-backward");
  CAPTURE(wrong_output);
  CHECK(wrong_status == 1);
  CHECK(wrong_output.find("(FAILED)") != std::string::npos);
}
