// The fast kernels of the loss and the optimizer step: a gradient norm's dot
// product, Adam's and SGD's updates, and cross-entropy with label smoothing.
// Tested against scalar.cpp in tests/test_kernels.cpp.
#include <algorithm>
#include <cmath>
#include <vector>

#include "fast.h"

namespace sf::kernels::fast {

// Float partial sums per block of 1024, summed in double: fast, and accurate
// enough for a norm. Blocks are fixed, so the result does not depend on threads.
void dot(const float* a, const float* b, int64_t n, float* out) {
  constexpr int64_t kBlock = 1024;
  int64_t blocks = (n + kBlock - 1) / kBlock;
  std::vector<double> partial(blocks);
  parallel_for(0, blocks, kGrainElements / kBlock, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i)
      partial[i] = dot_row(a + i * kBlock, b + i * kBlock, std::min(kBlock, n - i * kBlock));
  });
  double total = 0.0;
  for (double p : partial) total += p;
  out[0] = static_cast<float>(total);
}

// --- optimizer updates -------------------------------------------------------------------

void adam_step(float* p, const float* g, float g_scale, float* m, float* v, int64_t n, float step_size,
               float b1, float b2, float eps, float sqrt_bc2, float l2, float decay) {
  parallel_for_vectors(n, [=](int64_t b, int64_t e) {
    Vec vb1 = Vec::set1(b1), vb2 = Vec::set1(b2), c1 = Vec::set1(1.0f - b1),
        c2 = Vec::set1(1.0f - b2), keep = Vec::set1(1.0f - decay), vl2 = Vec::set1(l2),
        veps = Vec::set1(eps), vbc = Vec::set1(1.0f / sqrt_bc2), vstep = Vec::set1(step_size),
        vscale = Vec::set1(g_scale);
    int64_t i = b;
    for (; i + W <= e; i += W) {
      Vec pi = Vec::load(p + i) * keep;
      Vec grad = fma(vl2, pi, Vec::load(g + i) * vscale);
      Vec mi = vb1 * Vec::load(m + i) + c1 * grad;
      Vec vi = vb2 * Vec::load(v + i) + c2 * grad * grad;
      mi.store(m + i);
      vi.store(v + i);
      (pi - vstep * mi / (sqrt(vi) * vbc + veps)).store(p + i);
    }
    if (i < e)
      scalar_table().adam_step(p + i, g + i, g_scale, m + i, v + i, e - i, step_size, b1, b2, eps,
                               sqrt_bc2, l2, decay);
  });
}

void sgd_step(float* p, const float* g, float g_scale, float* buf, int64_t n, float lr, float momentum,
              float l2, bool nesterov, bool first) {
  parallel_for(0, n, kGrainElements, [=](int64_t b, int64_t e) {
    scalar_table().sgd_step(p + b, g + b, g_scale, buf ? buf + b : nullptr, e - b, lr, momentum, l2,
                            nesterov, first);
  });
}

// --- cross-entropy ---------------------------------------------------------------------

void cross_entropy(const float* logits, const int32_t* targets, int64_t rows, int64_t cols,
                   int32_t ignore_index, float eps, float* row_loss, float* row_counted,
                   float* log_probs) {
  for_rows(rows, cols, [&](int64_t r) {
    float* lp = log_probs + r * cols;
    log_softmax_row(logits + r * cols, lp, cols);
    row_counted[r] = targets[r] == ignore_index ? 0.0f : 1.0f;
    if (targets[r] == ignore_index) {
      row_loss[r] = 0.0f;
      return;
    }
    if (targets[r] < 0 || targets[r] >= cols) {
      row_loss[r] = NAN;
      return;
    }
    float mean_nll = -row_sum(lp, cols) / static_cast<float>(cols);
    row_loss[r] = (1.0f - eps) * -lp[targets[r]] + eps * mean_nll;
  });
}

void cross_entropy_backward(const float* log_probs, const int32_t* targets, int64_t rows,
                            int64_t cols, int32_t ignore_index, float eps,
                            const float* scale_of_loss, float* dlogits) {
  const float scale = *scale_of_loss;
  for_rows(rows, cols, [&](int64_t r) {
    float* d = dlogits + r * cols;
    if (targets[r] == ignore_index) {
      std::fill(d, d + cols, 0.0f);
      return;
    }
    const float* lp = log_probs + r * cols;
    Vec vs = Vec::set1(scale), off = Vec::set1(scale * eps / static_cast<float>(cols));
    int64_t i = 0;
    for (; i + W <= cols; i += W) (vs * simd::exp(Vec::load(lp + i)) - off).store(d + i);
    for (; i < cols; ++i) d[i] = scale * (std::exp(lp[i]) - eps / static_cast<float>(cols));
    if (targets[r] >= 0 && targets[r] < cols) d[targets[r]] -= scale * (1.0f - eps);
  });
}

}  // namespace sf::kernels::fast
