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
                          {"tgt_vocab_size", std::to_string(c.tgt_vocab_size)},
                          {"activation", activation_name(c.activation)},
                          {"norm", c.post_norm ? "post" : "pre"},
                          {"tie_embeddings", c.tie_embeddings ? "true" : "false"}};
  if (c.src_seq_len == c.tgt_seq_len) {
    m["seq_len"] = std::to_string(c.src_seq_len);
  } else {
    m["src_seq_len"] = std::to_string(c.src_seq_len);
    m["tgt_seq_len"] = std::to_string(c.tgt_seq_len);
  }
  return m;
}

std::vector<std::pair<std::string, std::string>> architecture_keys(const TransformerConfig& c) {
  std::string seq_len = std::to_string(c.src_seq_len);
  // (Two appends: GCC 12 warns, wrongly, of an overlapping memcpy in "/" + string.)
  if (c.tgt_seq_len != c.src_seq_len) seq_len.append("/").append(std::to_string(c.tgt_seq_len));
  return {{"d_model", std::to_string(c.d_model)},
          {"N", std::to_string(c.N)},
          {"h", std::to_string(c.h)},
          {"d_ff", std::to_string(c.d_ff)},
          {"seq_len", seq_len},
          {"activation", activation_name(c.activation)},
          {"norm", c.post_norm ? "post" : "pre"},
          {"tie_embeddings", c.tie_embeddings ? "true" : "false"},
          {"src_vocab_size", std::to_string(c.src_vocab_size)},
          {"tgt_vocab_size", std::to_string(c.tgt_vocab_size)}};
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

// A key that files written before it was always written may lack: one of
// `choices`, absent meaning the first (the default those files had).
static std::string metadata_choice(const safetensors::Metadata& m, const std::string& key,
                                   const std::vector<std::string>& choices, const std::string& path) {
  auto it = m.find(key);
  if (it == m.end()) return choices[0];
  if (std::find(choices.begin(), choices.end(), it->second) == choices.end())
    fail(path, ": __metadata__ '", key, "' is \"", it->second, "\", not \"", choices[0], "\" or \"", choices[1], "\"");
  return it->second;
}

TransformerConfig config_from_metadata(const safetensors::Metadata& m, const std::string& path) {
  // An optimizer's file (optim/optimizer.h) is a safetensors file too, and sits beside the weights.
  if (auto it = m.find("optimizer"); it != m.end() && !m.count("d_model"))
    fail(path, ": is an optimizer state file (", it->second, "), not model weights; the model's weights are ",
         "the .safetensors file beside it without .optim");
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

void save_checkpoint(const Transformer& model, const std::string& path, DType dtype,
                     const safetensors::Metadata& labels) {
  NoGradGuard no_grad;  // the parameters require gradients; their copies need none
  NamedTensors tensors;
  for (const auto& [name, t] : model.state_dict()) tensors.emplace_back(name, to_dtype(t, dtype));
  safetensors::Metadata metadata = checkpoint_metadata(model.config());
  for (const auto& [key, value] : labels)
    if (!metadata.emplace(key, value).second) internal_fail("save_checkpoint: label '", key, "' is an architecture key");
  safetensors::save(path, tensors, metadata);
}

void load_checkpoint(Transformer& model, const std::string& path) {
  safetensors::Contents contents = safetensors::load(path);
  // The shapes pin down every hyperparameter but h (and the activation and
  // norm placement, which have no parameters of their own), so the metadata
  // is checked too when present.
  if (!contents.metadata.empty()) {
    auto in_file = architecture_keys(config_from_metadata(contents.metadata, path));
    auto in_model = architecture_keys(model.config());
    for (size_t i = 0; i < in_file.size(); ++i)
      if (in_file[i].second != in_model[i].second)
        fail(path, ": has ", in_file[i].first, " ", in_file[i].second, ", the model it is loaded into ",
             in_model[i].second);
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
