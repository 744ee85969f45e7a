// Fuzz targets: one entry function per kind of file the command reads. Each
// takes the raw bytes of one input, hands them to the real loader (through a
// scratch file: the loaders read paths) and returns normally when the loader
// either accepts the input or rejects it with sf::Error, the one-line message
// the command prints. Anything else escapes and is a finding: a crash, a
// sanitizer report, another exception (the command's "internal error"), or a
// PropertyViolation when an accepted input gives inconsistent results.
//
// libFuzzer's driver (libfuzzer_main.cpp) and the regression test
// (tests/test_fuzz_regressions.cpp) call these same functions.
#pragma once
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include "base/error.h"

namespace sf::fuzz {

// The JSON config, then NUL-separated `--set key=value` overrides.
void config(std::string_view input);
// A tokenizer JSON file.
void tokenizer(std::string_view input);
// A model checkpoint (safetensors with the model's metadata).
void checkpoint(std::string_view input);
// A training-state JSON file, a NUL, then an optimizer-state safetensors file.
void state(std::string_view input);
// A parallel corpus, read both as TSV and as JSONL.
void corpus(std::string_view input);

struct Target {
  const char* name;  // also the folder of its seeds and regressions
  void (*run)(std::string_view input);
};
inline constexpr Target kTargets[] = {{"config", config},
                                      {"tokenizer", tokenizer},
                                      {"checkpoint", checkpoint},
                                      {"state", state},
                                      {"corpus", corpus}};

// Runs one input: a rejection (sf::Error) is the loader doing its job.
inline void run(const Target& target, std::string_view input) {
  try {
    target.run(input);
  } catch (const Error&) {
  }
}

// An accepted input whose result breaks a rule the loader promises.
class PropertyViolation : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};
inline void expect(bool holds, const char* rule) {
  if (!holds) throw PropertyViolation(rule);
}

// Writes `bytes` to this process's scratch file `name` (in a folder of its
// own in /dev/shm or TMPDIR, removed at exit) and returns its path.
std::string scratch_file(const std::string& name, std::string_view bytes);

// The text before the first NUL and the text after it (empty without a NUL).
std::pair<std::string_view, std::string_view> split_at_nul(std::string_view input);

}  // namespace sf::fuzz
