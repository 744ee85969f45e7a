// Where the programs of the build this suite belongs to lie. The Makefile
// passes that folder (build/, build/opencl/, ...) as SF_BUILD_DIR, and only
// build_dir.cpp reads it: every other test file then compiles the same in
// each variant, and the OpenCL variant links the plain build's objects.
#pragma once
#include <string>

namespace sf::testing {

// The absolute path of `relative` in the build folder, e.g. "scratchformer".
std::string build_path(const std::string& relative);

// The command this build made.
inline std::string scratchformer_binary() { return build_path("scratchformer"); }

}  // namespace sf::testing
