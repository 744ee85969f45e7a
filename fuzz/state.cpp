// What `train --set preload=...` reads beside the weights: the training state
// (CheckpointStore::load_state), then the optimizer state (Optimizer::load) of
// a tiny model, the one fuzz/make-seeds trains to make this target's seeds.
#include <filesystem>

#include <nlohmann/json.hpp>

#include "nn/transformer.h"
#include "optim/optimizer.h"
#include "targets.h"
#include "setup/checkpoints.h"

namespace sf::fuzz {

namespace {

// fuzz/make-seeds: the reverse task's vocabularies, --set d_model=8 N=1 h=2
// d_ff=16 seq_len=16.
nn::TransformerConfig seed_model() {
  nn::TransformerConfig c;
  c.src_vocab_size = c.tgt_vocab_size = 54;  // 50 words and the 4 special tokens
  c.src_seq_len = c.tgt_seq_len = 16;
  c.d_model = 8, c.N = 1, c.h = 2, c.d_ff = 16;
  return c;
}

// The optimizer-state part of `state`'s input.
void optimizer_state(std::string_view optimizer_file) {
  static Rng init(1);
  static std::unique_ptr<nn::Transformer> model = nn::build_transformer(seed_model(), init);
  optim::Adam optimizer(model->named_parameters(), 1e-3f);
  std::string path = scratch_file("t00.optim.safetensors", optimizer_file);
  optimizer.load(path);
  expect(std::to_string(optimizer.steps()) == safetensors::load_metadata(path).at("step"),
         "optimizer: the step count was read as another number");
  std::string copy = scratch_file("copy.optim.safetensors", "");
  optimizer.save(copy);
  optim::Adam reloaded(model->named_parameters(), 1e-3f);
  reloaded.load(copy);
  expect(reloaded.steps() == optimizer.steps(), "optimizer: saving and loading changed the step");
}

}  // namespace

void state(std::string_view input) {
  auto [state_json, optimizer_file] = split_at_nul(input);
  // The two loaders are independent: a rejected state still lets the optimizer
  // state be read. Their rejections are reported together, after both ran.
  std::string rejected;
  try {
    std::string path = scratch_file("t00.state.json", state_json);
    setup::CheckpointStore store(std::filesystem::path(path).parent_path().string(), "t", 0);
    setup::TrainingState s = store.load_state("00");
    // Accepted means usable for a resume, and nothing read as something else.
    expect(s.accum_pending >= 0 && s.accum_pending <= s.batch && s.batch <= s.batches_in_epoch,
           "state: inconsistent counters were accepted");
    expect(s.dropout_rng != Rng::State{}, "state: an all-zero RNG state was accepted");
    nlohmann::json file = nlohmann::json::parse(state_json), kept = s.to_json();
    for (const auto& [key, value] : kept.items())
      expect(file[key] == value, "state: a field was read as another value");
  } catch (const Error& e) {
    rejected = std::string("state: ") + e.what();
  }
  try {
    optimizer_state(optimizer_file);
  } catch (const Error& e) {
    rejected += (rejected.empty() ? "" : "; ") + std::string("optimizer: ") + e.what();
  }
  if (!rejected.empty()) throw Error(rejected);
}

}  // namespace sf::fuzz
