// A model checkpoint: the safetensors reader with its metadata, then the model
// its metadata describes, built and loaded as `translate` does.
#include <algorithm>
#include <cstring>

#include "autograd/safetensors.h"
#include "nn/checkpoint.h"
#include "targets.h"

namespace sf::fuzz {

namespace {

// Roughly the floats a model of this config allocates (weights and positional
// tables). In floating point, so absurd sizes cannot overflow.
double model_floats(const nn::TransformerConfig& c) {
  double d = double(c.d_model), ff = double(c.d_ff);
  double layers = double(c.N) * (12 * d * d + 4 * d * ff);
  double tables = (double(c.src_vocab_size) + 2 * double(c.tgt_vocab_size) +
                   double(c.src_seq_len) + double(c.tgt_seq_len)) * d;
  return layers + tables;
}

// The same names with the same contents, in any order.
bool same_tensors(safetensors::NamedTensors a, safetensors::NamedTensors b) {
  auto by_name = [](const auto& x, const auto& y) { return x.first < y.first; };
  std::sort(a.begin(), a.end(), by_name);
  std::sort(b.begin(), b.end(), by_name);
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const Tensor &x = a[i].second, &y = b[i].second;
    if (a[i].first != b[i].first || x.shape() != y.shape() || x.dtype() != y.dtype() ||
        std::memcmp(x.raw(), y.raw(), static_cast<size_t>(x.numel()) * kElementBytes) != 0)
      return false;
  }
  return true;
}

}  // namespace

void checkpoint(std::string_view input) {
  std::string path = scratch_file("model.safetensors", input);
  safetensors::Contents contents = safetensors::load(path);
  // What the reader accepts, the writer writes back identically.
  std::string copy = scratch_file("copy.safetensors", "");
  safetensors::save(copy, contents.tensors, contents.metadata);
  safetensors::Contents again = safetensors::load(copy);
  expect(same_tensors(contents.tensors, again.tensors) && contents.metadata == again.metadata,
         "safetensors: saving what was loaded changed it");

  nn::TransformerConfig config = nn::read_checkpoint_config(path);
  // KNOWN ISSUE, reported, not fixed here: the checkpoint loader builds the
  // model its metadata asks for before comparing it with the tensors in the
  // file, so a few bytes can ask for 10^6 layers or gigabytes. Skip such
  // models until the loader validates sizes itself.
  if (config.N > 16 || model_floats(config) > (1 << 22)) return;
  Rng init(1);
  std::unique_ptr<nn::Transformer> model = nn::build_transformer(config, init);
  nn::load_checkpoint(*model, path);
  expect(same_tensors(model->state_dict(), contents.tensors),
         "checkpoint: the model's weights differ from the file's");
}

}  // namespace sf::fuzz
