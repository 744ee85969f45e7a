// Finite-difference gradient checks.
//
// For an op f and inputs x, we draw a fixed random weight w of f's output shape
// and compare the analytic gradient of L = sum(f(x) * w) (from backward(w))
// with central differences (L(x + h) - L(x - h)) / 2h, L summed in double.
// Forward values are float32, so the step is h = 1e-2 and an element passes
// when |numeric - analytic| <= 2e-3 + 2e-2 |analytic|: float32 rounding in L
// is ~1e-6 |L|, divided by 2h gives ~1e-4; the truncation error is O(h^2).
#pragma once
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "autograd/random.h"

namespace sf::testing {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

inline double weighted_sum(const Tensor& out, const Tensor& w) {
  double total = 0.0;
  for (int64_t i = 0; i < out.numel(); ++i) total += double(out.data()[i]) * w.data()[i];
  return total;
}

inline void check_gradients(const Fn& f, std::vector<Tensor> inputs, float step = 1e-2f,
                            float atol = 2e-3f, float rtol = 2e-2f) {
  for (Tensor& x : inputs)
    if (x.dtype() == DType::F32) x.set_requires_grad();
  Tensor out = f(inputs);
  Rng rng(1234);
  Tensor w = normal(out.shape(), 0.0f, 1.0f, rng);
  out.backward(w);

  for (size_t i = 0; i < inputs.size(); ++i) {
    Tensor x = inputs[i];
    if (x.dtype() != DType::F32) continue;
    REQUIRE_MESSAGE(x.grad().defined(), "input ", i, " got no gradient");
    int bad = 0;
    for (int64_t j = 0; j < x.numel(); ++j) {
      float saved = x.data()[j];
      NoGradGuard no_grad;
      x.data()[j] = saved + step;
      double plus = weighted_sum(f(inputs), w);
      x.data()[j] = saved - step;
      double minus = weighted_sum(f(inputs), w);
      x.data()[j] = saved;
      double numeric = (plus - minus) / (2.0 * step);
      double analytic = x.grad().data()[j];
      bool ok = std::fabs(numeric - analytic) <= atol + rtol * std::fabs(analytic);
      if (!ok && ++bad <= 5)
        FAIL_CHECK("input ", i, " element ", j, ": analytic ", analytic, " vs numeric ", numeric);
    }
    CHECK_MESSAGE(bad == 0, "input ", i, ": ", bad, " of ", x.numel(), " elements differ");
  }
}

// Random float tensor with values in [low, high), from a fixed seed.
inline Tensor random_tensor(const Shape& shape, uint64_t seed, float low = -1.0f,
                            float high = 1.0f) {
  Rng rng(seed);
  return uniform(shape, low, high, rng);
}

}  // namespace sf::testing
