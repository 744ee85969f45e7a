// Training checkpoints (SPEC §5): for epoch e (counted from 00, as the seed
// does) three files in model_folder:
//   {basename}{e:02d}.safetensors        the model weights (nn/checkpoint.h)
//   {basename}{e:02d}.optim.safetensors  optimizer moments and step
//   {basename}{e:02d}.state.json         where training stands: epoch, global
//                                        step, batches done in the epoch, RNG
// Each file is written to a temporary name and renamed; the state file is
// removed first and written last, so an epoch whose state file exists has all
// three complete, and a run killed at any moment leaves the last complete
// checkpoint intact. The best checkpoint by validation BLEU uses the tag
// "best" in place of the epoch number.
#pragma once
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "autograd/random.h"
#include "nn/transformer.h"
#include "optim/optimizer.h"

namespace sf::train {

struct TrainingState {
  int64_t epoch = 0;             // the epoch this checkpoint was taken in
  int64_t global_step = 0;       // optimizer steps so far
  int64_t batch = 0;             // batches of `epoch` already trained
  int64_t batches_in_epoch = 0;  // == batch when the epoch is complete
  int64_t accum_pending = 0;     // batches accumulated since the last step
  Rng::State dropout_rng{};
  double best_bleu = -1.0;       // the best validation BLEU so far

  bool epoch_complete() const { return batch >= batches_in_epoch; }
  nlohmann::json to_json() const;
  static TrainingState from_json(const nlohmann::json& j, const std::string& path);
};

class CheckpointStore {
 public:
  CheckpointStore(std::string folder, std::string basename, int64_t keep);

  std::string weights_path(const std::string& tag) const;
  std::string optimizer_path(const std::string& tag) const;
  std::string state_path(const std::string& tag) const;
  static std::string epoch_tag(int64_t epoch);  // 3 -> "03"

  void save(const std::string& tag, const nn::Transformer& model, const optim::Optimizer& optimizer,
            const TrainingState& state) const;
  // Deletes all but the newest `keep` epoch checkpoints (keep 0 = keep all).
  void prune() const;
  // The highest epoch whose three files are complete.
  std::optional<int64_t> latest_epoch() const;
  TrainingState load_state(const std::string& tag) const;

 private:
  std::string folder_, basename_;
  int64_t keep_;
};

// Writes `text` to `path` through a temporary file and a rename.
void write_file_atomically(const std::string& path, const std::string& text);

}  // namespace sf::train
