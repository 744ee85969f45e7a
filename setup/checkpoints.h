// Training checkpoints: for epoch e (counted from 00) three files in
// model_folder:
//   {basename}{e:02d}.safetensors        the model weights (nn/checkpoint.h)
//   {basename}{e:02d}.optim.safetensors  optimizer moments and step
//   {basename}{e:02d}.state.json         where training stands: epoch, global
//                                        step, batches done in the epoch, RNG,
//                                        and a digest of the other two files
// The best checkpoint by validation kBestMetric uses the tag "best" in place
// of the epoch number.
//
// Saving never puts the last complete checkpoint at risk, whatever moment a
// run is killed or the disk fills up (docs/checkpoints.md walks through it):
//  1. the three new files are written in full under ".new" names (each itself
//     through a temporary file, fsync and rename);
//  2. when the tag already holds a complete checkpoint (a resumed epoch saved
//     again, or "best"), its files get second names (hard links) under
//     ".prev", the state file last;
//  3. the new files are renamed over the real names, the state file last;
//  4. the ".prev" links go, the state file first.
// A checkpoint counts as complete only when its state file's digests match
// its weights and optimizer files, so a tag caught between steps 3 and 4
// never mixes files from two saves: its ".prev" copy is loaded instead.
#pragma once
#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "base/random.h"
#include "nn/transformer.h"
#include "optim/optimizer.h"

namespace sf::setup {

// The validation metric that picks the "best" checkpoint, higher being better,
// and the key under which state.json keeps its best value so far.
inline constexpr const char* kBestMetric = "bleu";
inline constexpr const char* kBestScoreKey = "best_bleu";

struct TrainingState {
  int64_t epoch = 0;             // the epoch this checkpoint was taken in
  int64_t global_step = 0;       // optimizer steps so far
  int64_t batch = 0;             // batches of `epoch` already trained
  int64_t batches_in_epoch = 0;  // == batch when the epoch is complete
  int64_t accum_pending = 0;     // batches accumulated since the last step
  Rng::State dropout_rng{};      // rank 0's (a single process's) dropout stream
  std::vector<Rng::State> rank_dropout_rngs;  // ranks 1, 2, ... of a data-parallel run
  double best_score = -1.0;      // the best validation kBestMetric so far (-1: none yet)

  bool epoch_complete() const { return batch >= batches_in_epoch; }
  nlohmann::json to_json() const;
  static TrainingState from_json(const nlohmann::json& j, const std::string& path);
};

// The paths of one checkpoint's three files.
struct CheckpointFiles {
  std::string weights, optimizer, state;
  // The paths beside a weights file "X.safetensors": X.optim.safetensors, X.state.json.
  static CheckpointFiles beside(const std::string& weights);
  // "" when all three exist and the state file's digests match the other two;
  // otherwise what is wrong, naming the file.
  std::string problem() const;
  bool complete() const { return problem().empty(); }
  TrainingState load_state() const;
};

class CheckpointStore {
 public:
  CheckpointStore(std::string folder, std::string basename, int64_t keep);

  static std::string epoch_tag(int64_t epoch);  // 3 -> "03"
  // variant "" is the checkpoint itself; ".new" a save in progress; ".prev"
  // the copy of a checkpoint being replaced.
  CheckpointFiles files(const std::string& tag, const std::string& variant = "") const;
  std::string weights_path(const std::string& tag) const { return files(tag).weights; }

  // `labels`: what the weights file records beside the architecture (the
  // tokenizers' digests, setup/model_identity.h).
  void save(const std::string& tag, const nn::Transformer& model, const safetensors::Metadata& labels,
            const optim::OptimizerState& optimizer, const TrainingState& state) const;
  // Deletes all but the newest `keep` epoch checkpoints (keep 0 = keep all).
  void prune() const;
  // Removes what a killed save left behind (".new" and ".tmp" files).
  void remove_unfinished() const;
  // The epochs after `epoch` that have a state file, oldest first.
  std::vector<int64_t> epochs_after(int64_t epoch) const;
  // Deletes the checkpoints of the epochs after `epoch`, and "best" when it
  // was taken after it; returns how many checkpoints went.
  int64_t remove_epochs_after(int64_t epoch) const;
  // Deletes every file of a checkpoint in the folder (any_checkpoint_file's);
  // returns how many.
  int64_t remove_all() const;
  // The complete checkpoint of a tag: its own files, else its ".prev" copy.
  std::optional<CheckpointFiles> complete(const std::string& tag) const;
  // The highest epoch with a state file (none when no epoch has one), and its
  // files: its own when complete, else its ".prev" copy when complete, else
  // its own, so that loading them says what is wrong. A damaged checkpoint is
  // an error, never silently passed over for an older epoch.
  std::optional<int64_t> latest_epoch() const;
  std::optional<CheckpointFiles> latest() const;
  // Whether `path` is this store's weights file of an epoch or of "best".
  bool is_checkpoint_name(const std::string& path) const;
  // Whether `path` is in the folder under the basename: a name this store
  // writes (any file of a checkpoint, saved or in progress) or would take
  // for a stray checkpoint.
  bool has_name_of_its_own(const std::string& path) const;
  // Some checkpoint file of this basename in the folder (weights, optimizer
  // or state), if there is any (complete or not).
  std::optional<std::string> any_checkpoint_file() const;
  TrainingState load_state(const std::string& tag) const;

 private:
  bool in_folder(const std::string& path) const;

  std::string folder_, basename_;
  int64_t keep_;
};

}  // namespace sf::setup
