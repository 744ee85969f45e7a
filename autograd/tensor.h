// Tensor: an n-dimensional array of float32 (or int32, for token ids and masks,
// or bfloat16, for mixed precision) in contiguous row-major storage, with reverse-mode automatic differentiation.
//
// A Tensor is a cheap handle (a shared pointer): copying it shares the data.
// Every tensor is contiguous. `reshape` and `detach` alias the storage (no copy);
// `transpose`, `permute`, `slice` and `concat` copy into a new contiguous tensor.
// Code that wants an independent copy calls `clone()`.
//
// A tensor lives on one device (device.h): the CPU unless created elsewhere or
// moved with `to()`. Ops run on their operands' device and put their result
// there. The host sees values only through explicit crossings: `to(cpu())`,
// `to_vector()`, `item()`. `data()` and `ints()` are host addresses, for CPU
// tensors only.
#pragma once
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "device.h"

namespace sf {

// float32; int32 (token ids, masks); bfloat16 (kernels/bf16.h), the
// operands of mixed-precision matrix products (docs/13-bf16.md).
enum class DType { F32, I32, BF16 };
using Shape = std::vector<int64_t>;
using kernels::bf16;

int64_t numel(const Shape& shape);
std::string to_string(const Shape& shape);  // "[2, 3]"
Shape contiguous_strides(const Shape& shape);  // row-major element strides
const char* to_string(DType dtype);
int64_t element_bytes(DType dtype);  // 4, 4, 2
// The precisions a run or a file can be in, by the names settings and flags
// give them: "fp32" (float32) and "bf16" (bfloat16). The names, in that
// order; the dtype of a name (none for another string); a dtype's name.
const std::vector<std::string>& precision_names();
std::optional<DType> precision_named(const std::string& name);
const char* precision_name(DType dtype);

class Tensor;
struct Node;
using Grads = std::vector<Tensor>;
// Given the gradient of an op's output, returns the gradients of its inputs
// (in the order they were recorded; an undefined Tensor where none is needed).
using BackwardFn = std::function<Grads(const Tensor& grad_output)>;

struct TensorImpl;

class Tensor {
 public:
  Tensor() = default;  // undefined: no shape, no data

  // Factories. The data is uninitialised for `empty`. `from` and `from_ints`
  // copy host values into a CPU tensor (move it with `to`).
  static Tensor empty(const Shape& shape, DType dtype = DType::F32, Device& device = cpu());
  static Tensor zeros(const Shape& shape, DType dtype = DType::F32, Device& device = cpu());
  static Tensor full(const Shape& shape, float value, Device& device = cpu());
  static Tensor ones(const Shape& shape, Device& device = cpu()) { return full(shape, 1.0f, device); }
  static Tensor scalar(float value, Device& device = cpu()) { return full({}, value, device); }
  static Tensor from(const std::vector<float>& values, const Shape& shape);
  static Tensor from_ints(const std::vector<int32_t>& values, const Shape& shape);
  // A float32 CPU tensor of shape {memory.size()} over memory that its caller
  // owns and keeps alive as long as the tensor and its views are used (the
  // gradient buckets in memory the ranks share, dist/data_parallel.cpp).
  static Tensor over(std::span<float> memory);

  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const;
  int ndim() const { return static_cast<int>(shape().size()); }
  int64_t size(int dim) const;  // negative dims count from the end
  int64_t numel() const { return sf::numel(shape()); }
  DType dtype() const;
  Device& device() const;

  // Host addresses of a CPU tensor's data; the dtype must match (F32 for
  // data(), I32 for ints(), BF16 for bf16_data()).
  float* data() const;
  int32_t* ints() const;
  bf16* bf16_data() const;
  void* raw() const;  // the bytes, whatever the dtype
  // The data as kernels address it, on any device (kernels.h).
  Mem<float> mem() const;
  Mem<int32_t> int_mem() const;
  Mem<bf16> bf16_mem() const;
  Mem<void> raw_mem() const;

  // Crossing to the host (waits for the device).
  float item() const;  // the value of a one-element float tensor
  std::vector<float> to_vector() const;  // of a float32 or bf16 tensor
  std::vector<int32_t> to_int_vector() const;
  // This tensor on `device`: itself when it is there already, else a copy
  // (no history: a device crossing is not differentiated).
  Tensor to(Device& device) const;
  // Moves the data to `device` in place: every handle sharing this tensor sees
  // the move (how a module moves its parameters). Gradient and history go.
  void move_to(Device& device);
  // Copies the values of `src` (same shape and dtype, any device) into this tensor.
  void copy_from(const Tensor& src) const;

  // Autograd. A leaf that requires grad accumulates into grad() on backward().
  bool requires_grad() const;
  Tensor& set_requires_grad(bool value = true);
  bool is_leaf() const;
  Tensor grad() const;
  void zero_grad() const;
  void backward() const;                   // for a one-element tensor
  void backward(const Tensor& grad) const;  // seed with `grad` (same shape)
  Tensor detach() const;  // same storage, no history
  Tensor clone() const;   // new storage, no history

  // Internal: attaches the op that produced this tensor (see engine.h).
  void set_grad_fn(std::shared_ptr<Node> node) const;
  const std::shared_ptr<Node>& grad_fn() const;
  // Internal: the gradient slot of a leaf, accumulated by the engine.
  void accumulate_grad(const Tensor& grad) const;
  // Internal: a tensor sharing this one's storage under another shape.
  Tensor alias(const Shape& shape) const;
  // Internal: elements [offset, offset + numel(shape)) of this tensor's
  // storage, as a tensor of `shape` that shares it (a bucket's gradients).
  Tensor view(int64_t offset, const Shape& shape) const;
  // Internal: makes `grad` (this tensor's shape, float32, on its device) the
  // gradient slot itself, so backward accumulates into it where it lies (a
  // view into a communication buffer: dist/data_parallel.h); zero_grad()
  // then keeps it and marks it zero, and the next accumulation overwrites it
  // (one write per step, as PyTorch's DDP does with gradient_as_bucket_view,
  // instead of zeroing, then reading back to add); grad() writes the zeros
  // of a slot that nothing accumulated into. An undefined `grad` drops the slot.
  void set_grad(const Tensor& grad) const;
  bool same_storage(const Tensor& other) const;
  // Internal: what this handle refers to; equal for handles of one tensor.
  const TensorImpl* id() const { return impl_.get(); }

 private:
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}
  TensorImpl& impl() const;
  std::shared_ptr<TensorImpl> impl_;
};

struct TensorImpl {
  Shape shape;
  DType dtype = DType::F32;
  std::shared_ptr<Storage> storage;
  size_t offset = 0;  // bytes into storage where the elements begin (a view)
  bool requires_grad = false;
  Tensor grad;
  bool grad_in_place = false;  // set_grad(): zero_grad() keeps grad
  bool grad_zero = false;      // in place: grad's elements stand for zeros (zero_grad)
  std::shared_ptr<Node> grad_fn;
};

// Name -> tensor pairs in a fixed order: a module's parameters, an
// optimizer's state, a safetensors file's contents.
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

}  // namespace sf
