#include "optimizer.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "base/error.h"
#include "base/parse_int.h"

namespace sf::optim {

void OptimizerState::write(const std::string& path) const {
  safetensors::save(path, tensors, {{"optimizer", kind}, {"step", std::to_string(steps)}});
}

Optimizer::Optimizer(NamedTensors params, float lr)
    : params_(std::move(params)), lr_(lr), state_(params_.size()) {
  for (const auto& [name, p] : params_) {
    if (!p.requires_grad()) internal_fail("optimizer: parameter ", name, " does not require grad");
    owned_.push_back({0, p.numel()});
  }
}

// A whole parameter's state has its shape; a slice's is flat.
static Shape state_shape(const Tensor& param, const Slice& owned) {
  return owned.size() == param.numel() ? param.shape() : Shape{owned.size()};
}

void Optimizer::shard(std::vector<Slice> owned) {
  if (owned.size() != params_.size() || sharded_)
    internal_fail("optimizer: shard() needs a slice per parameter, once");
  for (size_t i = 0; i < owned.size(); ++i)
    if (owned[i].begin < 0 || owned[i].begin > owned[i].end || owned[i].end > params_[i].second.numel())
      internal_fail("optimizer: slice [", owned[i].begin, ", ", owned[i].end, ") of ", params_[i].first);
  owned_ = std::move(owned);
  sharded_ = true;
  for (size_t i = 0; i < params_.size(); ++i)
    for (auto& [name, t] : state_[i]) t = t.view(owned_[i].begin, state_shape(params_[i].second, owned_[i])).clone();
}

void Optimizer::step(float grad_scale) {
  NoGradGuard no_grad;
  ++steps_;
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor grad = params_[i].second.grad();
    if (grad.defined() && owned_[i].size() > 0) update(i, grad, grad_scale);
  }
}

void Optimizer::zero_grad() {
  for (auto& [name, p] : params_) p.zero_grad();
}

const Tensor* Optimizer::find_state(size_t i, const std::string& name) const {
  auto it = state_[i].find(name);
  return it == state_[i].end() ? nullptr : &it->second;
}

int64_t Optimizer::state_bytes() const {
  int64_t bytes = 0;
  for (const auto& states : state_)
    for (const auto& [key, t] : states) bytes += t.numel() * element_bytes(t.dtype());
  return bytes;
}

Tensor& Optimizer::state(size_t i, const std::string& name) {
  auto [it, inserted] = state_[i].try_emplace(name);
  if (inserted) {
    const Tensor& p = params_[i].second;
    it->second = Tensor::zeros(state_shape(p, owned_[i]), DType::F32, p.device());
  }
  return it->second;
}

OptimizerState Optimizer::read_state(const std::string& path) const {
  safetensors::Contents file = safetensors::load(path);
  auto kind = file.metadata.find("optimizer");
  if (kind == file.metadata.end() || kind->second != name())
    fail(path, ": optimizer state is for '", kind == file.metadata.end() ? std::string("?") : kind->second,
         "', not '", name(), "'");
  auto step = file.metadata.find("step");
  if (step == file.metadata.end()) fail(path, ": optimizer state has no step count");
  std::optional<int64_t> steps = parse_int64(step->second);
  if (!steps || *steps < 0)
    fail(path, ": __metadata__ 'step' is \"", step->second, "\", not an integer >= 0");
  return {kind->second, *steps, std::move(file.tensors)};
}

OptimizerState Optimizer::state_dict() const {
  if (sharded_) internal_fail("optimizer: the state of a sharded optimizer is gathered across ranks");
  OptimizerState s{name(), steps_, {}};
  for (size_t i = 0; i < params_.size(); ++i)
    for (const auto& [key, t] : state_[i]) s.tensors.emplace_back(key + "." + params_[i].first, t);
  return s;
}

void Optimizer::load_state_dict(const OptimizerState& s, const std::string& path) {
  if (s.kind != name()) fail(path, ": optimizer state is for '", s.kind, "', not '", name(), "'");
  // Check everything before changing anything.
  std::vector<std::map<std::string, Tensor>> loaded(params_.size());
  size_t used = 0;
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& param = params_[i].second;
    for (const std::string& key : state_names()) {
      std::string full = key + "." + params_[i].first;
      for (const auto& [name, t] : s.tensors) {
        if (name != full) continue;
        if (t.shape() != param.shape())
          fail(path, ": tensor ", full, " has shape ", to_string(t.shape()), ", expected ", to_string(param.shape()));
        // Optimizer state is float32 in every precision (docs/13-bf16.md).
        if (t.dtype() != DType::F32) fail(path, ": tensor ", full, " is ", to_string(t.dtype()), ", expected float32");
        // A NaN or infinite moment, or a negative mean square (Adam divides by
        // its square root), would turn the parameter into NaN at the next step.
        const std::vector<float> values = t.to_vector();
        if (!std::all_of(values.begin(), values.end(), [](float v) { return std::isfinite(v); }))
          fail(path, ": tensor ", full, " holds NaN or infinite values");
        if (key == "exp_avg_sq" && std::any_of(values.begin(), values.end(), [](float v) { return v < 0; }))
          fail(path, ": tensor ", full, " holds negative values (it is a mean of squares)");
        const Slice& own = owned_[i];
        Tensor kept = own.size() == param.numel()
                          ? t
                          : Tensor::from({values.begin() + own.begin, values.begin() + own.end}, {own.size()});
        loaded[i][key] = kept.to(param.device());
        ++used;
      }
    }
  }
  if (used != s.tensors.size())
    fail(path, ": optimizer state has tensors for parameters this model does not have");
  steps_ = s.steps;
  state_ = std::move(loaded);
}

void Adam::update(size_t i, const Tensor& grad, float grad_scale) {
  Tensor& p = params_[i].second;
  Tensor& m = state(i, "exp_avg");
  Tensor& v = state(i, "exp_avg_sq");
  const AdamOptions& o = options_;
  // Bias corrections of the zero-initialised moments at step t.
  auto t = static_cast<double>(steps_);
  float step_size = static_cast<float>(lr_ / (1.0 - std::pow(double(o.beta1), t)));
  float sqrt_bc2 = static_cast<float>(std::sqrt(1.0 - std::pow(double(o.beta2), t)));
  float l2 = o.decoupled ? 0.0f : o.weight_decay;
  float decay = o.decoupled ? lr_ * o.weight_decay : 0.0f;
  const Slice& own = owned(i);
  adam_step_(p.view(own.begin, {own.size()}), grad.view(own.begin, {own.size()}), grad_scale, m, v, step_size,
             o.beta1, o.beta2, o.eps, sqrt_bc2, l2, decay);
}

std::vector<std::string> Sgd::state_names() const {
  if (options_.momentum == 0.0f) return {};
  return {"momentum_buffer"};
}

void Sgd::update(size_t i, const Tensor& grad, float grad_scale) {
  Tensor& p = params_[i].second;
  bool momentum = options_.momentum != 0.0f;
  // PyTorch starts the buffer as a copy of the parameter's first gradient.
  bool first = momentum && !find_state(i, "momentum_buffer");
  Tensor buffer = momentum ? state(i, "momentum_buffer") : Tensor();
  const Slice& own = owned(i);
  sgd_step_(p.view(own.begin, {own.size()}), grad.view(own.begin, {own.size()}), grad_scale, buffer, lr_,
            options_.momentum, options_.weight_decay, options_.nesterov, first);
}

}  // namespace sf::optim
