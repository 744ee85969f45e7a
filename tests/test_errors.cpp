// The two kinds of failure (base/error.h): bad input is an sf::Error and
// the command exits 2; a broken invariant is an sf::InternalError and exits 1.
#include <doctest/doctest.h>

#include <fstream>
#include <stdexcept>
#include <string>

#include "autograd/ops.h"
#include "base/error.h"
#include "data/corpus.h"
#include "nn/layers.h"
#include "test_nn_helpers.h"

using namespace sf;

namespace {

// Which of the two handlers catches what `f` throws.
template <class F>
const char* kind_of_failure(F f) {
  try {
    f();
  } catch (const Error&) {
    return "bad input";
  } catch (const InternalError&) {
    return "internal";
  }
  return "none";
}

}  // namespace

TEST_CASE("errors: an op's shape mismatch is internal, not bad input") {
  Tensor a = Tensor::ones({2, 3}), b = Tensor::ones({4, 5});
  CHECK(kind_of_failure([&] { matmul(a, b); }) == std::string("internal"));
  CHECK(kind_of_failure([&] { (void)(a + Tensor::ones({4})); }) == std::string("internal"));
  // A layer called with the wrong feature count fails inside its op.
  Rng init(1);
  nn::Linear linear(3, 2, init);
  CHECK_THROWS_WITH_AS(linear.forward(Tensor::ones({2, 4})), doctest::Contains("matmul: shapes"), InternalError);
}

TEST_CASE("errors: a file the user gave is bad input") {
  testing::TempDir dir;
  std::string path = dir.file("corpus.tsv");
  std::ofstream(path) << "no tab here\n";
  CHECK(kind_of_failure([&] { data::read_tsv(path); }) == std::string("bad input"));
}

TEST_CASE("errors: the command exits 2 for bad input and 1 for a bug") {
  CHECK(exit_status(Error("corpus.tsv:1: no TAB")) == 2);
  CHECK(exit_status(InternalError("matmul: shapes [2, 3] and [4, 5] do not multiply")) == 1);
  // Anything else that escapes (a library's exception) is a bug too.
  CHECK(exit_status(std::out_of_range("map::at")) == 1);
  // A subclass of Error (the command's usage errors) is bad input.
  struct UsageError : Error {
    using Error::Error;
  };
  CHECK(exit_status(UsageError("unknown option --x")) == 2);
}
