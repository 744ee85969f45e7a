// Replays the inputs the fuzzers found (fuzz/regressions/TARGET/) through the
// fuzz targets' own entry functions, in the normal build: each input must now
// be accepted or rejected with sf::Error, never crash or throw anything else.
// The inputs of bugs not fixed yet are listed, with the reason, in
// fuzz/regressions/known-failures ("TARGET/FILE  why") and only counted as
// skipped.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "fuzz/targets.h"
#include "skip.h"

namespace fs = std::filesystem;

namespace {

const fs::path kRegressions = "fuzz/regressions";

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return std::move(bytes).str();
}

std::set<std::string> known_failures() {
  std::set<std::string> names;
  std::ifstream in(kRegressions / "known-failures");
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line[0] != '#') names.insert(line.substr(0, line.find_first_of(" \t")));
  return names;
}

}  // namespace

TEST_CASE("fuzz regressions: every kept input is accepted or rejected with a one-line error") {
  std::set<std::string> known = known_failures();
  int replayed = 0;
  for (const sf::fuzz::Target& target : sf::fuzz::kTargets) {
    fs::path folder = kRegressions / target.name;
    if (!fs::is_directory(folder)) continue;
    for (const fs::directory_entry& entry : fs::directory_iterator(folder)) {
      std::string name = std::string(target.name) + "/" + entry.path().filename().string();
      if (known.count(name)) continue;
      INFO("fuzz/regressions/", name);
      CHECK_NOTHROW(sf::fuzz::run(target, read_bytes(entry.path())));
      ++replayed;
    }
  }
  CHECK(replayed > 0);
}

TEST_CASE("fuzz regressions: inputs of known, unfixed bugs") {
  std::set<std::string> known = known_failures();
  if (!known.empty()) {
    std::string list;
    for (const std::string& name : known) list += " " + name;
    std::string reason = "fuzz/regressions/known-failures lists bugs not fixed yet:" + list;
    SF_SKIP(reason.c_str());
  }
}
