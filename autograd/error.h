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

// A library exception's message without its "[json.exception.type_error.302] "
// style tag: what a user can read.
inline std::string plain_message(const std::exception& e) {
  std::string what = e.what();
  if (what.starts_with('[')) {
    size_t end = what.find("] ");
    if (end != std::string::npos) what.erase(0, end + 2);
  }
  return what;
}

}  // namespace sf
