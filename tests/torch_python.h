// PyTorch as the reference of a test: an interpreter that imports torch (or
// the test is skipped), and the Python scripts in tests/ run with it.
#pragma once
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "skip.h"

namespace sf::testing {

// The first interpreter that imports torch: python3 on the PATH, then the
// system's (Debian's python3-torch installs there, which a pyenv or venv
// python3 on the PATH does not see).
inline std::string python_with_torch() {
  for (const char* python : {"python3", "/usr/bin/python3"})
    if (std::system((std::string(python) + " -c 'import torch' >/dev/null 2>&1").c_str()) == 0)
      return python;
  return "";
}

// Runs tests/`script` with `arguments` (shell words) under `python`, prints
// what it printed, and checks that it exits 0.
inline void check_script_passes(const std::string& python, const std::string& script, const std::string& arguments) {
  std::filesystem::path path = std::filesystem::path(__FILE__).parent_path() / script;
  REQUIRE_MESSAGE(std::filesystem::exists(path), "missing ", path.string());
  std::string command = python + " " + path.string() + " " + arguments + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::string output;
  char buffer[512];
  while (fgets(buffer, sizeof buffer, pipe)) output += buffer;
  int status = pclose(pipe);
  std::printf("%s", output.c_str());
  CHECK_MESSAGE(status == 0, output);
}

}  // namespace sf::testing

// Declares `python`, an interpreter that imports torch, or skips the test.
#define SF_NEED_TORCH(python)                                 \
  const std::string python = sf::testing::python_with_torch(); \
  if (python.empty()) SF_SKIP("no python3 imports torch: python3-torch could not be installed (make test installs it)")
