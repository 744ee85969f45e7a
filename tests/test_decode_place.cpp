// The choice of where a batch decodes (infer/decode_place.h): its rule, and
// a model on the CPU decoding as it always did. The choice itself, made
// between an OpenCL device and the CPU, is tested in test_opencl_decoding.cpp.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "infer/decode_place.h"
#include "test_nn_helpers.h"

using namespace sf;
using namespace sf::infer;

TEST_CASE("decode place: the size classes are the powers of two") {
  CHECK(size_class(1) == 0);
  CHECK(size_class(2) == 1);
  CHECK(size_class(3) == 1);
  CHECK(size_class(4) == 2);
  CHECK(size_class(7) == 2);
  CHECK(size_class(8) == 3);
  CHECK(size_class(32) == 5);
  CHECK(size_class(63) == 5);
}

TEST_CASE("decode place: the faster place decodes, the model itself on a tie") {
  CHECK(faster_place(23.9e-3, 6.7e-3) == Place::cpu_copy);
  CHECK(faster_place(6.7e-3, 23.9e-3) == Place::model);
  CHECK(faster_place(5e-3, 5e-3) == Place::model);
}

TEST_CASE("decode place: a model on the CPU decodes each batch itself, once, with nothing measured or said") {
  auto model = testing::tiny_model();
  int timed = 0;
  std::vector<std::string> said;
  DecodePlaces places(
      [&](Place, const std::function<void()>& run) {
        run();
        ++timed;
        return 1.0;
      },
      [&](const std::string& line) { said.push_back(line); });
  PlacedDecoder decoder(*model, 1, places);
  for (int64_t sentences : {1, 1, 5}) {
    std::vector<const nn::Transformer*> decoded_with;
    CHECK(decoder.decode(sentences, [&](nn::Transformer& m) { decoded_with.push_back(&m); }) == Place::model);
    CHECK(decoded_with == std::vector<const nn::Transformer*>{model.get()});
  }
  CHECK(timed == 0);
  CHECK(said.empty());
}
