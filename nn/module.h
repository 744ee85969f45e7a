// The Module base: a tree of modules, each holding named parameters (trained)
// and buffers (saved, not trained), as torch.nn.Module does. Names are built
// hierarchically from the registration names, so a parameter registered as
// "weight" in a child registered as "w_q" of a child "self_attention_block" of
// "layers.0" of "encoder" is "encoder.layers.0.self_attention_block.w_q.weight"
// (the full list is in docs/05-transformer.md).
//
// A module registers its children by reference: modules are neither copied
// nor moved (they are members of their parent or held by unique_ptr).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autograd/ops.h"
#include "autograd/tensor.h"

namespace sf::nn {

class Module {
 public:
  Module() = default;
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  NamedTensors named_parameters() const;
  NamedTensors named_buffers() const;
  std::vector<Tensor> parameters() const;
  int64_t num_parameters() const;  // elements, buffers excluded

  // Parameters and buffers in PyTorch's state_dict() order: a module's own
  // parameters, then its own buffers, then each child's in registration order.
  // The tensors are shared, not copied.
  NamedTensors state_dict() const;
  // Copies `tensors` into the parameters and buffers, as PyTorch's
  // load_state_dict(strict=True): every name must be present, none may be extra,
  // shapes and dtypes must match, except that bf16 values (a bf16 export) load
  // into float32 tensors, widened exactly. Nothing is changed when any check fails.
  // `source` (a file name) starts every error message.
  void load_state_dict(const NamedTensors& tensors, const std::string& source);

  // Moves every parameter and buffer to `device`, in place: the handles a
  // subclass keeps see the move, as with PyTorch's module.to(device).
  void to(Device& device);
  // The device of the parameters (the CPU for a module without any).
  Device& device() const;

  void zero_grad();
  // Training mode (the default) enables dropout; eval mode disables it.
  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

 protected:
  // Registration returns the handle the subclass keeps as its member.
  Tensor register_parameter(const std::string& name, Tensor value);
  Tensor register_buffer(const std::string& name, Tensor value);
  // The registered parameter `name` becomes `shared`, a parameter of another
  // module (weight tying); returns the handle. named_parameters() then lists
  // it once, under its first name; state_dict() under every name.
  Tensor replace_parameter(const std::string& name, const Tensor& shared);
  void register_module(const std::string& name, Module& child);

 private:
  NamedTensors collect(bool parameters, bool buffers, const std::string& prefix = "") const;
  // The first parameter or buffer in state_dict order, or null.
  const Tensor* first_tensor() const;

  bool training_ = true;
  NamedTensors parameters_, buffers_;
  std::vector<std::pair<std::string, Module*>> children_;
};

// An ordered list of modules named "0", "1", ... as torch.nn.ModuleList.
template <class M>
class ModuleList : public Module {
 public:
  template <class... Args>
  M& append(Args&&... args) {
    items_.push_back(std::make_unique<M>(std::forward<Args>(args)...));
    register_module(std::to_string(items_.size() - 1), *items_.back());
    return *items_.back();
  }
  M& operator[](size_t i) { return *items_.at(i); }
  const M& operator[](size_t i) const { return *items_.at(i); }
  size_t size() const { return items_.size(); }

 private:
  std::vector<std::unique_ptr<M>> items_;
};

// torch.nn.Dropout: zeroes elements with probability p in training mode and is
// the identity in eval mode. Draws from `rng`, the model's one dropout
// generator, so training can save and restore its state.
class Dropout : public Module {
 public:
  Dropout(float p, Rng& rng) : p_(p), rng_(rng) {}
  Tensor forward(const Tensor& x) { return is_training() ? dropout(x, p_, rng_) : x; }
  // x + forward(y), in one kernel while training: a residual connection's sum.
  Tensor forward_add(const Tensor& x, const Tensor& y) { return is_training() ? dropout_add(x, y, p_, rng_) : x + y; }

 private:
  float p_;
  Rng& rng_;
};

}  // namespace sf::nn
