// Optimizers over a model's named parameters, as torch.optim defines them.
//
// An optimizer holds the parameters (shared tensors: it updates them in place)
// and per-parameter state (moments, momentum buffers) keyed by parameter name,
// so its state can be saved and loaded for an exact resume.
#pragma once
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "autograd/safetensors.h"
#include "autograd/tensor.h"

namespace sf::optim {

// Elements [begin, end) of a parameter, in row-major order.
struct Slice {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
};

// An optimizer's state as its file holds it: whole tensors named
// "<state>.<parameter>" (e.g. "exp_avg.encoder.norm.alpha"), the optimizer's
// kind ("adam", ...) and its step count, as safetensors metadata
// {"optimizer", "step"}.
struct OptimizerState {
  std::string kind;
  int64_t steps = 0;
  NamedTensors tensors;

  void write(const std::string& path) const;
};

class Optimizer {
 public:
  Optimizer(NamedTensors params, float lr);
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // One update of every parameter that has a gradient, at the current lr,
  // from the gradients times `grad_scale` (gradient clipping's coefficient,
  // optim/clip.h: applied as the update reads each gradient, instead of a
  // pass of its own over them; the gradients themselves stay as they are).
  void step(float grad_scale = 1.0f);
  void zero_grad();

  float lr() const { return lr_; }
  void set_lr(float lr) { lr_ = lr; }
  int64_t steps() const { return steps_; }  // updates done so far
  const NamedTensors& params() const { return params_; }

  // Sharding for ZeRO-1 (dist/data_parallel.h): from now on only elements
  // `owned[i]` of parameter i are updated, and only their state is kept
  // (state held so far, whole, is cut down to them). Every update is
  // element-wise, so the owned elements change exactly as they would in an
  // optimizer of the whole parameters.
  void shard(std::vector<Slice> owned);
  bool sharded() const { return sharded_; }
  const Slice& owned(size_t i) const { return owned_[i]; }
  const std::vector<Slice>& owned() const { return owned_; }

  // The whole state (not for a sharded optimizer, whose state is gathered
  // across ranks first); loading checks the kind, every name, shape and
  // value, changes nothing when any is wrong (an sf::Error naming `path` and
  // the tensor), and keeps only the owned slices of a sharded optimizer.
  OptimizerState state_dict() const;
  void load_state_dict(const OptimizerState& state, const std::string& path);
  // Reads a state file, checking that it is this optimizer's kind and has a step count.
  OptimizerState read_state(const std::string& path) const;
  void save(const std::string& path) const { state_dict().write(path); }
  void load(const std::string& path) { load_state_dict(read_state(path), path); }

  virtual const char* name() const = 0;
  // The names of the per-parameter state tensors ("exp_avg", ...).
  virtual std::vector<std::string> state_names() const = 0;
  // Parameter i's state tensor `name` (its owned slice, flat, when sharded),
  // or null before its first update.
  const Tensor* find_state(size_t i, const std::string& name) const;
  // The bytes of state this optimizer holds (its share, when sharded).
  int64_t state_bytes() const;

 protected:
  // Updates the owned elements of params_[i] from its gradient times
  // grad_scale, keeping its state in state(i, ...).
  virtual void update(size_t i, const Tensor& grad, float grad_scale) = 0;
  // The state tensor `name` of parameter i, created (zeros) on first use.
  Tensor& state(size_t i, const std::string& name);

  NamedTensors params_;
  float lr_;
  int64_t steps_ = 0;

 private:
  // state_[i]: name -> tensor for parameter i (a map: references stay valid).
  std::vector<std::map<std::string, Tensor>> state_;
  std::vector<Slice> owned_;  // all of each parameter unless sharded
  bool sharded_ = false;
};

struct AdamOptions {
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-9f, weight_decay = 0.0f;
  bool decoupled = false;  // AdamW: decay the weights instead of the gradient
};

// torch.optim.Adam / AdamW.
class Adam : public Optimizer {
 public:
  Adam(NamedTensors params, float lr, AdamOptions options = {}) : Optimizer(std::move(params), lr), options_(options) {}
  const char* name() const override { return options_.decoupled ? "adamw" : "adam"; }
  std::vector<std::string> state_names() const override { return {"exp_avg", "exp_avg_sq"}; }

 protected:
  void update(size_t i, const Tensor& grad, float grad_scale) override;

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
  Sgd(NamedTensors params, float lr, SgdOptions options = {}) : Optimizer(std::move(params), lr), options_(options) {}
  const char* name() const override { return "sgd"; }
  std::vector<std::string> state_names() const override;

 protected:
  void update(size_t i, const Tensor& grad, float grad_scale) override;

 private:
  SgdOptions options_;
};

}  // namespace sf::optim
