#include "tensor.h"

#include <cstring>

#include "engine.h"
#include "error.h"

namespace sf {

int64_t numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string to_string(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  int64_t stride = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    strides[d] = stride;
    stride *= shape[d];
  }
  return strides;
}

const char* to_string(DType dtype) { return dtype == DType::F32 ? "float32" : "int32"; }

Tensor Tensor::empty(const Shape& shape, DType dtype) {
  for (int64_t d : shape)
    if (d < 0) fail("tensor shape ", to_string(shape), " has a negative size");
  auto impl = std::make_shared<TensorImpl>();
  impl->shape = shape;
  impl->dtype = dtype;
  impl->storage = std::make_shared<Storage>(cpu(), kElementBytes * sf::numel(shape));
  return Tensor(std::move(impl));
}

Tensor Tensor::zeros(const Shape& shape, DType dtype) {
  Tensor t = empty(shape, dtype);
  std::memset(t.impl().storage->data(), 0, t.impl().storage->bytes());
  return t;
}

Tensor Tensor::full(const Shape& shape, float value) {
  Tensor t = empty(shape);
  std::fill_n(t.data(), t.numel(), value);
  return t;
}

Tensor Tensor::from(const std::vector<float>& values, const Shape& shape) {
  if (static_cast<int64_t>(values.size()) != sf::numel(shape))
    fail("Tensor::from: ", values.size(), " values for shape ", to_string(shape));
  Tensor t = empty(shape);
  std::copy(values.begin(), values.end(), t.data());
  return t;
}

Tensor Tensor::from_ints(const std::vector<int32_t>& values, const Shape& shape) {
  if (static_cast<int64_t>(values.size()) != sf::numel(shape))
    fail("Tensor::from_ints: ", values.size(), " values for shape ", to_string(shape));
  Tensor t = empty(shape, DType::I32);
  std::copy(values.begin(), values.end(), t.ints());
  return t;
}

TensorImpl& Tensor::impl() const {
  if (!impl_) fail("use of an undefined tensor");
  return *impl_;
}

const Shape& Tensor::shape() const { return impl().shape; }
DType Tensor::dtype() const { return impl().dtype; }
Device& Tensor::device() const { return impl().storage->device(); }

int64_t Tensor::size(int dim) const {
  int n = ndim();
  if (dim < -n || dim >= n) fail("dimension ", dim, " out of range for shape ", to_string(shape()));
  return shape()[dim < 0 ? dim + n : dim];
}

float* Tensor::data() const {
  if (dtype() != DType::F32) fail("data(): tensor is ", to_string(dtype()), ", not float32");
  return static_cast<float*>(impl().storage->data());
}

int32_t* Tensor::ints() const {
  if (dtype() != DType::I32) fail("ints(): tensor is ", to_string(dtype()), ", not int32");
  return static_cast<int32_t*>(impl().storage->data());
}

void* Tensor::raw() const { return impl().storage->data(); }

float Tensor::item() const {
  if (numel() != 1) fail("item(): tensor of shape ", to_string(shape()), " is not one element");
  return data()[0];
}

std::vector<float> Tensor::to_vector() const { return {data(), data() + numel()}; }
std::vector<int32_t> Tensor::to_int_vector() const { return {ints(), ints() + numel()}; }

bool Tensor::requires_grad() const { return impl().requires_grad; }

Tensor& Tensor::set_requires_grad(bool value) {
  if (value && dtype() != DType::F32) fail("only float32 tensors can require grad");
  if (!is_leaf()) fail("set_requires_grad on a tensor computed by an op (detach it first)");
  impl().requires_grad = value;
  return *this;
}

bool Tensor::is_leaf() const { return impl().grad_fn == nullptr; }
Tensor Tensor::grad() const { return impl().grad; }
void Tensor::zero_grad() { impl().grad = Tensor(); }

void Tensor::backward() const {
  if (numel() != 1)
    fail("backward() on a tensor of shape ", to_string(shape()),
         " needs a gradient argument: only one-element tensors get the implicit gradient 1");
  backward(Tensor::full(shape(), 1.0f));
}

void Tensor::backward(const Tensor& grad) const { run_backward(*this, grad); }

Tensor Tensor::alias(const Shape& shape) const {
  auto impl = std::make_shared<TensorImpl>();
  impl->shape = shape;
  impl->dtype = dtype();
  impl->storage = this->impl().storage;
  return Tensor(std::move(impl));
}

Tensor Tensor::detach() const { return alias(shape()); }

Tensor Tensor::clone() const {
  Tensor copy = empty(shape(), dtype());
  std::memcpy(copy.impl().storage->data(), impl().storage->data(), impl().storage->bytes());
  return copy;
}

bool Tensor::same_storage(const Tensor& other) const {
  return impl().storage == other.impl().storage;
}

void Tensor::set_grad_fn(std::shared_ptr<Node> node) const {
  impl().grad_fn = std::move(node);
  impl().requires_grad = impl().grad_fn != nullptr;
}

const std::shared_ptr<Node>& Tensor::grad_fn() const { return impl().grad_fn; }

void Tensor::accumulate_grad(const Tensor& grad) const {
  // The slot owns its storage: gradients returned by ops may alias each other
  // (add passes one gradient to both inputs), and optimizers scale grads in place.
  Tensor& slot = impl().grad;
  if (!slot.defined()) {
    slot = grad.clone();
    return;
  }
  Shape strides = contiguous_strides(shape());
  device().kernels().binary(kernels::Binary::Add, {slot.data(), strides.data()},
                            {grad.data(), strides.data()}, slot.data(), shape().data(), ndim());
}

}  // namespace sf
