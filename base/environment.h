// The environment variables the library reads: one table of them
// (environment.cpp), the only place that asks the environment, so that every
// setting outside a config is found, and documented, in one place
// (docs/10-formats.md, "Environment variables", lists the same rows: a test
// holds the two together, and make test checks that no other file of the
// library reads the environment).
//
// The table holds the variables of two kinds: our own SCRATCHFORMER_* ones,
// the settings that must hold before a config exists or where no config is
// (environment.cpp says why each is one), and those others set that the
// library looks at (where the system keeps caches, which MPI launcher started
// the process). What a value means, and whether it is valid, is decided where
// it is used; here a value is only read.
#pragma once
#include <span>
#include <string_view>

namespace sf::environment {

struct Variable {
  const char* name;
  const char* unset;    // what the library does when it is not set
  const char* meaning;  // what a value does, in a line
};

// Every row, ours first, each group in the order of its names.
std::span<const Variable> variables();

// The value of the variable `name` (a row of the table, or an internal
// error), or nullptr when it is not set. Read anew at each call: a test may
// change it in between.
const char* value(std::string_view name);

}  // namespace sf::environment
