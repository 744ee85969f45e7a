#include "tensor.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "engine.h"
#include "base/error.h"

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

const char* to_string(DType dtype) {
  switch (dtype) {
    case DType::F32: return "float32";
    case DType::I32: return "int32";
    case DType::BF16: return "bfloat16";
  }
  return "?";
}

int64_t element_bytes(DType dtype) { return dtype == DType::BF16 ? 2 : 4; }

const std::vector<std::string>& precision_names() {
  static const std::vector<std::string> names{"fp32", "bf16"};
  return names;
}

std::optional<DType> precision_named(const std::string& name) {
  if (name == "fp32") return DType::F32;
  if (name == "bf16") return DType::BF16;
  return std::nullopt;
}

const char* precision_name(DType dtype) {
  if (dtype == DType::F32 || dtype == DType::BF16) return dtype == DType::F32 ? "fp32" : "bf16";
  internal_fail("precision_name: ", to_string(dtype), " is not a precision");
}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device& device) {
  for (int64_t d : shape)
    if (d < 0) internal_fail("tensor shape ", to_string(shape), " has a negative size");
  auto impl = std::make_shared<TensorImpl>();
  impl->shape = shape;
  impl->dtype = dtype;
  // Whole 4-byte words, which Device::fill sets (an odd count of bf16 rounds up).
  impl->storage = std::make_shared<Storage>(device, (element_bytes(dtype) * sf::numel(shape) + 3) / 4 * 4);
  return Tensor(std::move(impl));
}

Tensor Tensor::over(std::span<float> memory) {
  auto impl = std::make_shared<TensorImpl>();
  impl->shape = {static_cast<int64_t>(memory.size())};
  impl->dtype = DType::F32;
  impl->storage = std::make_shared<Storage>(memory.data(), memory.size_bytes());
  return Tensor(std::move(impl));
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device& device) {
  Tensor t = empty(shape, dtype, device);
  // 0.0f, 0 and bf16 0 are all zero bits.
  device.fill(t.raw_mem(), 0, t.impl().storage->bytes() / 4);
  return t;
}

Tensor Tensor::full(const Shape& shape, float value, Device& device) {
  Tensor t = empty(shape, DType::F32, device);
  device.fill(t.raw_mem(), std::bit_cast<uint32_t>(value), static_cast<size_t>(t.numel()));
  return t;
}

Tensor Tensor::from(const std::vector<float>& values, const Shape& shape) {
  if (static_cast<int64_t>(values.size()) != sf::numel(shape))
    internal_fail("Tensor::from: ", values.size(), " values for shape ", to_string(shape));
  Tensor t = empty(shape);
  std::copy(values.begin(), values.end(), t.data());
  return t;
}

Tensor Tensor::from_ints(const std::vector<int32_t>& values, const Shape& shape) {
  if (static_cast<int64_t>(values.size()) != sf::numel(shape))
    internal_fail("Tensor::from_ints: ", values.size(), " values for shape ", to_string(shape));
  Tensor t = empty(shape, DType::I32);
  std::copy(values.begin(), values.end(), t.ints());
  return t;
}

TensorImpl& Tensor::impl() const {
  if (!impl_) internal_fail("use of an undefined tensor");
  return *impl_;
}

const Shape& Tensor::shape() const { return impl().shape; }
DType Tensor::dtype() const { return impl().dtype; }
Device& Tensor::device() const { return impl().storage->device(); }

int64_t Tensor::size(int dim) const {
  int n = ndim();
  if (dim < -n || dim >= n) internal_fail("dimension ", dim, " out of range for shape ", to_string(shape()));
  return shape()[dim < 0 ? dim + n : dim];
}

void* Tensor::raw() const {
  if (!device().host_addressable())
    internal_fail("data(): the tensor lives on ", device().name(),
                  "; read it with to_vector() or move it with to(cpu())");
  return static_cast<std::byte*>(impl().storage->buffer()) + impl().offset;
}

float* Tensor::data() const {
  if (dtype() != DType::F32) internal_fail("data(): tensor is ", to_string(dtype()), ", not float32");
  return static_cast<float*>(raw());
}

int32_t* Tensor::ints() const {
  if (dtype() != DType::I32) internal_fail("ints(): tensor is ", to_string(dtype()), ", not int32");
  return static_cast<int32_t*>(raw());
}

bf16* Tensor::bf16_data() const {
  if (dtype() != DType::BF16) internal_fail("bf16_data(): tensor is ", to_string(dtype()), ", not bfloat16");
  return static_cast<bf16*>(raw());
}

Mem<bf16> Tensor::bf16_mem() const {
  if (dtype() != DType::BF16) internal_fail("tensor is ", to_string(dtype()), ", not bfloat16");
  return {impl().storage->buffer(), impl().offset};
}

Mem<void> Tensor::raw_mem() const { return {impl().storage->buffer(), impl().offset}; }

Mem<float> Tensor::mem() const {
  if (dtype() != DType::F32) internal_fail("tensor is ", to_string(dtype()), ", not float32");
  return {impl().storage->buffer(), impl().offset};
}

Mem<int32_t> Tensor::int_mem() const {
  if (dtype() != DType::I32) internal_fail("tensor is ", to_string(dtype()), ", not int32");
  return {impl().storage->buffer(), impl().offset};
}

float Tensor::item() const {
  if (numel() != 1) internal_fail("item(): tensor of shape ", to_string(shape()), " is not one element");
  return to_vector()[0];
}

std::vector<float> Tensor::to_vector() const {
  std::vector<float> values(static_cast<size_t>(numel()));
  if (dtype() == DType::BF16) {  // widened on the host, exactly
    std::vector<bf16> bits(values.size());
    device().read(bf16_mem(), bits.data(), bits.size() * sizeof(bf16));
    std::transform(bits.begin(), bits.end(), values.begin(), [](bf16 x) { return kernels::to_float(x); });
    return values;
  }
  device().read(mem(), values.data(), values.size() * sizeof(float));
  return values;
}

std::vector<int32_t> Tensor::to_int_vector() const {
  std::vector<int32_t> values(static_cast<size_t>(numel()));
  device().read(int_mem(), values.data(), values.size() * sizeof(int32_t));
  return values;
}

Tensor Tensor::to(Device& target) const {
  if (!defined() || &device() == &target) return *this;
  Tensor copy = empty(shape(), dtype(), target);
  copy.copy_from(*this);
  return copy;
}

void Tensor::move_to(Device& target) {
  if (&device() == &target) return;
  Tensor moved = to(target);
  impl().storage = moved.impl().storage;
  impl().offset = 0;
  impl().grad = Tensor();
  impl().grad_in_place = false;
  impl().grad_fn = nullptr;
}

// Between two devices the bytes cross the host unless one side is the host.
void Tensor::copy_from(const Tensor& src) const {
  if (src.shape() != shape() || src.dtype() != dtype())
    internal_fail("copy_from: ", to_string(src.shape()), " ", to_string(src.dtype()), " into ",
                  to_string(shape()), " ", to_string(dtype()));
  size_t bytes = static_cast<size_t>(numel() * element_bytes(dtype()));
  Device &from = src.device(), &into = device();
  if (&from == &into)
    into.copy(src.raw_mem(), raw_mem(), bytes);
  else if (from.host_addressable())
    into.write(src.raw(), raw_mem(), bytes);
  else if (into.host_addressable())
    from.read(src.raw_mem(), raw(), bytes);
  else {
    std::vector<char> staging(bytes);
    from.read(src.raw_mem(), staging.data(), bytes);
    into.write(staging.data(), raw_mem(), bytes);
  }
}

bool Tensor::requires_grad() const { return impl().requires_grad; }

Tensor& Tensor::set_requires_grad(bool value) {
  if (value && dtype() != DType::F32) internal_fail("only float32 tensors can require grad");
  if (!is_leaf()) internal_fail("set_requires_grad on a tensor computed by an op (detach it first)");
  impl().requires_grad = value;
  return *this;
}

bool Tensor::is_leaf() const { return impl().grad_fn == nullptr; }
Tensor Tensor::grad() const {
  TensorImpl& t = impl();
  if (t.grad_zero) {
    device().fill(t.grad.raw_mem(), 0, static_cast<size_t>(t.grad.numel()));
    t.grad_zero = false;
  }
  return t.grad;
}

void Tensor::zero_grad() const {
  TensorImpl& t = impl();
  if (t.grad_in_place && t.grad.defined())
    t.grad_zero = true;
  else
    t.grad = Tensor();
}

void Tensor::set_grad(const Tensor& grad) const {
  impl().grad_zero = false;
  if (!grad.defined()) {
    impl().grad = Tensor();
    impl().grad_in_place = false;
    return;
  }
  if (grad.shape() != shape() || grad.dtype() != DType::F32 || &grad.device() != &device())
    internal_fail("set_grad: a ", to_string(grad.shape()), " ", to_string(grad.dtype()), " gradient on ",
                  grad.device().name(), " for a ", to_string(shape()), " tensor on ", device().name());
  impl().grad = grad;
  impl().grad_in_place = true;
}

void Tensor::backward() const {
  if (numel() != 1)
    internal_fail("backward() on a tensor of shape ", to_string(shape()),
                  " needs a gradient argument: only one-element tensors get the implicit gradient 1");
  backward(Tensor::full(shape(), 1.0f, device()));
}

void Tensor::backward(const Tensor& grad) const { run_backward(*this, grad); }

Tensor Tensor::view(int64_t offset, const Shape& shape) const {
  size_t begin = impl().offset + static_cast<size_t>(offset * element_bytes(dtype()));
  if (offset < 0 || begin + static_cast<size_t>(sf::numel(shape) * element_bytes(dtype())) > impl().storage->bytes())
    internal_fail("view of ", to_string(shape), " at element ", offset, " past the end of its storage");
  auto impl = std::make_shared<TensorImpl>();
  impl->shape = shape;
  impl->dtype = dtype();
  impl->storage = this->impl().storage;
  impl->offset = begin;
  return Tensor(std::move(impl));
}

Tensor Tensor::alias(const Shape& shape) const { return view(0, shape); }

Tensor Tensor::detach() const { return alias(shape()); }

Tensor Tensor::clone() const {
  Tensor copy = empty(shape(), dtype(), device());
  copy.copy_from(*this);
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
  if (&grad.device() != &device())
    internal_fail("gradient on ", grad.device().name(), " for a tensor on ", device().name());
  if (impl().grad_zero) {  // zero + grad, written once
    slot.copy_from(grad);
    impl().grad_zero = false;
    return;
  }
  // Both contiguous and of one shape: one row of every element.
  kernels::Rows all;
  all.cols = numel();
  all.col_strides[0] = all.col_strides[1] = 1;
  device().kernels().binary(kernels::Binary::Add, slot.mem(), grad.mem(), slot.mem(), all);
}

}  // namespace sf
