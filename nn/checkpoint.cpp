#include "checkpoint.h"

#include <filesystem>

#include "autograd/engine.h"
#include "base/error.h"
#include "base/parse_int.h"

namespace sf::nn {

safetensors::Metadata checkpoint_metadata(const TransformerConfig& c) {
  safetensors::Metadata m{{"d_model", std::to_string(c.d_model)},
                          {"N", std::to_string(c.N)},
                          {"h", std::to_string(c.h)},
                          {"d_ff", std::to_string(c.d_ff)},
                          {"src_vocab_size", std::to_string(c.src_vocab_size)},
                          {"tgt_vocab_size", std::to_string(c.tgt_vocab_size)}};
  if (c.src_seq_len == c.tgt_seq_len) {
    m["seq_len"] = std::to_string(c.src_seq_len);
  } else {
    m["src_seq_len"] = std::to_string(c.src_seq_len);
    m["tgt_seq_len"] = std::to_string(c.tgt_seq_len);
  }
  if (c.activation != Activation::Relu) m["activation"] = activation_name(c.activation);
  return m;
}

static int64_t metadata_int(const safetensors::Metadata& m, const std::string& key, const std::string& path) {
  auto it = m.find(key);
  if (it == m.end()) fail(path, ": __metadata__ has no '", key, "'");
  const std::string& text = it->second;
  std::optional<int64_t> value = parse_int64(text);
  if (!value || *value <= 0)
    fail(path, ": __metadata__ '", key, "' is \"", text, "\", not a positive integer");
  return *value;
}

// The config a checkpoint's metadata describes (dropout left at its default).
static TransformerConfig config_from_metadata(const safetensors::Metadata& m, const std::string& path) {
  TransformerConfig c;
  c.d_model = metadata_int(m, "d_model", path);
  c.N = metadata_int(m, "N", path);
  c.h = metadata_int(m, "h", path);
  c.d_ff = metadata_int(m, "d_ff", path);
  c.src_vocab_size = metadata_int(m, "src_vocab_size", path);
  c.tgt_vocab_size = metadata_int(m, "tgt_vocab_size", path);
  if (m.count("seq_len")) {
    c.src_seq_len = c.tgt_seq_len = metadata_int(m, "seq_len", path);
  } else {
    c.src_seq_len = metadata_int(m, "src_seq_len", path);
    c.tgt_seq_len = metadata_int(m, "tgt_seq_len", path);
  }
  if (c.d_model % c.h != 0)
    fail(path, ": __metadata__ d_model ", c.d_model, " is not divisible by h ", c.h);
  if (auto it = m.find("activation"); it != m.end()) {
    std::optional<Activation> activation = activation_named(it->second);
    if (!activation) fail(path, ": __metadata__ 'activation' is \"", it->second, "\", not \"relu\" or \"gelu\"");
    c.activation = *activation;
  }
  return c;
}

void save_checkpoint(const Transformer& model, const std::string& path, DType dtype) {
  NoGradGuard no_grad;  // the parameters require gradients; their copies need none
  NamedTensors tensors;
  for (const auto& [name, t] : model.state_dict()) tensors.emplace_back(name, to_dtype(t, dtype));
  safetensors::save(path, tensors, checkpoint_metadata(model.config()));
}

void load_checkpoint(Transformer& model, const std::string& path) {
  safetensors::Contents contents = safetensors::load(path);
  // The shapes pin down every hyperparameter but h, so the metadata is checked
  // too when present.
  if (!contents.metadata.empty()) {
    for (const auto& [key, value] : checkpoint_metadata(model.config())) {
      auto it = contents.metadata.find(key);
      if (it == contents.metadata.end()) fail(path, ": __metadata__ has no '", key, "'");
      if (it->second != value)
        fail(path, ": __metadata__ says ", key, " = ", it->second, ", the model has ", value);
    }
  }
  model.load_state_dict(contents.tensors, path);
}

TransformerConfig read_checkpoint_config(const std::string& path) {
  TransformerConfig config = config_from_metadata(safetensors::load_metadata(path), path);
  // A few bytes of metadata can describe any model: the file must hold its
  // weights before anything that size is built. A bf16 export holds them in
  // 2 bytes each, the least any weights file takes.
  double needed = state_dict_floats(config) * static_cast<double>(element_bytes(DType::BF16));
  double held = static_cast<double>(std::filesystem::file_size(path));
  if (needed > held)
    fail(path, ": __metadata__ describes a model of ", state_dict_floats(config), " floats (",
         needed / (1 << 20), " MiB even in bf16), but the file holds only ", held / (1 << 20), " MiB");
  return config;
}

}  // namespace sf::nn
