#include "optimizer.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "autograd/engine.h"
#include "autograd/error.h"
#include "autograd/parse_int.h"

namespace sf::optim {

Optimizer::Optimizer(NamedTensors params, float lr)
    : params_(std::move(params)), lr_(lr), state_(params_.size()) {
  for (const auto& [name, p] : params_)
    if (!p.requires_grad()) internal_fail("optimizer: parameter ", name, " does not require grad");
}

void Optimizer::step() {
  NoGradGuard no_grad;
  ++steps_;
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor grad = params_[i].second.grad();
    if (grad.defined()) update(i, grad);
  }
}

void Optimizer::zero_grad() {
  for (auto& [name, p] : params_) p.zero_grad();
}

bool Optimizer::has_state(size_t i, const std::string& name) const {
  return state_[i].count(name) != 0;
}

Tensor& Optimizer::state(size_t i, const std::string& name) {
  auto [it, inserted] = state_[i].try_emplace(name);
  if (inserted) {
    const Tensor& p = params_[i].second;
    it->second = Tensor::zeros(p.shape(), DType::F32, p.device());
  }
  return it->second;
}

void Optimizer::save(const std::string& path) const {
  NamedTensors tensors;
  for (size_t i = 0; i < params_.size(); ++i)
    for (const auto& [key, t] : state_[i]) tensors.emplace_back(key + "." + params_[i].first, t);
  safetensors::save(path, tensors, {{"optimizer", name()}, {"step", std::to_string(steps_)}});
}

void Optimizer::load(const std::string& path) {
  safetensors::Contents file = safetensors::load(path);
  auto kind = file.metadata.find("optimizer");
  if (kind == file.metadata.end() || kind->second != name())
    fail(path, ": optimizer state is for '",
         kind == file.metadata.end() ? std::string("?") : kind->second, "', not '", name(), "'");
  auto step = file.metadata.find("step");
  if (step == file.metadata.end()) fail(path, ": optimizer state has no step count");
  std::optional<int64_t> steps = parse_int64(step->second);
  if (!steps || *steps < 0)
    fail(path, ": __metadata__ 'step' is \"", step->second, "\", not an integer >= 0");
  // Check everything before changing anything.
  std::vector<std::map<std::string, Tensor>> loaded(params_.size());
  size_t used = 0;
  for (size_t i = 0; i < params_.size(); ++i) {
    for (const std::string& key : state_names()) {
      std::string full = key + "." + params_[i].first;
      for (const auto& [name, t] : file.tensors) {
        if (name != full) continue;
        if (t.shape() != params_[i].second.shape() || t.dtype() != DType::F32)
          fail(path, ": tensor ", full, " has shape ", to_string(t.shape()), ", expected ",
               to_string(params_[i].second.shape()));
        // A NaN or infinite moment, or a negative mean square (Adam divides by
        // its square root), would turn the parameter into NaN at the next step.
        const float* values = t.data();
        if (!std::all_of(values, values + t.numel(), [](float v) { return std::isfinite(v); }))
          fail(path, ": tensor ", full, " holds NaN or infinite values");
        if (key == "exp_avg_sq" && std::any_of(values, values + t.numel(), [](float v) { return v < 0; }))
          fail(path, ": tensor ", full, " holds negative values (it is a mean of squares)");
        loaded[i][key] = t.to(params_[i].second.device());
        ++used;
      }
    }
  }
  if (used != file.tensors.size())
    fail(path, ": optimizer state has tensors for parameters this model does not have");
  steps_ = *steps;
  state_ = std::move(loaded);
}

Adam::Adam(NamedTensors params, float lr, AdamOptions options)
    : Optimizer(std::move(params), lr), options_(options) {}

void Adam::update(size_t i, const Tensor& grad) {
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
  p.device().kernels().adam_step(p.mem(), grad.mem(), m.mem(), v.mem(), p.numel(), step_size,
                                 o.beta1, o.beta2, o.eps, sqrt_bc2, l2, decay);
}

Sgd::Sgd(NamedTensors params, float lr, SgdOptions options)
    : Optimizer(std::move(params), lr), options_(options) {}

std::vector<std::string> Sgd::state_names() const {
  if (options_.momentum == 0.0f) return {};
  return {"momentum_buffer"};
}

void Sgd::update(size_t i, const Tensor& grad) {
  Tensor& p = params_[i].second;
  bool momentum = options_.momentum != 0.0f;
  // PyTorch starts the buffer as a copy of the parameter's first gradient.
  bool first = momentum && !has_state(i, "momentum_buffer");
  Mem<float> buf = momentum ? state(i, "momentum_buffer").mem() : Mem<float>();
  p.device().kernels().sgd_step(p.mem(), grad.mem(), buf, p.numel(), lr_, options_.momentum,
                                options_.weight_decay, options_.nesterov, first);
}

}  // namespace sf::optim
