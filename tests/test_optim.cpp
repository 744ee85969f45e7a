// Optimizers against PyTorch's update rules, schedules, clipping, accumulation
// and exact state round trips.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <numeric>
#include <span>
#include <nlohmann/json.hpp>

#include "autograd/engine.h"
#include "autograd/init.h"
#include "autograd/ops.h"
#include "base/error.h"
#include "nn/layers.h"
#include "optim/accumulation.h"
#include "optim/clip.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "test_nn_helpers.h"
#include "torch_python.h"

using namespace sf;
using namespace sf::optim;
using doctest::Approx;

namespace {

// torch.optim's rules, in double, written out independently of optim/.
struct Reference {
  std::string kind;  // adam | adamw | sgd
  double lr = 0, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0, momentum = 0;
  bool nesterov = false;
  std::vector<double> m, v, buf;
  int t = 0;

  void step(std::vector<double>& p, std::vector<double> g) {
    ++t;
    m.resize(p.size());
    v.resize(p.size());
    for (size_t i = 0; i < p.size(); ++i) {
      if (kind == "sgd") {
        g[i] += wd * p[i];
        if (momentum != 0) {
          buf.resize(p.size());
          buf[i] = t == 1 ? g[i] : momentum * buf[i] + g[i];
          g[i] = nesterov ? g[i] + momentum * buf[i] : buf[i];
        }
        p[i] -= lr * g[i];
        continue;
      }
      if (kind == "adamw") p[i] *= 1 - lr * wd;
      else g[i] += wd * p[i];
      m[i] = b1 * m[i] + (1 - b1) * g[i];
      v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
      double denom = std::sqrt(v[i]) / std::sqrt(1 - std::pow(b2, t)) + eps;
      p[i] -= lr / (1 - std::pow(b1, t)) * m[i] / denom;
    }
  }
};

std::unique_ptr<Optimizer> make(const std::string& kind, NamedTensors params, float lr, float wd,
                                float momentum = 0, bool nesterov = false) {
  if (kind == "sgd") return std::make_unique<Sgd>(params, lr, SgdOptions{momentum, wd, nesterov});
  return std::make_unique<Adam>(params, lr, AdamOptions{0.9f, 0.999f, 1e-8f, wd, kind == "adamw"});
}

// Runs 3 steps of `loss` with ours and the reference, comparing every step.
void check_trajectory(const std::string& kind, std::vector<float> start,
                      const std::function<Tensor(const Tensor&)>& loss,
                      const std::function<std::vector<double>(const std::vector<double>&)>& grad,
                      float lr, float wd, float momentum = 0, bool nesterov = false) {
  Tensor x = Tensor::from(start, {static_cast<int64_t>(start.size())}).set_requires_grad();
  auto opt = make(kind, {{"x", x}}, lr, wd, momentum, nesterov);
  Reference ref;
  ref.kind = kind;
  ref.lr = lr;
  ref.wd = wd;
  ref.momentum = momentum;
  ref.nesterov = nesterov;
  std::vector<double> p(start.begin(), start.end());
  for (int step = 1; step <= 3; ++step) {
    opt->zero_grad();
    loss(x).backward();
    opt->step();
    ref.step(p, grad(p));
    for (size_t i = 0; i < p.size(); ++i) {
      CAPTURE(step);
      CAPTURE(i);
      CHECK(x.data()[i] == Approx(p[i]).epsilon(0).scale(0).epsilon(1e-6));
      CHECK(std::fabs(x.data()[i] - p[i]) <= 1e-6);
    }
  }
}

// f(x) = sum(c_i x_i^2) / 2 with c = [1, 3, 0.5].
Tensor quadratic(const Tensor& x) { return sum(x * x * Tensor::from({1, 3, 0.5f}, {3})) * 0.5f; }
std::vector<double> quadratic_grad(const std::vector<double>& p) {
  return {p[0], 3 * p[1], 0.5 * p[2]};
}

// Rosenbrock: f(a, b) = (1 - a)^2 + 10 (b - a^2)^2.
Tensor rosenbrock(const Tensor& x) {
  Tensor a = slice(x, 0, 0, 1), b = slice(x, 0, 1, 2);
  Tensor u = 1.0f - a, w = b - a * a;
  return sum(u * u + w * w * 10.0f);
}
std::vector<double> rosenbrock_grad(const std::vector<double>& p) {
  double a = p[0], b = p[1];
  return {-2 * (1 - a) - 40 * a * (b - a * a), 20 * (b - a * a)};
}

}  // namespace

TEST_CASE("optim: Adam's first step moves each parameter by lr against its gradient's sign") {
  Tensor x = Tensor::from({1.0f, -2.0f}, {2}).set_requires_grad();
  Adam adam({{"x", x}}, 0.1f);
  sum(x * x).backward();
  adam.step();
  // m = 0.1 g, v = 0.001 g^2: the corrected step is lr * g / (|g| + eps).
  CHECK(x.data()[0] == Approx(0.9f));
  CHECK(x.data()[1] == Approx(-1.9f));
}

TEST_CASE("optim: Adam trajectories match torch.optim.Adam for 3 steps") {
  check_trajectory("adam", {1, -2, 0.5f}, quadratic, quadratic_grad, 0.1f, 0.0f);
  check_trajectory("adam", {1, -2, 0.5f}, quadratic, quadratic_grad, 0.1f, 0.05f);  // L2
  check_trajectory("adam", {-1.2f, 1.0f}, rosenbrock, rosenbrock_grad, 0.05f, 0.0f);
}

// torch.optim itself: tests/torch_optim_fixture.py ran torch.optim.Adam and
// AdamW for 10 steps of fixed gradients (1e-6 to 1e3, zeros, some below eps)
// at a learning rate set at each step, and wrote the parameters after each
// step to tests/torch_optim_fixture.json, with the tolerance it justifies:
// 1e-6 of max(|value|, 1). Measured: 8.6e-8 at most (about one float32 ulp).
static const std::filesystem::path kTorchOptimFixture =
    std::filesystem::path(__FILE__).parent_path() / "torch_optim_fixture.json";

TEST_CASE("optim: Adam and AdamW match torch.optim's parameters after each of 10 steps (a committed fixture)") {
  std::ifstream in(kTorchOptimFixture);
  REQUIRE_MESSAGE(in, "missing ", kTorchOptimFixture.string());
  const nlohmann::json fixture = nlohmann::json::parse(in);
  const double tolerance = fixture.at("tolerance");
  double worst = 0.0;
  int bad = 0;
  for (const nlohmann::json& c : fixture.at("cases")) {
    const std::string name = c.at("name");
    CAPTURE(name);
    NamedTensors params;
    for (const nlohmann::json& shape : c.at("shapes")) {
      Tensor start = Tensor::from(c.at("start")[params.size()].get<std::vector<float>>(), shape.get<Shape>());
      params.push_back({std::to_string(params.size()), start.set_requires_grad()});
    }
    const nlohmann::json& betas = c.at("betas");
    Adam adam(params, 0.0f, AdamOptions{betas[0], betas[1], c.at("eps"), c.at("weight_decay"), c.at("decoupled")});
    for (size_t step = 1; step <= c.at("lr").size(); ++step) {
      CAPTURE(step);
      adam.set_lr(c.at("lr")[step - 1]);
      adam.zero_grad();
      Tensor loss = Tensor::zeros({});
      for (size_t k = 0; k < params.size(); ++k)
        loss = loss + sum(params[k].second * Tensor::from(c.at("grads")[step - 1][k].get<std::vector<float>>(),
                                                          params[k].second.shape()));
      loss.backward();  // each parameter's gradient: the fixture's, exactly
      adam.step();
      for (size_t k = 0; k < params.size(); ++k) {
        const std::vector<double> want = c.at("after")[step - 1][k];
        const std::vector<float> got = params[k].second.to_vector();
        for (size_t i = 0; i < want.size(); ++i) {
          double difference = std::fabs(got[i] - want[i]) / std::max(std::fabs(want[i]), 1.0);
          worst = std::max(worst, difference);
          if (difference > tolerance && ++bad <= 5)
            FAIL_CHECK("parameter ", k, " element ", i, ": ", got[i], ", torch.optim ", want[i]);
        }
      }
    }
  }
  CHECK_MESSAGE(bad == 0, bad, " parameter values differ from torch.optim's");
  MESSAGE("largest difference from torch.optim: ", worst, " of max(|value|, 1) (tolerance ", tolerance, ")");
}

// The fixture cannot drift from its script: with torch at hand, the script
// run now gives the same inputs and, to the tolerance, the same parameters.
TEST_CASE("optim: tests/torch_optim_fixture.json is what its script gives with the torch installed") {
  SF_NEED_TORCH(python);
  testing::check_script_passes(python, "torch_optim_fixture.py", "--check " + kTorchOptimFixture.string());
}

TEST_CASE("optim: AdamW trajectories match torch.optim.AdamW for 3 steps") {
  check_trajectory("adamw", {1, -2, 0.5f}, quadratic, quadratic_grad, 0.1f, 0.1f);
  check_trajectory("adamw", {-1.2f, 1.0f}, rosenbrock, rosenbrock_grad, 0.05f, 0.01f);
}

TEST_CASE("optim: SGD trajectories (plain, momentum, Nesterov, weight decay) for 3 steps") {
  check_trajectory("sgd", {1, -2, 0.5f}, quadratic, quadratic_grad, 0.1f, 0.0f);
  check_trajectory("sgd", {1, -2, 0.5f}, quadratic, quadratic_grad, 0.1f, 0.01f, 0.9f);
  check_trajectory("sgd", {-1.2f, 1.0f}, rosenbrock, rosenbrock_grad, 0.001f, 0.0f, 0.9f, true);
}

TEST_CASE("optim: SGD by hand on f = x^2 with momentum 0.5") {
  // g = 2x. x0 = 1: g1 = 2, buf1 = 2, x1 = 1 - 0.1*2 = 0.8;
  // g2 = 1.6, buf2 = 0.5*2 + 1.6 = 2.6, x2 = 0.8 - 0.26 = 0.54.
  Tensor x = Tensor::from({1.0f}, {1}).set_requires_grad();
  Sgd sgd({{"x", x}}, 0.1f, {.momentum = 0.5f});
  for (float expect : {0.8f, 0.54f}) {
    sgd.zero_grad();
    sum(x * x).backward();
    sgd.step();
    CHECK(x.data()[0] == Approx(expect));
  }
}

TEST_CASE("optim: an MLP learns XOR with each optimizer") {
  for (std::string kind : {"adam", "adamw", "sgd"}) {
    CAPTURE(kind);
    Rng init(1);
    nn::Linear hidden(2, 8, init), out(8, 2, init);
    NamedTensors params = {{"hidden.weight", hidden.weight}, {"hidden.bias", hidden.bias},
                           {"out.weight", out.weight},       {"out.bias", out.bias}};
    auto opt = kind == "sgd" ? make(kind, params, 0.5f, 0.0f, 0.9f) : make(kind, params, 0.05f, 0.01f);
    Tensor x = Tensor::from({0, 0, 0, 1, 1, 0, 1, 1}, {4, 2});
    Tensor y = Tensor::from_ints({0, 1, 1, 0}, {4});
    for (int step = 0; step < 300; ++step) {
      opt->zero_grad();
      cross_entropy(out.forward(tanh(hidden.forward(x))), y).backward();
      opt->step();
    }
    NoGradGuard no_grad;
    CHECK(argmax(out.forward(tanh(hidden.forward(x)))).to_int_vector() == y.to_int_vector());
  }
}

TEST_CASE("optim: gradient clipping keeps the direction; small norms are untouched") {
  Tensor a = Tensor::zeros({2}).set_requires_grad(), b = Tensor::zeros({1}).set_requires_grad();
  NamedTensors params = {{"a", a}, {"b", b}};
  // Gradients [6, 0] and [8]: norm 10.
  (sum(a * Tensor::from({6, 0}, {2})) + sum(b * 8.0f)).backward();
  CHECK(grad_norm(params) == Approx(10.0f));
  CHECK(clip_grad_norm(params, 1.0f) == Approx(10.0f));
  CHECK(a.grad().data()[0] == Approx(0.6f).epsilon(1e-5));
  CHECK(a.grad().data()[1] == 0.0f);
  CHECK(b.grad().data()[0] == Approx(0.8f).epsilon(1e-5));
  CHECK(grad_norm(params) == Approx(1.0f).epsilon(1e-5));
  // Below the bound nothing changes, bit for bit.
  std::vector<float> before = a.grad().to_vector();
  clip_grad_norm(params, 5.0f);
  CHECK(a.grad().to_vector() == before);
}

TEST_CASE("optim: the squared norm in parts equals it taken whole, to the bit, whatever order the parts come in") {
  // 200 gradients of square 1, then one of square 2^60, whose spacing in a
  // double is 256: in parameter order the small ones add up first and count
  // (2^60 + 256); added after the big one, each would be rounded away.
  NamedTensors params;
  for (int i = 0; i < 200; ++i) {
    Tensor p = Tensor::zeros({1});
    p.set_grad(Tensor::from({1.0f}, {1}));
    params.emplace_back("small " + std::to_string(i), p);
  }
  Tensor big = Tensor::zeros({2});
  big.set_grad(Tensor::from({std::ldexp(1.0f, 30), 0.0f}, {2}));
  params.emplace_back("big", big);
  params.emplace_back("no gradient", Tensor::zeros({3}));
  std::vector<Slice> whole;
  for (const auto& [name, p] : params) whole.push_back({0, p.numel()});
  const double expected = std::ldexp(1.0, 60) + 256.0;
  REQUIRE(grad_squares(params, whole) == expected);
  GradSquares squares(params, whole);
  squares.add(std::vector<size_t>{201, 200});  // the last parameters first, as a rank's first bucket holds them
  std::vector<size_t> rest(200);
  std::iota(rest.rbegin(), rest.rend(), size_t{0});
  squares.add(std::span(rest).first(150));
  squares.add(std::span(rest).subspan(150));
  CHECK(squares.total() == expected);
  CHECK(squares.elements() == 202);  // the parameter without a gradient has none to square
}

TEST_CASE("optim: clipping in slices: the slices' squares add up to the squared norm; the coefficient clips") {
  Tensor a = Tensor::zeros({2}).set_requires_grad(), b = Tensor::zeros({1}).set_requires_grad();
  NamedTensors params = {{"a", a}, {"b", b}};
  (sum(a * Tensor::from({6, 0}, {2})) + sum(b * 8.0f)).backward();
  // Two ranks' slices: a[0] | a[1], b.
  std::vector<Slice> first = {{0, 1}, {0, 0}}, second = {{1, 2}, {0, 1}};
  CHECK(grad_squares(params, first) == Approx(36.0));
  CHECK(grad_squares(params, second) == Approx(64.0));
  CHECK(clip_coefficient(10.0f, 1.0f) == Approx(0.1f).epsilon(1e-5));
  CHECK(clip_coefficient(0.5f, 1.0f) == 1.0f);  // under the limit: unclipped
  CHECK(clip_coefficient(std::nanf(""), 1.0f) == 1.0f);
  CHECK(clip_coefficient(INFINITY, 1.0f) == 1.0f);
}

// The trainer clips inside the optimizer's update (step(grad_scale)) rather
// than scaling the gradients first: the same parameters and state to the
// bit, for Adam, AdamW and SGD with momentum, on the CPU's kernels.
TEST_CASE("optim: a step with clipping's coefficient equals clip_grad_norm and a plain step, bit for bit") {
  auto make = [] {
    Rng rng(3);
    Tensor w = uniform({10, 100}, -2.0f, 2.0f, rng).set_requires_grad();
    Tensor b = uniform({37}, -2.0f, 2.0f, rng).set_requires_grad();
    return NamedTensors{{"w", w}, {"b", b}};
  };
  auto backward = [](const NamedTensors& params, int k) {
    Rng rng(10 + k);
    (sum(params[0].second * uniform({10, 100}, -3.0f, 3.0f, rng)) +
     sum(params[1].second * uniform({37}, -5.0f, 5.0f, rng)))
        .backward();
  };
  for (int kind = 0; kind < 3; ++kind) {
    NamedTensors clipped_first = make(), scaled = make();
    auto optimizer = [kind](const NamedTensors& params) -> std::unique_ptr<Optimizer> {
      if (kind == 2) return std::make_unique<Sgd>(params, 0.1f, SgdOptions{.momentum = 0.9f, .weight_decay = 0.01f});
      return std::make_unique<Adam>(params, 0.01f, AdamOptions{.weight_decay = 0.01f, .decoupled = kind == 1});
    };
    std::unique_ptr<Optimizer> a = optimizer(clipped_first), b = optimizer(scaled);
    for (int k = 0; k < 3; ++k) {
      backward(clipped_first, k);
      backward(scaled, k);
      const float norm = clip_grad_norm(clipped_first, 1.0f);
      const float coef = clip_coefficient(grad_norm(scaled), 1.0f);
      REQUIRE(coef < 0.5f);  // really clipped
      CHECK(grad_norm(scaled) == norm);
      a->step();
      b->step(coef);
      a->zero_grad();
      b->zero_grad();
    }
    for (size_t i = 0; i < 2; ++i) {
      CHECK(clipped_first[i].second.to_vector() == scaled[i].second.to_vector());
      for (const std::string& name : a->state_names())
        CHECK(a->find_state(i, name)->to_vector() == b->find_state(i, name)->to_vector());
    }
  }
}

TEST_CASE("optim: sharding an optimizer that holds state keeps its owned slices; they go on as the whole does") {
  auto make = [] {
    Tensor w = Tensor::from({0.5f, -1.0f, 2.0f, 0.25f, -0.75f}, {5}).set_requires_grad();
    return NamedTensors{{"w", w}};
  };
  NamedTensors whole_params = make(), sharded_params = make();
  Adam whole(whole_params, 0.1f), sharded(sharded_params, 0.1f);
  auto step = [](Optimizer& opt, int k) {
    opt.zero_grad();
    const Tensor& w = opt.params()[0].second;
    sum(w * w * static_cast<float>(k + 1)).backward();
    opt.step();
  };
  for (int k = 0; k < 2; ++k) {
    step(whole, k);
    step(sharded, k);
  }
  sharded.shard({{1, 4}});
  CHECK(sharded.state_bytes() == 2 * 3 * 4);  // exp_avg and exp_avg_sq of 3 elements
  CHECK(sharded.find_state(0, "exp_avg")->to_vector() ==
        std::vector<float>(whole.find_state(0, "exp_avg")->data() + 1, whole.find_state(0, "exp_avg")->data() + 4));
  step(whole, 2);
  step(sharded, 2);
  const float *w = whole_params[0].second.data(), *s = sharded_params[0].second.data();
  for (int i = 1; i < 4; ++i) CHECK(s[i] == w[i]);  // the owned elements, bit for bit
  CHECK(s[0] != w[0]);  // the others are another rank's to update
}

TEST_CASE("optim: schedules: noam, cosine after a linear warmup, constant") {
  ScheduleOptions noam{Schedule::Noam, 2.0f, 4000, 100000, 512};
  // Before warmup ends the rate grows linearly; after, as step^-0.5.
  CHECK(learning_rate(noam, 1) == Approx(2.0 / std::sqrt(512.0) * std::pow(4000.0, -1.5)));
  CHECK(learning_rate(noam, 4000) == Approx(2.0 / std::sqrt(512.0) / std::sqrt(4000.0)));
  CHECK(learning_rate(noam, 16000) == Approx(2.0 / std::sqrt(512.0) / std::sqrt(16000.0)));
  ScheduleOptions cosine{Schedule::Cosine, 0.1f, 10, 110, 512};
  CHECK(learning_rate(cosine, 5) == Approx(0.05f));
  CHECK(learning_rate(cosine, 10) == Approx(0.1f));
  CHECK(learning_rate(cosine, 60) == Approx(0.05f));
  CHECK(learning_rate(cosine, 110) == Approx(0.0f).scale(1));
  CHECK(learning_rate({Schedule::Constant, 0.3f}, 7) == 0.3f);
  CHECK(parse_schedule("noam") == Schedule::Noam);
  CHECK_THROWS_AS(parse_schedule("linear"), InternalError);
}

TEST_CASE("optim: gradient accumulation steps every k batches and at the epoch's end") {
  GradAccumulation acc(3);
  std::vector<bool> due;
  std::vector<float> scales;
  for (int b = 0; b < 8; ++b) {  // 8 batches: steps of 3, 3 and 2
    scales.push_back(acc.loss_scale(8 - b));
    due.push_back(acc.step_due(b == 7));
  }
  CHECK(due == std::vector<bool>{false, false, true, false, false, true, false, true});
  // The last step's two batches are each half of it: a mean, as large as the others.
  CHECK(scales == std::vector<float>{1.0f / 3, 1.0f / 3, 1.0f / 3, 1.0f / 3, 1.0f / 3, 1.0f / 3, 0.5f, 0.5f});
  CHECK_THROWS_AS(GradAccumulation(0), InternalError);
}

// The batch loss is a mean over label tokens, so k micro-batches with the
// same number of label tokens each, scaled by 1/k and accumulated, give the
// gradient of their union, one batch k times larger. Only the order of float
// sums differs: gradients agree to 1e-5 of the largest, and after one SGD step
// the weights to 1e-6.
TEST_CASE("optim: 4 accumulated micro-batches of 2 sentences equal one batch of 8: gradients, then an SGD step") {
  // Targets of 2 to 6 tokens, each pair (a micro-batch) 8 in all, so 10 labels with the [EOS]s.
  const std::vector<int> lengths = {3, 5, 4, 4, 5, 3, 2, 6};
  Rng rng(3);
  std::vector<std::vector<int32_t>> sources(8), targets(8);
  for (int i = 0; i < 8; ++i) {
    for (int t = 0; t < 5; ++t) sources[i].push_back(4 + static_cast<int32_t>(rng.below(9)));
    for (int t = 0; t < lengths[i]; ++t) targets[i].push_back(4 + static_cast<int32_t>(rng.below(7)));
  }
  nn::TransformerConfig config = testing::tiny_config();
  config.dropout = 0.0f;
  auto whole = testing::tiny_model(config, 5), split = testing::tiny_model(config, 5);
  testing::batch_loss(*whole, testing::make_batch(sources, targets, 7)).backward();
  GradAccumulation accumulation(4);
  for (size_t m = 0; m < 4; ++m) {
    auto pick = [&](const auto& rows) { return std::vector{rows[2 * m], rows[2 * m + 1]}; };
    Tensor loss = testing::batch_loss(*split, testing::make_batch(pick(sources), pick(targets), 7));
    (loss * accumulation.loss_scale(/*batches_left=*/4 - static_cast<int64_t>(m))).backward();
    CHECK(accumulation.step_due(false) == (m == 3));
  }
  NamedTensors a = whole->named_parameters(), b = split->named_parameters();
  // The largest difference over all parameters (or their gradients), and the largest value.
  auto compare = [&](bool gradients) -> std::pair<float, float> {
    float difference = 0, largest = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      std::vector<float> x = (gradients ? a[i].second.grad() : a[i].second).to_vector();
      std::vector<float> y = (gradients ? b[i].second.grad() : b[i].second).to_vector();
      for (size_t j = 0; j < x.size(); ++j) {
        difference = std::max(difference, std::fabs(x[j] - y[j]));
        largest = std::max(largest, std::fabs(x[j]));
      }
    }
    return std::pair{difference, largest};
  };
  auto [gradient_difference, largest_gradient] = compare(true);
  CHECK(largest_gradient > 0.1f);
  CHECK(gradient_difference <= 1e-5f * largest_gradient);
  Sgd(a, 0.1f).step();
  Sgd(b, 0.1f).step();
  CHECK(compare(false).first <= 1e-6f);
}

TEST_CASE("optim: 10 steps straight equal 5, save, load into a fresh optimizer, 5 more") {
  for (std::string kind : {"adam", "adamw", "sgd"}) {
    CAPTURE(kind);
    auto run = [&](bool resume) {
      Rng init(4);
      nn::Linear layer(3, 2, init);
      NamedTensors params = {{"layer.weight", layer.weight}, {"layer.bias", layer.bias}};
      Tensor x = uniform({5, 3}, -1, 1, init);
      Tensor y = Tensor::from_ints({0, 1, 1, 0, 1}, {5});
      auto opt = make(kind, params, 0.05f, 0.01f, 0.9f, true);
      std::string path = (std::filesystem::temp_directory_path() / ("sf_optim_" + kind + ".safetensors")).string();
      for (int step = 0; step < 10; ++step) {
        if (resume && step == 5) {
          opt->save(path);
          opt = make(kind, params, 0.05f, 0.01f, 0.9f, true);
          opt->load(path);
          CHECK(opt->steps() == 5);
        }
        opt->zero_grad();
        cross_entropy(layer.forward(x), y).backward();
        opt->step();
      }
      std::remove(path.c_str());
      return layer.weight.to_vector();
    };
    CHECK(run(false) == run(true));
  }
}

TEST_CASE("optim: loading state for another optimizer or model is a clear error") {
  Tensor x = Tensor::ones({2}).set_requires_grad(), z = Tensor::ones({3}).set_requires_grad();
  Adam adam({{"x", x}}, 0.1f);
  sum(x * x).backward();
  adam.step();
  std::string path = (std::filesystem::temp_directory_path() / "sf_optim_err.safetensors").string();
  adam.save(path);
  Sgd sgd({{"x", x}}, 0.1f, {.momentum = 0.9f});
  CHECK_THROWS_WITH_AS(sgd.load(path), doctest::Contains("is for 'adam', not 'sgd'"), Error);
  Adam other({{"x", z}}, 0.1f);
  CHECK_THROWS_WITH_AS(other.load(path), doctest::Contains("exp_avg.x has shape [2]"), Error);
  Adam renamed({{"y", x}}, 0.1f);
  CHECK_THROWS_WITH_AS(renamed.load(path), doctest::Contains("does not have"), Error);
  // The moments in bf16: optimizer state is float32 in every precision.
  OptimizerState rounded = adam.state_dict();
  for (auto& [name, t] : rounded.tensors) t = to_dtype(t, DType::BF16);
  CHECK_THROWS_WITH_AS(adam.load_state_dict(rounded, path), doctest::Contains("exp_avg.x is bfloat16, expected float32"),
                       Error);
  std::remove(path.c_str());
}
