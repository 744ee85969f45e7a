#include "checkpoint.h"

#include <algorithm>
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
  // Written only where they differ from the default model, whose files stay as they were.
  if (c.activation != Activation::Relu) m["activation"] = activation_name(c.activation);
  if (c.post_norm) m["norm"] = "post";
  if (c.tie_embeddings) m["tie_embeddings"] = "true";
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

// An optional key's value, one of `choices` (absent: the first).
static std::string metadata_choice(const safetensors::Metadata& m, const std::string& key,
                                   const std::vector<std::string>& choices, const std::string& path) {
  auto it = m.find(key);
  if (it == m.end()) return choices[0];
  if (std::find(choices.begin(), choices.end(), it->second) == choices.end())
    fail(path, ": __metadata__ '", key, "' is \"", it->second, "\", not \"", choices[0], "\" or \"", choices[1], "\"");
  return it->second;
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
  c.activation = *activation_named(metadata_choice(m, "activation", {"relu", "gelu"}, path));
  c.post_norm = metadata_choice(m, "norm", {"pre", "post"}, path) == "post";
  c.tie_embeddings = metadata_choice(m, "tie_embeddings", {"false", "true"}, path) == "true";
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

void load_average(Transformer& model, const std::vector<std::string>& paths) {
  if (paths.empty()) internal_fail("load_average: no checkpoints");
  std::vector<std::vector<double>> sums;
  for (const std::string& path : paths) {
    load_checkpoint(model, path);
    NamedTensors tensors = model.state_dict();
    sums.resize(tensors.size());
    for (size_t i = 0; i < tensors.size(); ++i) {
      std::vector<float> values = tensors[i].second.to_vector();
      sums[i].resize(values.size(), 0.0);
      for (size_t k = 0; k < values.size(); ++k) sums[i][k] += values[k];
    }
  }
  NamedTensors tensors = model.state_dict();
  for (size_t i = 0; i < tensors.size(); ++i) {
    std::vector<float> mean(sums[i].size());
    for (size_t k = 0; k < mean.size(); ++k) mean[k] = static_cast<float>(sums[i][k] / static_cast<double>(paths.size()));
    const Tensor& t = tensors[i].second;
    t.device().write(mean.data(), t.mem(), mean.size() * sizeof(float));
  }
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
