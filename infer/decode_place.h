// Where a batch of sentences is decoded when the model lives on a device the
// host cannot address (a GPU through OpenCL). Decoding runs token by token,
// each token a few dozen small launches and a read back to the host, so a
// small batch leaves a GPU waiting on the host and one CPU core can be faster
// (docs/11-devices.md); a large batch keeps the GPU busy. Which one wins depends
// on the machine, the model and the batch, so it is measured: the first batch
// of a size class is decoded on both, and the faster place decodes that class
// from then on in this process. The CPU decodes with a copy of the model
// whose weights are taken from the device model once per PlacedDecoder.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "nn/transformer.h"

namespace sf::infer {

// Where a batch was decoded: by the model itself, on its device, or by its
// copy on the CPU.
enum class Place { model, cpu_copy };

// A batch's size class: 0 for 1 sentence, 1 for 2-3, 2 for 4-7, ... (the
// powers of two), as a batch's time grows more slowly than its size.
int size_class(int64_t sentences);

// The place that decoded a batch in less time; the model on a tie, as it
// needs no copy of the weights.
Place faster_place(double model_seconds, double cpu_copy_seconds);

// The seconds `run` takes on the wall clock, wherever it runs (decoding ends
// reading its tokens, so a device has finished by then too).
double wall_seconds(Place place, const std::function<void()>& run);
void say_on_stderr(const std::string& line);

// What the process learnt: the place chosen for each size class of each
// model shape and beam width, and the CPU copy of the last model decoded
// there, with the decoder whose weights it holds.
class DecodePlaces {
 public:
  // Seconds that `run` takes at `place`: the wall clock's, or a test's own.
  using Timer = std::function<double(Place place, const std::function<void()>& run)>;
  // Where each choice is said, one line a class: stderr's, or a test's own.
  using Say = std::function<void(const std::string& line)>;

  explicit DecodePlaces(Timer timer = wall_seconds, Say say = say_on_stderr);
  // The process's: translate_ids decodes with it unless told otherwise.
  static DecodePlaces& process();

 private:
  friend class PlacedDecoder;

  struct ClassKey {
    std::string model_shape;
    int64_t beam;
    int size_class;
    // (Not a defaulted <=>: libc++ before 16 gives std::string no <=>.)
    bool operator<(const ClassKey& o) const {
      return std::tie(model_shape, beam, size_class) < std::tie(o.model_shape, o.beam, o.size_class);
    }
  };

  Timer timer_;
  Say say_;
  std::map<ClassKey, Place> chosen_;
  std::unique_ptr<nn::Transformer> cpu_copy_;
  uint64_t decoders_ = 0;         // PlacedDecoders made, to number them
  uint64_t cpu_copy_weights_ = 0;  // the number of the decoder whose weights the copy holds
};

// Decodes the batches of one model with fixed weights (one translate_ids
// call), each batch at the place chosen for its size class. With a model on
// the CPU it simply decodes with the model.
class PlacedDecoder {
 public:
  PlacedDecoder(nn::Transformer& model, int64_t beam, DecodePlaces& places = DecodePlaces::process());

  // Calls decode(model) or decode(the CPU copy) for a batch of `sentences`,
  // or, for the first batch of its class, both (see measure): what the last
  // call wrote stands, as the places' results agree to rounding. Returns the
  // place of the last call.
  Place decode(int64_t sentences, const std::function<void(nn::Transformer&)>& decode);

 private:
  Place measure(const DecodePlaces::ClassKey& key, int64_t sentences,
                const std::function<void(nn::Transformer&)>& decode);
  nn::Transformer& model_at(Place place);
  nn::Transformer& cpu_copy();

  nn::Transformer& model_;
  int64_t beam_;
  DecodePlaces& places_;
  uint64_t number_;  // among the process's decoders, see DecodePlaces::cpu_copy_weights_
};

}  // namespace sf::infer
