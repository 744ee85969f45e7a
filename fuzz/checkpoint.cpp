// A model checkpoint: the safetensors reader with its metadata, then the model
// its metadata describes, built and loaded as `translate` does.
#include <algorithm>
#include <cstring>

#include "autograd/safetensors.h"
#include "nn/checkpoint.h"
#include "targets.h"

namespace sf::fuzz {

namespace {

// The same names with the same contents, in any order.
bool same_tensors(NamedTensors a, NamedTensors b) {
  auto by_name = [](const auto& x, const auto& y) { return x.first < y.first; };
  std::sort(a.begin(), a.end(), by_name);
  std::sort(b.begin(), b.end(), by_name);
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const Tensor &x = a[i].second, &y = b[i].second;
    if (a[i].first != b[i].first || x.shape() != y.shape() || x.dtype() != y.dtype() ||
        std::memcmp(x.raw(), y.raw(), static_cast<size_t>(x.numel() * element_bytes(x.dtype()))) != 0)
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
  Rng init(1);
  std::unique_ptr<nn::Transformer> model = nn::build_transformer(config, init);
  nn::load_checkpoint(*model, path);
  expect(same_tensors(model->state_dict(), contents.tensors),
         "checkpoint: the model's weights differ from the file's");
}

}  // namespace sf::fuzz
