#include "module.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "base/error.h"

namespace sf::nn {

Tensor Module::register_parameter(const std::string& name, Tensor value) {
  value.set_requires_grad();
  parameters_.emplace_back(name, value);
  return value;
}

Tensor Module::register_buffer(const std::string& name, Tensor value) {
  buffers_.emplace_back(name, value);
  return value;
}

Tensor Module::replace_parameter(const std::string& name, const Tensor& shared) {
  for (auto& [own, t] : parameters_)
    if (own == name) {
      if (t.shape() != shared.shape())
        internal_fail("replace_parameter: '", name, "' is ", to_string(t.shape()), ", the shared tensor ",
                      to_string(shared.shape()));
      return t = shared;
    }
  internal_fail("replace_parameter: no parameter '", name, "'");
}

void Module::register_module(const std::string& name, Module& child) {
  children_.emplace_back(name, &child);
}

NamedTensors Module::collect(bool parameters, bool buffers, const std::string& prefix) const {
  NamedTensors out;
  if (parameters)
    for (const auto& [name, t] : parameters_) out.emplace_back(prefix + name, t);
  if (buffers)
    for (const auto& [name, t] : buffers_) out.emplace_back(prefix + name, t);
  for (const auto& [name, child] : children_) {
    NamedTensors below = child->collect(parameters, buffers, prefix + name + ".");
    out.insert(out.end(), below.begin(), below.end());
  }
  return out;
}

// A tensor shared by several modules (tied weights) is one parameter, listed
// under the first name it has, as PyTorch's named_parameters() lists it.
NamedTensors Module::named_parameters() const {
  NamedTensors out;
  std::set<const TensorImpl*> seen;
  for (auto& [name, t] : collect(true, false))
    if (seen.insert(t.id()).second) out.emplace_back(name, t);
  return out;
}
NamedTensors Module::named_buffers() const { return collect(false, true); }
NamedTensors Module::state_dict() const { return collect(true, true); }

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_parameters()) out.push_back(t);
  return out;
}

int64_t Module::num_parameters() const {
  int64_t total = 0;
  for (const Tensor& t : parameters()) total += t.numel();
  return total;
}

// `src` as a tensor of `dtype`: itself, or a bf16 tensor (an export for
// inference) widened to float32, which is exact since every bf16 value is a
// float32 value. Any other dtype mismatch is an error.
static Tensor in_dtype(const Tensor& src, DType dtype, const std::string& name, const std::string& source) {
  if (src.dtype() == dtype) return src;
  if (src.dtype() != DType::BF16 || dtype != DType::F32)
    fail(source, ": tensor '", name, "' is ", to_string(src.dtype()), ", the model needs ", to_string(dtype));
  return to_dtype(src, DType::F32);
}

void Module::load_state_dict(const NamedTensors& tensors, const std::string& source) {
  std::map<std::string, Tensor> given;
  for (const auto& [name, t] : tensors)
    if (!given.emplace(name, t).second) fail(source, ": tensor '", name, "' appears twice");
  NamedTensors own = state_dict();
  std::set<std::string> expected;
  std::vector<Tensor> values;  // what each of `own` receives, in the model's dtype
  // Check everything before copying anything.
  for (const auto& [name, t] : own) {
    expected.insert(name);
    auto it = given.find(name);
    if (it == given.end()) fail(source, ": tensor '", name, "' is missing");
    const Tensor& src = it->second;
    values.push_back(in_dtype(src, t.dtype(), name, source));
    if (src.shape() != t.shape())
      fail(source, ": tensor '", name, "' has shape ", to_string(src.shape()),
           ", the model needs ", to_string(t.shape()));
    // A diverged run's weights would load and translate to garbage.
    if (t.dtype() == DType::F32) {
      Tensor on_host = values.back().to(cpu());
      const float* p = on_host.data();
      if (!std::all_of(p, p + on_host.numel(), [](float v) { return std::isfinite(v); }))
        fail(source, ": tensor '", name, "' holds NaN or infinite values");
    }
  }
  for (const auto& [name, t] : given)
    if (!expected.count(name)) fail(source, ": unexpected tensor '", name, "' (not in the model)");
  // A tied tensor has several names: the file must give each the same values.
  std::map<const TensorImpl*, size_t> first_name;
  for (size_t i = 0; i < own.size(); ++i) {
    auto [first, added] = first_name.emplace(own[i].second.id(), i);
    if (!added && values[i].to_vector() != values[first->second].to_vector())
      fail(source, ": tensors '", own[first->second].first, "' and '", own[i].first,
           "' are one matrix in this model (tie_embeddings) but differ in the file");
  }
  for (size_t i = 0; i < own.size(); ++i) own[i].second.copy_from(values[i]);
}

void Module::to(Device& device) {
  for (auto& [name, t] : parameters_) t.move_to(device);
  for (auto& [name, t] : buffers_) t.move_to(device);
  for (auto& [name, child] : children_) child->to(device);
}

const Tensor* Module::first_tensor() const {
  if (!parameters_.empty()) return &parameters_.front().second;
  if (!buffers_.empty()) return &buffers_.front().second;
  for (const auto& [name, child] : children_)
    if (const Tensor* t = child->first_tensor()) return t;
  return nullptr;
}

Device& Module::device() const {
  const Tensor* t = first_tensor();
  return t ? t->device() : cpu();
}

void Module::zero_grad() {
  for (Tensor& t : parameters()) t.zero_grad();
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
}

}  // namespace sf::nn
