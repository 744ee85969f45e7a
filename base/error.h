// The two kinds of failure, told apart by who can fix them.
//
// sf::Error, thrown by fail(): bad input. Anything a user of the command can
// cause through its files, config, arguments or standard input, or through the
// machine it runs on (a full disk, no OpenCL device): a corpus line without a
// TAB, a tokenizer file that is not JSON, a config key out of range. The
// message names the file, line or key to fix; the command exits 2.
//
// sf::InternalError, thrown by internal_fail(): a broken invariant of the
// library or a misuse of its C++ API, which only a bug in the program can
// cause: a shape mismatch inside an op, an index out of range, an impossible
// state. The command exits 1. It is a std::logic_error ("errors that are a
// consequence of faulty logic within the program", cppreference), deliberately
// not an sf::Error, so that no handler for bad input can swallow it.
//
// When in doubt: if the condition is checked on input that the command reads,
// validate it where it is read (with fail and the file's name), and let the op
// underneath treat a violation as internal.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace sf {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class InternalError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

namespace detail {
template <class... Parts>
std::string concat_message(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}
}  // namespace detail

// Bad input; builds the message from its pieces: fail(path, ": line ", n, ": no TAB").
// fail_as<E>(...) throws E, a kind of Error that its handler tells apart.
template <class E, class... Parts>
[[noreturn]] void fail_as(const Parts&... parts) {
  throw E(detail::concat_message(parts...));
}
template <class... Parts>
[[noreturn]] void fail(const Parts&... parts) {
  fail_as<Error>(parts...);
}

// A bug: internal_fail("matmul: shapes ", a, " and ", b, " do not match").
template <class... Parts>
[[noreturn]] void internal_fail(const Parts&... parts) {
  throw InternalError(detail::concat_message(parts...));
}

// Throws an exception of the same kind as `e` (bad input stays bad input,
// anything else is a bug) with the message built from `parts`: for a handler
// that adds what it knows, e.g. what was saved before the failure.
template <class... Parts>
[[noreturn]] void rethrow_as(const std::exception& e, const Parts&... parts) {
  if (dynamic_cast<const Error*>(&e)) fail(parts...);
  internal_fail(parts...);
}

// The command's exit status for the exception that ends it (cli/main.cpp):
// 2 for bad input, 1 for anything else, which is a bug.
inline int exit_status(const std::exception& e) { return dynamic_cast<const Error*>(&e) ? 2 : 1; }

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
