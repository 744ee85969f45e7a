// Decoding with the model on the OpenCL device (infer/decode_place.h): each
// size class of batches measured once, on the device and on a CPU copy, and
// its place said in one line; the tokens the CPU's wherever they were
// decoded; the place timed faster decoding the class from then on, the CPU
// copy with the model's weights of each call. Built only with OPENCL=1
// (suite "opencl").
#ifdef SF_OPENCL
#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <vector>

#include "autograd/kernels/thread_pool.h"
#include "infer/inference.h"
#include "opencl_helpers.h"
#include "reverser_model.h"

using namespace sf;
using namespace sf::infer;

namespace {

// Greedy decoding, batches of up to 4 sentences.
const DecodeOptions kGreedy{1, 0.6f, 24, 4};

// A copy of `model` on the OpenCL device.
std::unique_ptr<nn::Transformer> on_opencl(const nn::Transformer& model) {
  Rng init(0);
  auto copy = std::make_unique<nn::Transformer>(model.config(), init);
  copy->load_state_dict(model.state_dict(), "the model on the CPU");
  copy->to(device_named("opencl"));
  copy->eval();
  return copy;
}

// Counts the decoding steps `model` runs itself (calls of its first
// decoder layer's cross-attention) while it lives.
class StepCounter {
 public:
  explicit StepCounter(nn::Transformer& model) : block_(model.decoder.layers[0].cross_attention_block) {
    block_.weights_hook = [this](const Tensor&) { ++steps; };
  }
  ~StepCounter() { block_.weights_hook = nullptr; }
  StepCounter(const StepCounter&) = delete;
  StepCounter& operator=(const StepCounter&) = delete;
  int steps = 0;

 private:
  nn::MultiHeadAttentionBlock& block_;
};

// The reverser on the CPU and its copy on the OpenCL device, one sentence to
// translate, and places whose timer says the device model took
// `model_seconds` and the CPU copy `cpu_copy_seconds`, keeping what they say.
struct OneSentence {
  OneSentence(double model_seconds, double cpu_copy_seconds)
      : places(
            [=](Place place, const std::function<void()>& run) {
              run();
              return place == Place::model ? model_seconds : cpu_copy_seconds;
            },
            [this](const std::string& line) { said.push_back(line); }) {
    Rng rng(5);
    sentence = testing::random_sentences(rng, 1, 2, 6);
    options.places = &places;
  }
  std::vector<TokenIds> on_device() { return translate_ids(*device_model, sentence, options); }
  std::vector<TokenIds> on_cpu() { return translate_ids(*model, sentence, kGreedy); }

  std::unique_ptr<nn::Transformer> model = testing::trained_reverser(), device_model = on_opencl(*model);
  StepCounter device_steps{*device_model};
  std::vector<std::vector<int32_t>> sentence;
  std::vector<std::string> said;
  DecodePlaces places;
  DecodeOptions options = kGreedy;
};

}  // namespace

TEST_SUITE("opencl") {
  TEST_CASE("opencl decoding: translate_ids gives the CPU's tokens, each size class measured once and said in a line") {
    SF_NEED_OPENCL();
    auto model = testing::trained_reverser();
    auto device_model = on_opencl(*model);
    Rng rng(5);
    std::vector<std::vector<int32_t>> sources = testing::random_sentences(rng, 9, 2, 6);  // batches of 4, 4 and 1
    std::vector<std::string> said;
    DecodePlaces places(wall_seconds, [&](const std::string& line) { said.push_back(line); });
    for (int64_t beam : {1, 3}) {
      DecodeOptions options = kGreedy;
      options.beam = beam;
      std::vector<TokenIds> on_cpu = translate_ids(*model, sources, options);
      options.places = &places;
      for (int call = 0; call < 2; ++call) CHECK(translate_ids(*device_model, sources, options) == on_cpu);
    }
    REQUIRE(said.size() == 4);
    CHECK(said[0].starts_with("decoding: batches of 4-7 sentences on "));
    CHECK(said[1].starts_with("decoding: batches of 1 sentence on "));
    CHECK(said[2].starts_with("decoding: batches of 4-7 sentences with a beam of 3 on "));
    CHECK(said[3].starts_with("decoding: batches of 1 sentence with a beam of 3 on "));
    for (const std::string& line : said) {
      MESSAGE(line);
      CHECK(line.find(" ms a sentence there against ") != std::string::npos);
      CHECK(line.find(device_named("opencl").description()) != std::string::npos);
      CHECK(line.find("the CPU, ") != std::string::npos);
    }
  }

  TEST_CASE("opencl decoding: with the CPU copy timed faster, the device decodes no batch after the measuring runs, "
            "and the copy takes the model's weights at each call") {
    SF_NEED_OPENCL();
    OneSentence one(2.0, 1.0);
    std::vector<TokenIds> trained = one.on_cpu();
    CHECK(one.on_device() == trained);
    REQUIRE(one.said.size() == 1);
    CHECK(one.said[0] == "decoding: batches of 1 sentence on the CPU, " + std::to_string(kernels::num_threads()) +
                             (kernels::num_threads() == 1 ? " thread" : " threads") + " (1000.00 ms a sentence there against 2000.00 ms on " +
                             device_named("opencl").description() + ")");
    const int measuring = one.device_steps.steps;
    CHECK(measuring > 0);

    // New weights on the device, as a validation sees after training steps.
    auto untrained = testing::tiny_model(one.model->config(), 3);
    untrained->eval();
    one.device_model->load_state_dict(untrained->state_dict(), "an untrained model");
    std::vector<TokenIds> from_untrained = translate_ids(*untrained, one.sentence, kGreedy);
    CHECK(from_untrained != trained);
    CHECK(one.on_device() == from_untrained);
    CHECK(one.device_steps.steps == measuring);
    CHECK(one.said.size() == 1);
  }

  TEST_CASE("opencl decoding: with the device timed faster, the device decodes every batch after the measuring runs") {
    SF_NEED_OPENCL();
    OneSentence one(1.0, 2.0);
    CHECK(one.on_device() == one.on_cpu());
    REQUIRE(one.said.size() == 1);
    CHECK(one.said[0].starts_with("decoding: batches of 1 sentence on " + device_named("opencl").description() +
                                  " (1000.00 ms a sentence there against 2000.00 ms on the CPU, "));
    const int measuring = one.device_steps.steps;  // the measure's two runs
    CHECK(one.on_device() == one.on_cpu());
    CHECK(one.device_steps.steps == measuring + measuring / 2);
  }
}

#endif  // SF_OPENCL
