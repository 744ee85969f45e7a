#include "checkpoints.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "autograd/error.h"
#include "nn/checkpoint.h"

namespace sf::train {

namespace fs = std::filesystem;
using nlohmann::json;

nlohmann::json TrainingState::to_json() const {
  json rng = json::array();
  for (uint64_t word : dropout_rng) rng.push_back(word);
  return {{"epoch", epoch},       {"global_step", global_step},     {"batch", batch},
          {"batches_in_epoch", batches_in_epoch}, {"accum_pending", accum_pending},
          {"dropout_rng", rng},   {"best_bleu", best_bleu}};
}

TrainingState TrainingState::from_json(const json& j, const std::string& path) {
  if (!j.is_object()) fail(path, ": not a training state file (expected a JSON object)");
  auto field = [&](const char* key) -> const json& {
    if (!j.contains(key)) fail(path, ": training state has no field '", key, "'");
    return j[key];
  };
  auto bad = [&](const char* key, const auto&... what) {
    std::string got = field(key).dump();
    if (got.size() > 40) got = got.substr(0, 37) + "...";
    fail(path, ": training state field '", key, "' ", what..., ", got ", got);
  };
  // Counters are JSON integers >= 0: not 2.5 (read as 2), not "5", not 2^64 - 1 (read as -1).
  auto count = [&](const char* key) {
    const json& v = field(key);
    if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > INT64_MAX) ||
        v.get<int64_t>() < 0)
      bad(key, "must be an integer >= 0");
    return v.get<int64_t>();
  };
  TrainingState s;
  s.epoch = count("epoch");
  s.global_step = count("global_step");
  s.batch = count("batch");
  s.batches_in_epoch = count("batches_in_epoch");
  s.accum_pending = count("accum_pending");
  if (s.batch > s.batches_in_epoch) bad("batch", "must be <= batches_in_epoch (", s.batches_in_epoch, ")");
  // Accumulated batches belong to this epoch, and its last batch always steps.
  if (s.accum_pending > s.batch) bad("accum_pending", "must be <= batch (", s.batch, ")");
  if (s.epoch_complete() && s.accum_pending != 0) bad("accum_pending", "must be 0 when the epoch is complete");
  const json& bleu = field("best_bleu");
  if (!bleu.is_number() || !(bleu.get<double>() == -1.0 || (bleu.get<double>() >= 0 && bleu.get<double>() <= 100)))
    bad("best_bleu", "must be -1 (none yet) or a BLEU score in [0, 100]");
  s.best_bleu = bleu.get<double>();
  const json& rng = field("dropout_rng");
  if (!rng.is_array() || rng.size() != s.dropout_rng.size() ||
      !std::all_of(rng.begin(), rng.end(), [](const json& w) { return w.is_number_unsigned(); }))
    bad("dropout_rng", "must be ", s.dropout_rng.size(), " unsigned 64-bit integers");
  for (size_t i = 0; i < s.dropout_rng.size(); ++i) s.dropout_rng[i] = rng[i].get<uint64_t>();
  // xoshiro's state is never all zero: from there it would only yield zeros.
  if (s.dropout_rng == Rng::State{}) bad("dropout_rng", "must not be all zero");
  return s;
}

void write_file_atomically(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out) fail(path, ": cannot write");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    fail(path, ": cannot rename the temporary file into place");
  }
}

CheckpointStore::CheckpointStore(std::string folder, std::string basename, int64_t keep)
    : folder_(std::move(folder)), basename_(std::move(basename)), keep_(keep) {}

std::string CheckpointStore::epoch_tag(int64_t epoch) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%02lld", static_cast<long long>(epoch));
  return buffer;
}

std::string CheckpointStore::weights_path(const std::string& tag) const {
  return (fs::path(folder_) / (basename_ + tag + ".safetensors")).string();
}
std::string CheckpointStore::optimizer_path(const std::string& tag) const {
  return (fs::path(folder_) / (basename_ + tag + ".optim.safetensors")).string();
}
std::string CheckpointStore::state_path(const std::string& tag) const {
  return (fs::path(folder_) / (basename_ + tag + ".state.json")).string();
}

void CheckpointStore::save(const std::string& tag, const nn::Transformer& model,
                           const optim::Optimizer& optimizer, const TrainingState& state) const {
  fs::create_directories(folder_);
  // Until the new state file lands, this tag counts as incomplete.
  fs::remove(state_path(tag));
  nn::save_checkpoint(model, weights_path(tag));
  optimizer.save(optimizer_path(tag));
  write_file_atomically(state_path(tag), state.to_json().dump(1) + "\n");
}

// Epoch numbers of every complete epoch checkpoint in the folder.
static std::set<int64_t> complete_epochs(const std::string& folder, const std::string& basename) {
  std::set<int64_t> epochs;
  std::error_code ec;
  if (!fs::is_directory(folder, ec)) return epochs;
  const std::string suffix = ".state.json";
  for (const auto& entry : fs::directory_iterator(folder, ec)) {
    std::string name = entry.path().filename().string();
    if (name.size() <= basename.size() + suffix.size() || name.rfind(basename, 0) != 0 ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    std::string tag = name.substr(basename.size(), name.size() - basename.size() - suffix.size());
    if (tag.empty() || tag.find_first_not_of("0123456789") != std::string::npos) continue;
    fs::path base = fs::path(folder) / (basename + tag);
    if (fs::exists(base.string() + ".safetensors") && fs::exists(base.string() + ".optim.safetensors"))
      epochs.insert(std::stoll(tag));
  }
  return epochs;
}

std::optional<int64_t> CheckpointStore::latest_epoch() const {
  std::set<int64_t> epochs = complete_epochs(folder_, basename_);
  if (epochs.empty()) return std::nullopt;
  return *epochs.rbegin();
}

void CheckpointStore::prune() const {
  if (keep_ == 0) return;
  std::set<int64_t> epochs = complete_epochs(folder_, basename_);
  int64_t excess = static_cast<int64_t>(epochs.size()) - keep_;
  for (auto it = epochs.begin(); excess > 0; ++it, --excess) {
    std::string tag = epoch_tag(*it);
    // The state file first: a half-deleted checkpoint is never "complete".
    fs::remove(state_path(tag));
    fs::remove(weights_path(tag));
    fs::remove(optimizer_path(tag));
  }
}

TrainingState CheckpointStore::load_state(const std::string& tag) const {
  std::string path = state_path(tag);
  std::ifstream in(path);
  if (!in) fail(path, ": cannot open the training state");
  json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) fail(path, ": malformed JSON");
  return TrainingState::from_json(j, path);
}

}  // namespace sf::train
