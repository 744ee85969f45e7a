#include "resources.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>

#include "autograd/tensor.h"
#include "base/atomic_file.h"
#include "base/error.h"
#include "base/platform.h"

namespace sf::setup {

namespace fs = std::filesystem;

// Floats kept per token for backward, counted from the layers: each sublayer
// keeps its input, its layer norm's output and statistics, the attention's
// q, k, v and context, the feed-forward's hidden activations; the attention
// weights are h x seq_len per token (before and after softmax and dropout).
double training_bytes(const nn::TransformerConfig& c, int64_t batch_size) {
  double d = static_cast<double>(c.d_model), d_ff = static_cast<double>(c.d_ff), h = static_cast<double>(c.h);
  double s = static_cast<double>(std::max(c.src_seq_len, c.tgt_seq_len));
  double per_token = static_cast<double>(c.N) * ((12 * d + 2 * d_ff + 3 * h * s) + (20 * d + 2 * d_ff + 6 * h * s)) +
                     2 * static_cast<double>(c.tgt_vocab_size);
  double activations = static_cast<double>(batch_size) * s * per_token;
  return 4 * nn::parameter_count(c) * int64_t{sizeof(float)} + activations * int64_t{sizeof(float)};
}

double inference_bytes(const nn::TransformerConfig& c, int64_t batch_size, int64_t beam) {
  double d = static_cast<double>(c.d_model);
  double s = static_cast<double>(std::max(c.src_seq_len, c.tgt_seq_len));
  double cache = static_cast<double>(batch_size) * static_cast<double>(beam) * s * static_cast<double>(c.N) * 4 * d;
  double logits = static_cast<double>(batch_size) * static_cast<double>(beam) * static_cast<double>(c.tgt_vocab_size);
  return (nn::parameter_count(c) + cache + logits) * int64_t{sizeof(float)};
}

void check_fits_in_memory(double bytes, const std::string& what, const std::string& source) {
  double machine = platform::physical_memory_bytes();
  if (machine > 0 && bytes > machine) {
    char text[160];
    std::snprintf(text, sizeof text, "needs about %.1f GiB, more than this machine's %.1f GiB of memory",
                  bytes / (1 << 30), machine / (1 << 30));
    fail(source, ": ", what, " ", text);
  }
}

void check_writable_folder(const std::string& folder, const std::string& source, const std::string& key) {
  std::error_code ec = make_folders(folder);
  // A file in its place is said in words: libstdc++ reports it as ENOTDIR,
  // libc++ as EEXIST.
  std::error_code unknown;  // then no file in its place either
  const fs::file_status status = fs::status(folder, unknown);
  const bool file_in_place = fs::exists(status) && !fs::is_directory(status);
  if (ec || file_in_place)
    fail(source, ": key '", key, "': cannot create the folder ", folder, " (",
         file_in_place ? "a file of that name exists" : ec.message(), ")");
  std::string probe = (fs::path(folder) / ".scratchformer-write-test").string();
  FILE* f = std::fopen(probe.c_str(), "w");
  if (!f) fail(source, ": key '", key, "': cannot write in ", folder, " (", std::strerror(errno), ")");
  std::fclose(f);
  std::remove(probe.c_str());
}

// For 0: the cores mpirun (or taskset) bound the process to, if it is bound;
// else the machine's, shared out among the ranks on it.
int threads_to_use(int64_t threads_key, int ranks_on_this_machine, bool communication_thread) {
  if (threads_key > 0) return static_cast<int>(threads_key);
  int machine = static_cast<int>(std::thread::hardware_concurrency());
  int allowed = platform::cores_allowed();
  if (allowed > 0 && allowed < machine) return allowed;
  return std::max(1, (machine - (communication_thread ? 1 : 0)) / ranks_on_this_machine);
}

}  // namespace sf::setup
