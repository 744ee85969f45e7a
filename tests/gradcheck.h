// Finite-difference gradient checks, and each op's gradients under a bf16
// autocast against float32's (check_bf16_gradients, below).
//
// For an op f and inputs x, we draw a fixed random weight w of f's output shape
// and compare the analytic gradient of L = sum(f(x) * w) (from backward(w))
// with central differences (L(x + h) - L(x - h)) / 2h, L summed in double.
// Forward values are float32, so the step is h = 1e-2 and an element passes
// when |numeric - analytic| <= 2e-3 + 2e-2 |analytic|: float32 rounding in L
// is ~1e-6 |L|, divided by 2h gives ~1e-4; the truncation error is O(h^2).
#pragma once
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "autograd/engine.h"
#include "autograd/init.h"
#include "autograd/ops.h"
#include "base/random.h"

namespace sf::testing {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

inline double weighted_sum(const Tensor& out, const Tensor& w) {
  double total = 0.0;
  for (int64_t i = 0; i < out.numel(); ++i) total += double(out.data()[i]) * w.data()[i];
  return total;
}

// Mixed precision (docs/13-bf16.md): the same output and gradients under a
// bf16 autocast, against the float32 ones. Only matrix products change: each
// operand is rounded to bf16 (relative error <= 2^-9) and the products summed
// in float32, so a result moves by at most about 2^-8 (0.4%) of the
// magnitudes it sums; a gradient that crosses a dozen products (a whole
// Transformer) gathers several such errors (measured: up to 1.8%, an encoder
// block). Every element must be within kBf16Tolerance (3%) of the float32
// value, relative to the float32 tensor's
// largest magnitude; or, for a gradient that is zero in exact arithmetic and
// so only rounding noise in both (the attention key projection's bias: adding
// one number to every score of a softmax row changes nothing), relative to a
// hundredth of the largest gradient of the check.
inline constexpr double kBf16Tolerance = 3e-2;

inline double max_abs(const Tensor& t) {
  double m = 0.0;
  for (float x : t.to_vector()) m = std::max(m, std::fabs(double(x)));
  return m;
}

// Largest |bf16 - f32| relative to `scale`.
inline double bf16_error(const Tensor& bf16, const Tensor& f32, double scale) {
  std::vector<float> got = bf16.to_vector(), want = f32.to_vector();
  double worst = 0.0;
  for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::fabs(double(got[i]) - want[i]));
  return worst / std::max(scale, 1e-30);
}

inline void check_bf16_gradients(const Fn& f, const std::vector<Tensor>& inputs, const Tensor& out, const Tensor& w) {
  std::vector<Tensor> f32_grads;
  double largest_grad = 0.0;
  for (Tensor x : inputs) {
    f32_grads.push_back(x.dtype() == DType::F32 ? x.grad().clone() : Tensor());
    if (x.dtype() != DType::F32) continue;
    largest_grad = std::max(largest_grad, max_abs(f32_grads.back()));
    x.zero_grad();
  }
  Tensor out_bf16;
  {
    AutocastGuard autocast(DType::BF16);
    out_bf16 = f(inputs);
  }
  out_bf16.backward(w);
  double error = bf16_error(out_bf16, out, max_abs(out));
  CHECK_MESSAGE(error <= kBf16Tolerance, "bf16 autocast: output off by ", error, " of its largest magnitude");
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!f32_grads[i].defined()) continue;
    error = bf16_error(inputs[i].grad(), f32_grads[i], std::max(max_abs(f32_grads[i]), 1e-2 * largest_grad));
    CHECK_MESSAGE(error <= kBf16Tolerance, "bf16 autocast: gradient of input ", i, " off by ", error);
  }
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
  check_bf16_gradients(f, inputs, out, w);
}

// Directional derivatives of a model's loss. The element-wise check above
// allows 2e-3 + 2% per element, so a gradient off by 1% passes it; here the
// gradient g is checked along unit directions v: the central difference
// (L(θ + εv) - L(θ - εv)) / 2ε against g·v, where
//  - θ ± εv is rounded to float32, which moves each parameter by up to half an
//    ulp besides εv (for the tiny Transformer, g·v by up to 2e-4 of itself at
//    ε = 1e-2, 4e-3 at 1e-3): g is dotted with the displacement made;
//  - L comes from `loss_in_double`, which sums the float32 outputs in double,
//    so its rounding noise is that of the outputs, not of a float32 sum.
// What is left is that noise over 2ε, the O(ε²) truncation and any ReLU kink
// crossed within ±ε: ε trades the first against the others.
//
// Two checks:
//  - random directions over all n parameters at once, each error measured
//    against |g|/√n, the root mean square of g·v over random unit directions
//    (relative to g·v itself, a direction that happens to be almost
//    orthogonal to g would fail on noise);
//  - for each parameter tensor alone, the direction of its own gradient g_p,
//    the error measured against g_p·v = |g_p|. Over all
//    parameters an error confined to a small tensor (an 8-element bias 4%
//    off) is lost in the whole gradient's norm; along g_p it is a share of
//    the tensor's own derivative, and the noise, spread over all of the
//    tensor's elements, is smallest there. `skip` names the tensors left out:
//    those whose gradient is zero in exact arithmetic (float32 noise has no
//    scale to measure against).
class DirectionalCheck {
 public:
  DirectionalCheck(const NamedTensors& params, const std::function<Tensor()>& loss,
                   const std::function<double()>& loss_in_double)
      : params_(params), loss_in_double_(loss_in_double) {
    for (auto [name, p] : params_) p.zero_grad();
    loss().backward();
    for (const auto& named : params_) {
      const Tensor& p = named.second;
      REQUIRE_MESSAGE(p.grad().defined(), named.first, " got no gradient");
      start_.push_back(p.to_vector());
      grads_.push_back(p.grad().to_vector());
    }
  }

  // Returns the worst error.
  double random_directions(int directions, double step, double bound) {
    double squared_norm = 0.0;
    int64_t n = 0;
    for (const std::vector<float>& g : grads_) {
      for (float x : g) squared_norm += double(x) * x;
      n += static_cast<int64_t>(g.size());
    }
    const double rms_derivative = std::sqrt(squared_norm / double(n));
    REQUIRE(rms_derivative > 0.0);
    double worst = 0.0;
    for (int d = 0; d < directions; ++d) {
      std::vector<std::vector<double>> v;
      for (const std::vector<float>& g : grads_) {
        v.emplace_back(g.size());
        for (double& x : v.back()) x = rng_.normal();
      }
      // Not structured bindings: clang before 16 cannot capture those in
      // CHECK_MESSAGE's lambda.
      double analytic, numeric;
      std::tie(analytic, numeric) = derivatives(v, step);
      double error = std::fabs(numeric - analytic) / rms_derivative;
      worst = std::max(worst, error);
      CHECK_MESSAGE(error <= bound, "direction ", d, ": analytic ", analytic, " vs numeric ", numeric, ", off by ",
                    error, " of |g|/√n = ", rms_derivative);
    }
    return worst;
  }

  // Along tensor k's own gradient; returns the error.
  double along_gradient(size_t k, double step, double bound) {
    std::vector<std::vector<double>> v(params_.size());
    for (size_t j = 0; j < params_.size(); ++j) v[j].assign(grads_[j].size(), 0.0);
    std::copy(grads_[k].begin(), grads_[k].end(), v[k].begin());
    double analytic, numeric;
    std::tie(analytic, numeric) = derivatives(v, step);
    REQUIRE_MESSAGE(analytic > 0.0, params_[k].first, ": a zero gradient");
    double error = std::fabs(numeric - analytic) / analytic;
    CHECK_MESSAGE(error <= bound, params_[k].first, ": analytic ", analytic, " vs numeric ", numeric, ", off by ",
                  error, " of it");
    return error;
  }

 private:
  // g·v and the central difference along v / |v|, with ε = `step`.
  std::pair<double, double> derivatives(const std::vector<std::vector<double>>& v, double step) {
    double norm = 0.0;
    for (const std::vector<double>& part : v)
      for (double x : part) norm += x * x;
    norm = std::sqrt(norm);
    NoGradGuard no_grad;
    std::vector<std::vector<float>> plus = move(v, step / norm);
    double loss_plus = loss_in_double_();
    std::vector<std::vector<float>> minus = move(v, -step / norm);
    double loss_minus = loss_in_double_();
    move(v, 0.0);
    double analytic = 0.0;
    for (size_t k = 0; k < params_.size(); ++k)
      for (size_t i = 0; i < start_[k].size(); ++i)
        analytic += double(grads_[k][i]) * (double(plus[k][i]) - minus[k][i]);
    return {analytic / (2.0 * step), (loss_plus - loss_minus) / (2.0 * step)};
  }

  // Moves θ to start + scale · v and returns the float32 positions taken.
  std::vector<std::vector<float>> move(const std::vector<std::vector<double>>& v, double scale) {
    std::vector<std::vector<float>> at(params_.size());
    for (size_t k = 0; k < params_.size(); ++k) {
      float* data = params_[k].second.data();
      for (size_t i = 0; i < start_[k].size(); ++i) at[k].push_back(data[i] = float(start_[k][i] + scale * v[k][i]));
    }
    return at;
  }

  const NamedTensors& params_;
  std::function<double()> loss_in_double_;
  std::vector<std::vector<float>> start_, grads_;
  Rng rng_{1234};
};

// How many directions (random ones only), ε, and the largest error allowed.
struct Directions {
  int count;
  double step, bound;
};

inline void check_directional_derivatives(const NamedTensors& params, const std::function<Tensor()>& loss,
                                         const std::function<double()>& loss_in_double, Directions random,
                                         Directions along_gradients,
                                         const std::function<bool(const std::string&)>& skip) {
  DirectionalCheck check(params, loss, loss_in_double);
  double worst = check.random_directions(random.count, random.step, random.bound);
  MESSAGE(random.count, " directions over all parameters: worst error ", worst, " of |g|/√n (bound ", random.bound,
          ")");
  std::string worst_tensor;
  double worst_in_tensor = 0.0;
  for (size_t k = 0; k < params.size(); ++k) {
    if (skip(params[k].first)) continue;
    double error = check.along_gradient(k, along_gradients.step, along_gradients.bound);
    if (error >= worst_in_tensor) std::tie(worst_in_tensor, worst_tensor) = std::tie(error, params[k].first);
  }
  MESSAGE("along each tensor's gradient: worst error ", worst_in_tensor, " of it, in ", worst_tensor, " (bound ",
          along_gradients.bound, ")");
}

// Random float tensor with values in [low, high), from a fixed seed.
inline Tensor random_tensor(const Shape& shape, uint64_t seed, float low = -1.0f,
                            float high = 1.0f) {
  Rng rng(seed);
  return uniform(shape, low, high, rng);
}

}  // namespace sf::testing
