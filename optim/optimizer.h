// Optimizers over a model's named parameters, as torch.optim defines them.
//
// An optimizer holds the parameters (shared tensors: it updates them in place)
// and per-parameter state (moments, momentum buffers) keyed by parameter name,
// so its state can be saved and loaded for an exact resume.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autograd/safetensors.h"
#include "autograd/tensor.h"

namespace sf::optim {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

class Optimizer {
 public:
  Optimizer(NamedTensors params, float lr);
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // One update of every parameter that has a gradient, at the current lr.
  void step();
  void zero_grad();

  float lr() const { return lr_; }
  void set_lr(float lr) { lr_ = lr; }
  int64_t steps() const { return steps_; }  // updates done so far
  const NamedTensors& params() const { return params_; }

  // State as safetensors: tensors named "<state>.<parameter>" (e.g.
  // "exp_avg.encoder.norm.alpha"), metadata {"optimizer", "step"}. Loading
  // checks the optimizer kind, every name and shape; a mismatch is an
  // sf::Error naming the file and tensor.
  void save(const std::string& path) const;
  void load(const std::string& path);

  virtual const char* name() const = 0;

 protected:
  // Updates params_[i] from its gradient, keeping its state in state(i, ...).
  virtual void update(size_t i, const Tensor& grad) = 0;
  // The names of the per-parameter state tensors ("exp_avg", ...).
  virtual std::vector<std::string> state_names() const = 0;
  // The state tensor `name` of parameter i, created (zeros) on first use.
  Tensor& state(size_t i, const std::string& name);
  bool has_state(size_t i, const std::string& name) const;

  NamedTensors params_;
  float lr_;
  int64_t steps_ = 0;

 private:
  // state_[i]: name -> tensor for parameter i (a map: references stay valid).
  std::vector<std::map<std::string, Tensor>> state_;
};

struct AdamOptions {
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-9f, weight_decay = 0.0f;
  bool decoupled = false;  // AdamW: decay the weights instead of the gradient
};

// torch.optim.Adam / AdamW.
class Adam : public Optimizer {
 public:
  Adam(NamedTensors params, float lr, AdamOptions options = {});
  const char* name() const override { return options_.decoupled ? "adamw" : "adam"; }

 protected:
  void update(size_t i, const Tensor& grad) override;
  std::vector<std::string> state_names() const override { return {"exp_avg", "exp_avg_sq"}; }

 private:
  AdamOptions options_;
};

struct SgdOptions {
  float momentum = 0.0f, weight_decay = 0.0f;
  bool nesterov = false;
};

// torch.optim.SGD (dampening 0).
class Sgd : public Optimizer {
 public:
  Sgd(NamedTensors params, float lr, SgdOptions options = {});
  const char* name() const override { return "sgd"; }

 protected:
  void update(size_t i, const Tensor& grad) override;
  std::vector<std::string> state_names() const override;

 private:
  SgdOptions options_;
};

}  // namespace sf::optim
