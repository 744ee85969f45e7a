// The in-place updates optimizers make (ops.h, "in place, without
// gradients"): each checks its operands and runs one kernel of their device's
// table, so optim/ reaches the kernels only through ops, as nn/ does.
#include "ops.h"
#include "ops_common.h"

namespace sf {

namespace {

// Float32 operands of `n` elements on `device`, or a bug naming `op`.
void check_operands(const char* op, Device& device, int64_t n, std::initializer_list<const Tensor*> operands) {
  for (const Tensor* t : operands) {
    if (!t->defined()) continue;
    if (t->dtype() != DType::F32 || t->numel() != n || &t->device() != &device)
      internal_fail(op, ": an operand of ", t->numel(), " ", to_string(t->dtype()), " on ", t->device().name(),
                    " beside ", n, " float32 on ", device.name());
  }
}

}  // namespace

void adam_step_(const Tensor& p, const Tensor& grad, float grad_scale, const Tensor& m, const Tensor& v,
                float step_size, float beta1, float beta2, float eps, float sqrt_bias_correction2, float l2,
                float decay) {
  check_operands("adam_step_", p.device(), p.numel(), {&p, &grad, &m, &v});
  detail::kernels_of(p).adam_step(p.mem(), grad.mem(), grad_scale, m.mem(), v.mem(), p.numel(), step_size, beta1,
                                  beta2, eps, sqrt_bias_correction2, l2, decay);
}

void sgd_step_(const Tensor& p, const Tensor& grad, float grad_scale, const Tensor& momentum_buffer, float lr,
               float momentum, float l2, bool nesterov, bool first) {
  check_operands("sgd_step_", p.device(), p.numel(), {&p, &grad, &momentum_buffer});
  detail::kernels_of(p).sgd_step(p.mem(), grad.mem(), grad_scale,
                                 momentum_buffer.defined() ? momentum_buffer.mem() : Mem<float>(), p.numel(), lr,
                                 momentum, l2, nesterov, first);
}

void mul_scalar_(const Tensor& x, float s) {
  check_operands("mul_scalar_", x.device(), x.numel(), {&x});
  detail::kernels_of(x).unary(kernels::Unary::MulScalar, x.mem(), x.mem(), x.numel(), s);
}

Tensor sums_of_squares(const std::vector<Tensor>& xs) {
  if (xs.empty()) return Tensor::zeros({0});
  Tensor out = Tensor::empty({static_cast<int64_t>(xs.size())}, DType::F32, xs[0].device());
  for (size_t i = 0; i < xs.size(); ++i) {
    check_operands("sums_of_squares", out.device(), xs[i].numel(), {&xs[i]});
    detail::kernels_of(xs[i]).dot(xs[i].mem(), xs[i].mem(), xs[i].numel(), out.mem() + static_cast<int64_t>(i));
  }
  return out;
}

}  // namespace sf
