#include "checkpoints.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "base/atomic_file.h"
#include "base/digest.h"
#include "base/error.h"
#include "base/file_steps.h"
#include "nn/checkpoint.h"

namespace sf::setup {

namespace fs = std::filesystem;
using nlohmann::json;

nlohmann::json TrainingState::to_json() const {
  json j = {{"epoch", epoch},       {"global_step", global_step},     {"batch", batch},
            {"batches_in_epoch", batches_in_epoch}, {"accum_pending", accum_pending},
            {"dropout_rng", dropout_rng}, {kBestScoreKey, best_score}};
  if (!rank_dropout_rngs.empty()) j["rank_dropout_rngs"] = rank_dropout_rngs;
  return j;
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
  const json& bleu = field(kBestScoreKey);
  if (!bleu.is_number() || !(bleu.get<double>() == -1.0 || (bleu.get<double>() >= 0 && bleu.get<double>() <= 100)))
    bad(kBestScoreKey, "must be -1 (none yet) or a BLEU score in [0, 100]");
  s.best_score = bleu.get<double>();
  auto rng_state = [&](const json& rng, const char* key) {
    Rng::State state{};
    if (!rng.is_array() || rng.size() != state.size() ||
        !std::all_of(rng.begin(), rng.end(), [](const json& w) { return w.is_number_unsigned(); }))
      bad(key, "must be ", state.size(), " unsigned 64-bit integers");
    for (size_t i = 0; i < state.size(); ++i) state[i] = rng[i].get<uint64_t>();
    // xoshiro's state is never all zero: from there it would only yield zeros.
    if (state == Rng::State{}) bad(key, "must not be all zero");
    return state;
  };
  s.dropout_rng = rng_state(field("dropout_rng"), "dropout_rng");
  if (j.contains("rank_dropout_rngs")) {
    const json& rngs = j["rank_dropout_rngs"];
    if (!rngs.is_array()) bad("rank_dropout_rngs", "must be an array (one stream per rank after rank 0)");
    for (const json& rng : rngs) s.rank_dropout_rngs.push_back(rng_state(rng, "rank_dropout_rngs"));
  }
  return s;
}

// A file's digest: its words, then its length. It tells files of two
// different saves apart.
static std::string file_digest(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, ": cannot read");
  Digest digest;
  uint64_t length = 0;
  std::vector<char> buffer(1 << 20);  // a multiple of 8: only the file's last bytes go one by one
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    size_t n = static_cast<size_t>(in.gcount());
    digest.add_words(buffer.data(), n);
    length += n;
  }
  digest.add_value(length);
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(digest.value()));
  return text;
}

static std::optional<json> read_json(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return std::nullopt;
  std::ifstream in(path);
  if (!in) return std::nullopt;
  json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

CheckpointFiles CheckpointFiles::beside(const std::string& weights) {
  std::string base = weights;
  const std::string suffix = ".safetensors";
  if (base.size() > suffix.size() && base.ends_with(suffix)) base.resize(base.size() - suffix.size());
  return {weights, base + ".optim.safetensors", base + ".state.json"};
}

std::string CheckpointFiles::problem() const {
  std::error_code ec;
  for (const std::string* file : {&weights, &optimizer, &state})
    if (!fs::is_regular_file(*file, ec)) return *file + ": missing, so the checkpoint is incomplete";
  std::optional<json> j = read_json(state);
  if (!j || !j->is_object()) return state + ": not a training state file (malformed JSON)";
  // A state file from before digests were recorded vouches for what is beside it.
  if (!j->contains("files")) return "";
  const json& digests = (*j)["files"];
  if (!digests.is_object()) return state + ": 'files' is not an object";
  for (auto [key, file] : {std::pair{"weights", &weights}, std::pair{"optimizer", &optimizer}})
    if (digests.value(key, "") != file_digest(*file))
      return *file + ": changed since it was saved (it does not match the digest in " + state + ")";
  return "";
}

TrainingState CheckpointFiles::load_state() const {
  std::error_code ec;
  if (fs::is_directory(state, ec)) fail(state, ": is a folder, not a training state file");
  std::ifstream in(state);
  if (!in) fail(state, ": cannot open the training state");
  json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) fail(state, ": malformed JSON");
  return TrainingState::from_json(j, state);
}

CheckpointStore::CheckpointStore(std::string folder, std::string basename, int64_t keep)
    : folder_(std::move(folder)), basename_(std::move(basename)), keep_(keep) {}

std::string CheckpointStore::epoch_tag(int64_t epoch) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%02lld", static_cast<long long>(epoch));
  return buffer;
}

CheckpointFiles CheckpointStore::files(const std::string& tag, const std::string& variant) const {
  std::string base = (fs::path(folder_) / (basename_ + tag + variant)).string();
  return {base + ".safetensors", base + ".optim.safetensors", base + ".state.json"};
}

static void remove_files(const CheckpointFiles& f) {
  for (const std::string& path : {f.state, f.weights, f.optimizer}) file_steps::unlink(path);
}

void CheckpointStore::save(const std::string& tag, const nn::Transformer& model, const safetensors::Metadata& labels,
                           const optim::OptimizerState& optimizer, const TrainingState& state) const {
  make_folders_or_fail(folder_);
  const CheckpointFiles next = files(tag, ".new"), live = files(tag), prev = files(tag, ".prev");
  try {
    nn::save_checkpoint(model, next.weights, DType::F32, labels);
    optimizer.write(next.optimizer);
    json j = state.to_json();
    j["files"] = {{"weights", file_digest(next.weights)}, {"optimizer", file_digest(next.optimizer)}};
    write_file_atomically(next.state, j.dump(1) + "\n");
  } catch (...) {  // a full disk: no half-written save stays behind
    remove_files(next);
    throw;
  }

  const auto state_file_last = {&CheckpointFiles::weights, &CheckpointFiles::optimizer, &CheckpointFiles::state};
  if (live.complete()) {
    remove_files(prev);
    for (auto member : state_file_last)
      if (file_steps::link(live.*member, prev.*member) != 0)
        fail(prev.*member, ": cannot keep a copy of the checkpoint being replaced (", std::strerror(errno), ")");
  }
  for (auto member : state_file_last)
    if (file_steps::rename(next.*member, live.*member) != 0)
      fail(live.*member, ": cannot rename ", next.*member, " into place (", std::strerror(errno), ")");
  sync_folder_of(live.state);
  remove_files(prev);
}

// Epoch numbers that have a state file, their own or a ".prev" copy.
static std::set<int64_t> epochs_with_state(const std::string& folder, const std::string& basename) {
  std::set<int64_t> epochs;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(folder, ec)) {
    std::string name = entry.path().filename().string();
    for (std::string suffix : {".state.json", ".prev.state.json"}) {
      if (name.size() <= basename.size() + suffix.size() || !name.starts_with(basename) || !name.ends_with(suffix))
        continue;
      std::string tag = name.substr(basename.size(), name.size() - basename.size() - suffix.size());
      if (!tag.empty() && tag.size() <= 9 && tag.find_first_not_of("0123456789") == std::string::npos)
        epochs.insert(std::stoll(tag));
    }
  }
  return epochs;
}

std::optional<CheckpointFiles> CheckpointStore::complete(const std::string& tag) const {
  for (const char* variant : {"", ".prev"})
    if (CheckpointFiles f = files(tag, variant); f.complete()) return f;
  return std::nullopt;
}

std::optional<int64_t> CheckpointStore::latest_epoch() const {
  std::set<int64_t> epochs = epochs_with_state(folder_, basename_);
  if (epochs.empty()) return std::nullopt;
  return *epochs.rbegin();
}

std::optional<CheckpointFiles> CheckpointStore::latest() const {
  std::optional<int64_t> epoch = latest_epoch();
  if (!epoch) return std::nullopt;
  std::string tag = epoch_tag(*epoch);
  return complete(tag).value_or(files(tag));
}

bool CheckpointStore::in_folder(const std::string& path) const {
  std::error_code ec;
  return fs::equivalent(fs::path(path).parent_path().empty() ? "." : fs::path(path).parent_path(), folder_, ec);
}

bool CheckpointStore::is_checkpoint_name(const std::string& path) const {
  if (!in_folder(path)) return false;
  std::string name = fs::path(path).filename().string();
  const std::string suffix = ".safetensors";
  if (name.size() <= basename_.size() + suffix.size() || !name.starts_with(basename_) || !name.ends_with(suffix))
    return false;
  std::string tag = name.substr(basename_.size(), name.size() - basename_.size() - suffix.size());
  return tag == "best" || tag.find_first_not_of("0123456789") == std::string::npos;
}

bool CheckpointStore::has_name_of_its_own(const std::string& path) const {
  return in_folder(path) && fs::path(path).filename().string().starts_with(basename_);
}

std::optional<std::string> CheckpointStore::any_checkpoint_file() const {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(folder_, ec)) {
    std::string name = entry.path().filename().string();
    if (name.starts_with(basename_) &&
        (name.find(".safetensors") != std::string::npos || name.find(".state.json") != std::string::npos))
      return entry.path().string();
  }
  return std::nullopt;
}

void CheckpointStore::prune() const {
  if (keep_ == 0) return;
  std::set<int64_t> epochs;
  for (int64_t epoch : epochs_with_state(folder_, basename_))
    if (complete(epoch_tag(epoch))) epochs.insert(epoch);
  int64_t excess = static_cast<int64_t>(epochs.size()) - keep_;
  for (auto it = epochs.begin(); excess > 0; ++it, --excess)
    for (const char* variant : {"", ".prev", ".new"}) remove_files(files(epoch_tag(*it), variant));
}

std::vector<int64_t> CheckpointStore::epochs_after(int64_t epoch) const {
  std::set<int64_t> all = epochs_with_state(folder_, basename_);
  return {all.upper_bound(epoch), all.end()};
}

int64_t CheckpointStore::remove_epochs_after(int64_t epoch) const {
  std::vector<std::string> tags;
  for (int64_t later : epochs_after(epoch)) tags.push_back(epoch_tag(later));
  if (std::optional<CheckpointFiles> best = complete("best"); best && best->load_state().epoch > epoch)
    tags.push_back("best");
  for (const std::string& tag : tags)
    for (const char* variant : {"", ".prev", ".new"}) remove_files(files(tag, variant));
  return std::ssize(tags);
}

int64_t CheckpointStore::remove_all() const {
  int64_t removed = 0;
  while (std::optional<std::string> file = any_checkpoint_file()) {
    if (file_steps::unlink(*file) != 0) fail(*file, ": cannot delete (", std::strerror(errno), ")");
    ++removed;
  }
  return removed;
}

void CheckpointStore::remove_unfinished() const {
  std::error_code ec;
  std::vector<fs::path> leftovers;
  std::set<std::string> copied_tags;
  for (const auto& entry : fs::directory_iterator(folder_, ec)) {
    std::string name = entry.path().filename().string();
    if (!name.starts_with(basename_)) continue;
    if (name.ends_with(".tmp") || name.find(".new.") != std::string::npos) leftovers.push_back(entry.path());
    if (size_t at = name.find(".prev."); at != std::string::npos)
      copied_tags.insert(name.substr(basename_.size(), at - basename_.size()));
  }
  for (const fs::path& path : leftovers) fs::remove(path, ec);
  // A ".prev" copy is needed only while its tag's own files are not complete
  // (a save killed between steps 3 and 4).
  for (const std::string& tag : copied_tags)
    if (files(tag).complete()) remove_files(files(tag, ".prev"));
}

TrainingState CheckpointStore::load_state(const std::string& tag) const {
  return complete(tag).value_or(files(tag)).load_state();
}

}  // namespace sf::setup
