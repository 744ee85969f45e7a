// Errors the library reports to its user: bad shapes, bad indices, bad use.
// One type so the command line can turn any of them into a one-line message.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace sf {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Builds the message from its pieces: fail("matmul: ", a, " vs ", b).
template <class... Parts>
[[noreturn]] void fail(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  throw Error(out.str());
}

}  // namespace sf
