// Replays the inputs the fuzzers found (fuzz/regressions/TARGET/) through the
// fuzz targets' own entry functions, in the normal build. Each input must give
// what fuzz/regressions/expected says of it ("TARGET/FILE<tab>outcome"): the
// word "accepted", or the whole one-line error (sf::Error) that rejects it,
// the fuzz targets' scratch folder written SCRATCH. An input the fuzzer found
// crashing must now end in one of those two ways; pinning which one keeps a
// later change from turning a clear rejection into a silent acceptance or
// another message. A kept input without an expected outcome fails, and so
// does an outcome whose input is gone.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "fuzz/targets.h"

namespace fs = std::filesystem;

namespace {

const fs::path kRegressions = "fuzz/regressions";

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return std::move(bytes).str();
}

std::map<std::string, std::string> expected_outcomes() {
  std::map<std::string, std::string> outcomes;
  std::ifstream in(kRegressions / "expected");
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    size_t tab = line.find('\t');
    REQUIRE_MESSAGE(tab != std::string::npos, "fuzz/regressions/expected: no tab in: ", line);
    outcomes[line.substr(0, tab)] = line.substr(tab + 1);
  }
  return outcomes;
}

// What `target` makes of `input`, its scratch folder written SCRATCH.
std::string outcome(const sf::fuzz::Target& target, const std::string& input) {
  try {
    target.run(input);
    return "accepted";
  } catch (const sf::Error& e) {
    const std::string folder = fs::path(sf::fuzz::scratch_file("probe", "")).parent_path().string();
    std::string message = e.what();
    for (size_t at; (at = message.find(folder)) != std::string::npos;) message.replace(at, folder.size(), "SCRATCH");
    return message;
  }
}

}  // namespace

TEST_CASE("fuzz regressions: every kept input gives its expected outcome, acceptance or one exact error") {
  std::map<std::string, std::string> expected = expected_outcomes();
  int replayed = 0;
  for (const sf::fuzz::Target& target : sf::fuzz::kTargets) {
    fs::path folder = kRegressions / target.name;
    if (!fs::is_directory(folder)) continue;
    for (const fs::directory_entry& entry : fs::directory_iterator(folder)) {
      std::string name = std::string(target.name) + "/" + entry.path().filename().string();
      INFO("fuzz/regressions/", name);
      auto it = expected.find(name);
      std::string got = outcome(target, read_bytes(entry.path()));
      if (it == expected.end()) {
        FAIL_CHECK("no expected outcome in fuzz/regressions/expected; it gives: ", got);
        continue;
      }
      CHECK(got == it->second);
      expected.erase(it);
      ++replayed;
    }
  }
  for (const auto& [name, outcome] : expected) FAIL_CHECK("fuzz/regressions/expected names ", name, ", not kept");
  CHECK(replayed > 0);
}
