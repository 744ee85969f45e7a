// Elementwise ops. Each forward sits beside its backward; the backward is written
// with the same ops (grad mode is off while it runs), so it reads as the calculus.
#include "ops.h"
#include "ops_common.h"

namespace sf {
using namespace detail;
using kernels::Binary;
using kernels::Unary;

static Tensor binary_forward(Binary op, const Tensor& a, const Tensor& b, const char* name) {
  require_float(a, name);
  require_float(b, name);
  common_device(a, b, name);
  Shape shape = broadcast_shapes(a.shape(), b.shape(), name);
  Tensor out = empty_like_device(a, shape);
  kernels_of(a).binary(op, a.mem(), b.mem(), out.mem(), broadcast_rows(shape, a.shape(), b.shape()));
  return out;
}

static Tensor unary_forward(Unary op, const Tensor& x, float s, const char* name) {
  require_float(x, name);
  Tensor out = empty_like_device(x, x.shape());
  kernels_of(x).unary(op, x.mem(), out.mem(), x.numel(), s);
  return out;
}

Tensor add(const Tensor& a, const Tensor& b) {
  Tensor out = binary_forward(Binary::Add, a, b, "add");
  return record(out, "add", {a, b}, [sa = a.shape(), sb = b.shape()](const Tensor& g) -> Grads {
    return {sum_to(g, sa), sum_to(g, sb)};
  });
}

Tensor sub(const Tensor& a, const Tensor& b) {
  Tensor out = binary_forward(Binary::Sub, a, b, "sub");
  return record(out, "sub", {a, b}, [sa = a.shape(), sb = b.shape()](const Tensor& g) -> Grads {
    return {sum_to(g, sa), sum_to(neg(g), sb)};
  });
}

// d(ab)/da = b, d(ab)/db = a
Tensor mul(const Tensor& a, const Tensor& b) {
  Tensor out = binary_forward(Binary::Mul, a, b, "mul");
  return record(out, "mul", {a, b}, [a, b](const Tensor& g) -> Grads {
    return {a.requires_grad() ? sum_to(g * b, a.shape()) : Tensor(),
            b.requires_grad() ? sum_to(g * a, b.shape()) : Tensor()};
  });
}

// d(a/b)/da = 1/b, d(a/b)/db = -a/b^2
Tensor div(const Tensor& a, const Tensor& b) {
  Tensor out = binary_forward(Binary::Div, a, b, "div");
  return record(out, "div", {a, b}, [a, b](const Tensor& g) -> Grads {
    return {a.requires_grad() ? sum_to(g / b, a.shape()) : Tensor(),
            b.requires_grad() ? sum_to(-(g * a) / (b * b), b.shape()) : Tensor()};
  });
}

Tensor neg(const Tensor& x) {
  Tensor out = unary_forward(Unary::Neg, x, 0.0f, "neg");
  return record(out, "neg", {x}, [](const Tensor& g) -> Grads { return {neg(g)}; });
}

Tensor add_scalar(const Tensor& x, float s) {
  Tensor out = unary_forward(Unary::AddScalar, x, s, "add_scalar");
  return record(out, "add_scalar", {x}, [](const Tensor& g) -> Grads { return {g}; });
}

Tensor mul_scalar(const Tensor& x, float s) {
  Tensor out = unary_forward(Unary::MulScalar, x, s, "mul_scalar");
  return record(out, "mul_scalar", {x}, [s](const Tensor& g) -> Grads { return {g * s}; });
}

Tensor rsub_scalar(float s, const Tensor& x) {
  Tensor out = unary_forward(Unary::RSubScalar, x, s, "rsub_scalar");
  return record(out, "rsub_scalar", {x}, [](const Tensor& g) -> Grads { return {neg(g)}; });
}

// d(s/x)/dx = -s/x^2 = -y/x
Tensor rdiv_scalar(float s, const Tensor& x) {
  Tensor out = unary_forward(Unary::RDivScalar, x, s, "rdiv_scalar");
  return record(out, "rdiv_scalar", {x}, [x, y = out.detach()](const Tensor& g) -> Grads {
    return {-(g * y) / x};
  });
}

// d(x^p)/dx = p x^(p-1)
Tensor pow(const Tensor& x, float exponent) {
  Tensor out = unary_forward(Unary::PowScalar, x, exponent, "pow");
  return record(out, "pow", {x}, [x, exponent](const Tensor& g) -> Grads {
    return {g * pow(x, exponent - 1.0f) * exponent};
  });
}

// The backward of exp, sqrt, tanh and sigmoid reuses the output y (detached, so
// the graph holds no reference cycle).
Tensor exp(const Tensor& x) {
  Tensor out = unary_forward(Unary::Exp, x, 0.0f, "exp");
  return record(out, "exp", {x}, [y = out.detach()](const Tensor& g) -> Grads { return {g * y}; });
}

Tensor log(const Tensor& x) {
  Tensor out = unary_forward(Unary::Log, x, 0.0f, "log");
  return record(out, "log", {x}, [x](const Tensor& g) -> Grads { return {g / x}; });
}

// d sqrt(x)/dx = 1 / (2 sqrt(x))
Tensor sqrt(const Tensor& x) {
  Tensor out = unary_forward(Unary::Sqrt, x, 0.0f, "sqrt");
  return record(out, "sqrt", {x}, [y = out.detach()](const Tensor& g) -> Grads {
    return {g / (y * 2.0f)};
  });
}

Tensor relu(const Tensor& x) {
  Tensor out = unary_forward(Unary::Relu, x, 0.0f, "relu");
  return record(out, "relu", {x}, [y = out.detach()](const Tensor& g) -> Grads {
    Tensor dx = empty_like_device(y, y.shape());
    kernels_of(y).relu_backward(y.mem(), g.mem(), dx.mem(), y.numel());  // dy where y > 0
    return {dx};
  });
}

// d tanh(x)/dx = 1 - tanh(x)^2
Tensor tanh(const Tensor& x) {
  Tensor out = unary_forward(Unary::Tanh, x, 0.0f, "tanh");
  return record(out, "tanh", {x}, [y = out.detach()](const Tensor& g) -> Grads {
    return {g * (1.0f - y * y)};
  });
}

// GELU, tanh form (shared.h: gelu_tanh); its backward is g * gelu'(x), the
// derivative computed from x (shared.h: gelu_tanh_grad).
Tensor gelu(const Tensor& x) {
  Tensor out = unary_forward(Unary::Gelu, x, 0.0f, "gelu");
  return record(out, "gelu", {x}, [x = x.detach()](const Tensor& g) -> Grads {
    return {g * unary_forward(Unary::GeluGrad, x, 0.0f, "gelu")};
  });
}

// d sigmoid(x)/dx = sigmoid(x) (1 - sigmoid(x))
Tensor sigmoid(const Tensor& x) {
  Tensor out = unary_forward(Unary::Sigmoid, x, 0.0f, "sigmoid");
  return record(out, "sigmoid", {x}, [y = out.detach()](const Tensor& g) -> Grads {
    return {g * y * (1.0f - y)};
  });
}

Tensor fill_where(const Tensor& x, const Tensor& host_where, float value) {
  require_float(x, "fill_where");
  if (host_where.dtype() != DType::I32) internal_fail("fill_where: the condition must be int32");
  Tensor where = beside(host_where, x);
  Shape shape = broadcast_shapes(x.shape(), where.shape(), "fill_where");
  Tensor out = empty_like_device(x, shape);
  kernels_of(x).fill_where(x.mem(), where.int_mem(), value, out.mem(), broadcast_rows(shape, x.shape(), where.shape()));
  // Filled positions no longer depend on x.
  return record(out, "fill_where", {x}, [where, sx = x.shape()](const Tensor& g) -> Grads {
    return {sum_to(fill_where(g, where, 0.0f), sx)};
  });
}

}  // namespace sf
