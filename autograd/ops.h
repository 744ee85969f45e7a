// Differentiable ops on tensors, and the no-grad helpers decoding needs.
// Binary ops broadcast as NumPy and PyTorch do. Axis arguments may be negative
// (counted from the end). Every op checks its arguments and throws sf::InternalError.
#pragma once
#include <utility>

#include "base/random.h"
#include "tensor.h"

namespace sf {

// --- elementwise ------------------------------------------------------------
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor neg(const Tensor& x);
Tensor add_scalar(const Tensor& x, float s);
Tensor mul_scalar(const Tensor& x, float s);
Tensor rsub_scalar(float s, const Tensor& x);  // s - x
Tensor rdiv_scalar(float s, const Tensor& x);  // s / x
Tensor pow(const Tensor& x, float exponent);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
// GELU as PyTorch's gelu(x, approximate='tanh') (kernels/shared.h: gelu_tanh).
Tensor gelu(const Tensor& x);
// out = where ? value : x: fills `value` where the int32 condition `where`
// (nonzero = true, broadcast against x) holds, as torch.Tensor.masked_fill.
// (An attention mask keeps where it is 1: to hide its 0s, pass eq(mask, 0).)
Tensor fill_where(const Tensor& x, const Tensor& where, float value);

inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator-(const Tensor& x) { return neg(x); }
inline Tensor operator+(const Tensor& x, float s) { return add_scalar(x, s); }
inline Tensor operator+(float s, const Tensor& x) { return add_scalar(x, s); }
inline Tensor operator-(const Tensor& x, float s) { return add_scalar(x, -s); }
inline Tensor operator-(float s, const Tensor& x) { return rsub_scalar(s, x); }
inline Tensor operator*(const Tensor& x, float s) { return mul_scalar(x, s); }
inline Tensor operator*(float s, const Tensor& x) { return mul_scalar(x, s); }
inline Tensor operator/(const Tensor& x, float s) { return mul_scalar(x, 1.0f / s); }
inline Tensor operator/(float s, const Tensor& x) { return rdiv_scalar(s, x); }

// --- matrix products ----------------------------------------------------------
struct MatmulOptions {
  bool trans_a = false;  // use a's last two dims transposed, without a copy
  bool trans_b = false;
};
// [..., M, K] x [..., K, N] -> [..., M, N], batch dims broadcast. With trans_b,
// b is [..., N, K]: attention's Q K^T is matmul(q, k, {.trans_b = true}).
// Operands are both float32 or both bf16 (the result is float32 either way);
// under an AutocastGuard of bf16 float32 operands are rounded to bf16 first
// (autocast_operand).
Tensor matmul(const Tensor& a, const Tensor& b, MatmulOptions options = {});

// --- precision ------------------------------------------------------------------
// x as `dtype`: float32 to bf16 rounds to nearest even, bf16 to float32 is exact
// (kernels/bf16.h); x itself when it has that dtype already. The gradient,
// float32 as every gradient is, passes through unchanged, as PyTorch's
// Tensor.to(dtype) passes it (cast back).
Tensor to_dtype(const Tensor& x, DType dtype);

// Mixed precision as torch.autocast("cpu", dtype=torch.bfloat16): in the
// guard's scope (on this thread), matmul rounds float32 operands to bf16 and
// accumulates in float32, forward and backward (the backward's products take
// the same precision as the forward's, whatever the scope then). Every other
// op stays float32. DType::F32 turns it off inside an outer guard.
//
// Where the device's bf16 products are no faster than its float32 ones
// (Device::multiplies_bf16_faster: a CPU without AMX, or without AVX512-BF16
// on AMD), the operands stay float32 and the product rounds them to bf16 as
// it reads them (the kernel table's gemm_rounded_bf16): the same exact
// products, so the same result as the bf16 GEMM's portable level, at the
// float32 GEMM's speed and with no rounded copies.
class AutocastGuard {
 public:
  explicit AutocastGuard(DType dtype);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  DType previous_;
};
DType autocast_dtype();  // F32 outside any guard
// x as a matrix product takes it under the current autocast: in a bf16
// scope, on a device whose bf16 products are faster, x as a bf16 tensor (a
// parameter, when nothing records gradients, converted only once per
// outermost guard); else x itself.
Tensor autocast_operand(const Tensor& x);

// --- reductions -------------------------------------------------------------
Tensor sum(const Tensor& x);  // all elements -> scalar
Tensor sum(const Tensor& x, int axis, bool keepdim = false);
Tensor mean(const Tensor& x);
Tensor mean(const Tensor& x, int axis, bool keepdim = false);
Tensor max(const Tensor& x, int axis, bool keepdim = false);  // gradient to the first max
// Unbiased (n - 1) variance and standard deviation, as torch.var / torch.std (`std` would clash with namespace std).
Tensor var(const Tensor& x, int axis, bool keepdim = false);
Tensor stddev(const Tensor& x, int axis, bool keepdim = false);
// Sums `x` down to `shape` (the reverse of broadcasting to x's shape).
Tensor sum_to(const Tensor& x, const Shape& shape);
Tensor broadcast_to(const Tensor& x, const Shape& shape);

// --- softmax and loss ---------------------------------------------------------
Tensor softmax(const Tensor& x);      // over the last axis
Tensor log_softmax(const Tensor& x);  // over the last axis
// Attention weights: softmax over the last axis of (keep ? scale * x : -1e9),
// Vaswani et al. 2017, §3.2.1's softmax(QKᵀ/√d_k) with hidden scores set to
// -1e9, fused: softmax(fill_where(x * scale, eq(keep, 0), -1e9)). `keep` is an
// int32 attention mask (1 = may attend, 0 = hidden), broadcast against x, or
// undefined for no mask.
Tensor masked_softmax(const Tensor& x, const Tensor& keep, float scale);
// Layer normalization over the last axis as in the annotated Transformer:
// alpha * (x - mean) / (std + eps) + bias, std unbiased; alpha, bias [features].
Tensor layer_norm(const Tensor& x, const Tensor& alpha, const Tensor& bias, float eps);
// relu(x + bias), bias [features] broadcast over the rows of x [..., features].
Tensor bias_relu(const Tensor& x, const Tensor& bias);
// Mean cross-entropy of logits [..., C] against int32 targets [...], exactly
// torch.nn.CrossEntropyLoss(ignore_index, label_smoothing) with mean reduction.
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int32_t ignore_index = -100,
                     float label_smoothing = 0.0f);

// --- shape --------------------------------------------------------------------
Tensor reshape(const Tensor& x, const Shape& shape);  // one size may be -1; aliases
Tensor transpose(const Tensor& x, int dim0, int dim1);
Tensor permute(const Tensor& x, const std::vector<int>& dims);
Tensor concat(const std::vector<Tensor>& xs, int axis);   // float or int32
Tensor slice(const Tensor& x, int axis, int64_t start, int64_t end);  // [start, end)
Tensor unsqueeze(const Tensor& x, int axis);

// --- lookup and noise -----------------------------------------------------------
// weight [V, D], ids int32 [...] -> [..., D]; backward scatter-adds into weight.
Tensor embedding(const Tensor& weight, const Tensor& ids);
// x [N, ...] float32 or bf16, rows int32 [R] -> [R, ...]: the rows of x at
// `rows` (PyTorch's index_select along dim 0); backward adds each row's
// gradient back.
Tensor index_select(const Tensor& x, const Tensor& rows);
// Zeroes each element with probability p and scales the rest by 1/(1-p).
Tensor dropout(const Tensor& x, float p, Rng& rng);
// x + dropout(y, p, rng) in one kernel: a residual connection's sum.
Tensor dropout_add(const Tensor& x, const Tensor& y, float p, Rng& rng);

// --- no-grad helpers (int32 results) ------------------------------------------------
Tensor argmax(const Tensor& x);  // over the last axis
std::pair<Tensor, Tensor> topk(const Tensor& x, int64_t k);  // values, int32 indices
Tensor eq(const Tensor& a, const Tensor& b);  // same dtype, broadcast; 1 where true
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor arange(int64_t end, Device& device = cpu());  // int32 [0, 1, ..., end-1]
Tensor to_float(const Tensor& ints);

// --- in place, without gradients: what optimizers do (optim/) ----------------------
// Every operand float32, of one number of elements, on one device; a slice of
// a parameter is a view of it (Tensor::view).
// torch.optim.Adam's update of p and its moments m and v from grad times
// grad_scale, as the kernel table's adam_step defines it (kernels.h).
void adam_step_(const Tensor& p, const Tensor& grad, float grad_scale, const Tensor& m, const Tensor& v,
                float step_size, float beta1, float beta2, float eps, float sqrt_bias_correction2, float l2,
                float decay);
// torch.optim.SGD's update (kernels.h: sgd_step); `momentum_buffer`
// undefined without momentum.
void sgd_step_(const Tensor& p, const Tensor& grad, float grad_scale, const Tensor& momentum_buffer, float lr,
               float momentum, float l2, bool nesterov, bool first);
// x *= s.
void mul_scalar_(const Tensor& x, float s);
// [n]: the sum of the squares of each of the n tensors' elements, computed
// where they lie, to be read back in one crossing.
Tensor sums_of_squares(const std::vector<Tensor>& xs);

}  // namespace sf
