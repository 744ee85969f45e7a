// Precision: converting between float32 and bf16, and autocast, the switch
// that makes matrix products take bf16 operands (docs/13-bf16.md).
#include <unordered_map>
#include <utility>

#include "ops.h"
#include "ops_common.h"

namespace sf {
using namespace detail;

namespace {

thread_local DType g_autocast = DType::F32;
thread_local int g_autocast_depth = 0;

// Parameters' bf16 copies made under autocast while recording is off
// (decoding, validation), each kept until the outermost guard ends: decoding
// multiplies every weight once per generated token, and rounding the weights
// each time would cost more than the product. As PyTorch's autocast weight
// cache, it assumes parameters do not change inside one guard. The parameter
// itself is kept beside its copy, so its address is not reused meanwhile.
thread_local std::unordered_map<const TensorImpl*, std::pair<Tensor, Tensor>> g_parameter_copies;

bool is_parameter(const Tensor& x) { return x.is_leaf() && x.requires_grad(); }

}  // namespace

AutocastGuard::AutocastGuard(DType dtype) : previous_(g_autocast) {
  if (dtype != DType::F32 && dtype != DType::BF16)
    internal_fail("autocast: matrix products run in float32 or bfloat16, not ", to_string(dtype));
  g_autocast = dtype;
  ++g_autocast_depth;
}

AutocastGuard::~AutocastGuard() {
  g_autocast = previous_;
  if (--g_autocast_depth == 0) g_parameter_copies.clear();
}

DType autocast_dtype() { return g_autocast; }

Tensor autocast_operand(const Tensor& x) {
  if (g_autocast != DType::BF16 || x.dtype() != DType::F32) return x;
  // Where bf16 products are no faster, the product rounds x as it reads it.
  if (!x.device().multiplies_bf16_faster()) return x;
  if (grad_enabled() || !is_parameter(x)) return to_dtype(x, DType::BF16);
  auto [entry, added] = g_parameter_copies.try_emplace(x.id());
  if (added) entry->second = {x, to_dtype(x, DType::BF16)};
  return entry->second.second;
}

Tensor to_dtype(const Tensor& x, DType dtype) {
  if (x.dtype() == dtype) return x;
  const bool to_bf16 = x.dtype() == DType::F32 && dtype == DType::BF16;
  if (!to_bf16 && !(x.dtype() == DType::BF16 && dtype == DType::F32))
    internal_fail("to_dtype: converts between float32 and bfloat16, not ", to_string(x.dtype()), " to ",
                  to_string(dtype));
  Tensor out = empty_like_device(x, x.shape(), dtype);
  if (to_bf16)
    kernels_of(x).float_to_bf16(x.mem(), out.bf16_mem(), x.numel());
  else
    kernels_of(x).bf16_to_float(x.bf16_mem(), out.mem(), x.numel());
  // Gradients are float32 whatever the dtype of the tensor they belong to, and
  // the derivative of a rounding is taken as 1: the gradient passes through.
  return record(out, "to_dtype", {x}, [](const Tensor& g) -> Grads { return {g}; });
}

}  // namespace sf
