// A new differentiable op written on the public API, and the finite-difference
// check that its backward is right (docs/adding-an-op.md explains both).
//
// softplus(x) = log(1 + e^x), as torch.nn.functional.softplus; its derivative
// is the logistic sigmoid: d/dx log(1 + e^x) = e^x / (1 + e^x) = sigmoid(x).
//
//   build/examples/custom_op [--wrong-backward]
//
// Prints the largest gradient error; exits 1 when it exceeds the tolerance
// (--wrong-backward registers a deliberately wrong derivative to show that).
#include <cmath>
#include <cstdio>
#include <string>

#include "autograd/engine.h"
#include "autograd/init.h"
#include "autograd/ops.h"

using namespace sf;

bool wrong_backward = false;

// Forward: a loop over the data (a CPU tensor), written as
// max(x, 0) + log1p(e^-|x|) so that e^x cannot overflow for large x.
// Backward: record() attaches the function mapping the output's gradient g to
// the input's, g * sigmoid(x), built from existing (differentiable) ops.
Tensor softplus(const Tensor& x) {
  Tensor y = Tensor::empty(x.shape());
  for (int64_t i = 0; i < x.numel(); ++i) {
    float v = x.data()[i];
    y.data()[i] = std::fmax(v, 0.0f) + std::log1p(std::exp(-std::fabs(v)));
  }
  return record(y, "softplus", {x}, [x = x.detach()](const Tensor& g) -> Grads {
    return {wrong_backward ? g * x : g * sigmoid(x)};
  });
}

// L(x) = sum(softplus(x) * w), summed in double so rounding stays below the tolerance.
double weighted_loss(const Tensor& x, const Tensor& w) {
  Tensor y = softplus(x);
  double total = 0.0;
  for (int64_t i = 0; i < y.numel(); ++i) total += double(y.data()[i]) * w.data()[i];
  return total;
}

int main(int argc, char** argv) {
  wrong_backward = argc > 1 && std::string(argv[1]) == "--wrong-backward";
  Rng rng(7);
  Tensor x = uniform({3, 5}, -4.0f, 4.0f, rng).set_requires_grad();
  Tensor w = normal({3, 5}, 0.0f, 1.0f, rng);

  // Analytic: backward(w) seeds dL/dy = w, so x.grad() = w * softplus'(x).
  softplus(x).backward(w);

  // Numeric: central differences (L(x + h) - L(x - h)) / 2h, one element at a time.
  const float h = 1e-2f, atol = 2e-3f, rtol = 2e-2f;
  NoGradGuard no_grad;
  double worst = 0.0;
  bool ok = true;
  for (int64_t i = 0; i < x.numel(); ++i) {
    float saved = x.data()[i];
    x.data()[i] = saved + h;
    double plus = weighted_loss(x, w);
    x.data()[i] = saved - h;
    double minus = weighted_loss(x, w);
    x.data()[i] = saved;
    double numeric = (plus - minus) / (2.0 * h), analytic = x.grad().data()[i];
    double error = std::fabs(numeric - analytic);
    worst = std::fmax(worst, error);
    ok = ok && error <= atol + rtol * std::fabs(analytic);
  }
  std::printf("softplus gradient check: max |analytic - numeric| = %.2e (%s)\n", worst,
              ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
