#include "decode_place.h"

#include <bit>
#include <chrono>
#include <cstdio>

#include "autograd/kernels/thread_pool.h"

namespace sf::infer {

int size_class(int64_t sentences) { return std::bit_width(static_cast<uint64_t>(sentences)) - 1; }

Place faster_place(double model_seconds, double cpu_copy_seconds) {
  return cpu_copy_seconds < model_seconds ? Place::cpu_copy : Place::model;
}

double wall_seconds(Place, const std::function<void()>& run) {
  auto start = std::chrono::steady_clock::now();
  run();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void say_on_stderr(const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); }

namespace {

// Everything that sets a decoding step's cost.
std::string shape_of(const nn::TransformerConfig& c) {
  return "vocabularies " + std::to_string(c.src_vocab_size) + "/" + std::to_string(c.tgt_vocab_size) + ", seq_len " +
         std::to_string(c.src_seq_len) + "/" + std::to_string(c.tgt_seq_len) + ", d_model " +
         std::to_string(c.d_model) + ", N " + std::to_string(c.N) + ", h " + std::to_string(c.h) + ", d_ff " +
         std::to_string(c.d_ff) + ", " + nn::activation_name(c.activation) + (c.post_norm ? ", post-norm" : "") +
         (c.tie_embeddings ? ", tied" : "");
}

// "batches of 1 sentence", "batches of 4-7 sentences with a beam of 4".
std::string class_name(int size_class, int64_t beam) {
  int64_t smallest = int64_t{1} << size_class, largest = 2 * smallest - 1;
  std::string name = smallest == 1 ? "batches of 1 sentence"
                                   : "batches of " + std::to_string(smallest) + "-" + std::to_string(largest) +
                                         " sentences";
  return beam > 1 ? name + " with a beam of " + std::to_string(beam) : name;
}

std::string cpu_name() {
  int threads = kernels::num_threads();
  return "the CPU, " + std::to_string(threads) + (threads == 1 ? " thread" : " threads");
}

// "decoding: batches of 1 sentence on the CPU, 1 thread (6.70 ms a sentence
// there against 23.90 ms on opencl: ...)".
std::string choice_line(const std::string& batches, Place chosen, const Device& device, double model_seconds,
                        double cpu_copy_seconds, int64_t sentences) {
  auto ms_a_sentence = [&](double seconds) {
    char figure[32];
    std::snprintf(figure, sizeof figure, "%.2f ms", seconds * 1e3 / static_cast<double>(sentences));
    return std::string(figure);
  };
  bool cpu = chosen == Place::cpu_copy;
  std::string there = cpu ? cpu_name() : device.description(), other = cpu ? device.description() : cpu_name();
  return "decoding: " + batches + " on " + there + " (" + ms_a_sentence(cpu ? cpu_copy_seconds : model_seconds) +
         " a sentence there against " + ms_a_sentence(cpu ? model_seconds : cpu_copy_seconds) + " on " + other + ")";
}

// The model's parameters and buffers copied into `into`, a model of the same
// config (so the same names in the same order); a tied matrix once.
void copy_weights(const nn::Transformer& from, nn::Transformer& into) {
  for (auto list : {&nn::Module::named_parameters, &nn::Module::named_buffers}) {
    NamedTensors source = (from.*list)(), target = (into.*list)();
    for (size_t i = 0; i < source.size(); ++i) target[i].second.copy_from(source[i].second);
  }
}

}  // namespace

DecodePlaces::DecodePlaces(Timer timer, Say say) : timer_(std::move(timer)), say_(std::move(say)) {}

DecodePlaces& DecodePlaces::process() {
  // The CPU device is made first, so that it outlives the places (statics
  // end in the reverse order of their making): at exit their CPU copy of a
  // model hands its memory back to it. (A DecodeOptions made during static
  // initialisation asks for the places before anything else may have made
  // the device.)
  cpu();
  static DecodePlaces places;
  return places;
}

PlacedDecoder::PlacedDecoder(nn::Transformer& model, int64_t beam, DecodePlaces& places)
    : model_(model), beam_(beam), places_(places), number_(++places.decoders_) {}

Place PlacedDecoder::decode(int64_t sentences, const std::function<void(nn::Transformer&)>& decode) {
  if (model_.device().host_addressable()) {
    decode(model_);
    return Place::model;
  }
  DecodePlaces::ClassKey key{shape_of(model_.config()), beam_, size_class(sentences)};
  auto chosen = places_.chosen_.find(key);
  if (chosen == places_.chosen_.end()) return measure(key, sentences, decode);
  decode(model_at(chosen->second));
  return chosen->second;
}

// Each place decodes the batch twice and the second run is timed, so that
// first-use costs (OpenCL programs compiled, memory first allocated) do not
// decide the choice. The CPU copy runs last, so its result stands.
Place PlacedDecoder::measure(const DecodePlaces::ClassKey& key, int64_t sentences,
                             const std::function<void(nn::Transformer&)>& decode) {
  auto seconds_at = [&](Place place) {
    nn::Transformer& model = model_at(place);
    decode(model);
    return places_.timer_(place, [&] { decode(model); });
  };
  double model_seconds = seconds_at(Place::model), cpu_copy_seconds = seconds_at(Place::cpu_copy);
  Place chosen = faster_place(model_seconds, cpu_copy_seconds);
  places_.chosen_[key] = chosen;
  places_.say_(choice_line(class_name(key.size_class, key.beam), chosen, model_.device(), model_seconds,
                           cpu_copy_seconds, sentences));
  return Place::cpu_copy;
}

nn::Transformer& PlacedDecoder::model_at(Place place) { return place == Place::cpu_copy ? cpu_copy() : model_; }

// Built again only for a model of another shape than the last one's; its
// weights are taken from the model at each decoder's first use, as they
// change between decoders (training's validations).
nn::Transformer& PlacedDecoder::cpu_copy() {
  std::unique_ptr<nn::Transformer>& copy = places_.cpu_copy_;
  if (!copy || shape_of(copy->config()) != shape_of(model_.config())) {
    Rng unused_init(0);  // every weight is overwritten below
    copy = std::make_unique<nn::Transformer>(model_.config(), unused_init);
    places_.cpu_copy_weights_ = 0;
  }
  if (places_.cpu_copy_weights_ != number_) {
    copy_weights(model_, *copy);
    copy->train(model_.is_training());
    places_.cpu_copy_weights_ = number_;
  }
  return *copy;
}

}  // namespace sf::infer
