// The reference kernels: plain loops, written for clarity. Every faster kernel
// is tested against these.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "gemm.h"
#include "kernels.h"

namespace sf::kernels::scalar {

// Visits every element of `rows` in row-major order, calling f(i, offset_a,
// offset_b): its index and its offsets in the two operands.
template <class F>
void for_each_element(const Rows& rows, F f) {
  for (int64_t r = 0; r < rows.count; ++r) {
    int64_t a = rows.offset(0, r), b = rows.offset(1, r);
    for (int64_t c = 0; c < rows.cols; ++c)
      f(r * rows.cols + c, a + c * rows.col_strides[0], b + c * rows.col_strides[1]);
  }
}

float apply(Binary op, float x, float y) {
  switch (op) {
    case Binary::Add: return x + y;
    case Binary::Sub: return x - y;
    case Binary::Mul: return x * y;
    case Binary::Div: return x / y;
  }
  return 0.0f;
}

template <class T>
int32_t holds(Predicate op, T x, T y) {
  switch (op) {
    case Predicate::Eq: return x == y;
    case Predicate::Ne: return x != y;
    case Predicate::Lt: return x < y;
    case Predicate::Le: return x <= y;
    case Predicate::Gt: return x > y;
    case Predicate::Ge: return x >= y;
    case Predicate::And: return x != T(0) && y != T(0);
    case Predicate::Or: return x != T(0) || y != T(0);
  }
  return 0;
}

void binary(Binary op, const float* a, const float* b, float* out, const Rows& rows) {
  for_each_element(rows, [&](int64_t i, int64_t oa, int64_t ob) { out[i] = apply(op, a[oa], b[ob]); });
}

void predicate(Predicate op, const float* a, const float* b, int32_t* out, const Rows& rows) {
  for_each_element(rows, [&](int64_t i, int64_t oa, int64_t ob) { out[i] = holds(op, a[oa], b[ob]); });
}

void predicate_int(Predicate op, const int32_t* a, const int32_t* b, int32_t* out, const Rows& rows) {
  for_each_element(rows, [&](int64_t i, int64_t oa, int64_t ob) { out[i] = holds(op, a[oa], b[ob]); });
}

void fill_where(const float* x, const int32_t* where, float value, float* out, const Rows& rows) {
  for_each_element(rows, [&](int64_t i, int64_t ox, int64_t ow) { out[i] = where[ow] != 0 ? value : x[ox]; });
}

void unary(Unary op, const float* x, float* y, int64_t n, float s) {
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i];
    switch (op) {
      case Unary::Neg: y[i] = -v; break;
      case Unary::Exp: y[i] = std::exp(v); break;
      case Unary::Log: y[i] = std::log(v); break;
      case Unary::Sqrt: y[i] = std::sqrt(v); break;
      case Unary::Relu: y[i] = v > 0.0f || std::isnan(v) ? v : 0.0f; break;  // NaN stays, as torch.relu
      case Unary::Tanh: y[i] = std::tanh(v); break;
      case Unary::Sigmoid: y[i] = 1.0f / (1.0f + std::exp(-v)); break;
      case Unary::AddScalar: y[i] = v + s; break;
      case Unary::MulScalar: y[i] = v * s; break;
      case Unary::PowScalar: y[i] = std::pow(v, s); break;
      case Unary::RSubScalar: y[i] = s - v; break;
      case Unary::RDivScalar: y[i] = s / v; break;
      case Unary::RoundBf16: y[i] = round_to_bf16(v); break;
#define SF_FORMULA_CASE(code, function) \
  case Unary::code: y[i] = function(v); break;
        SF_FORMULA_CODES(SF_FORMULA_CASE)
#undef SF_FORMULA_CASE
    }
  }
}

void sum_to(const float* x, float* out, const Rows& rows) {
  // out is overwritten: zero each element x adds into, then add each x in.
  for_each_element(rows, [&](int64_t, int64_t, int64_t o) { out[o] = 0.0f; });
  for_each_element(rows, [&](int64_t, int64_t i, int64_t o) { out[o] += x[i]; });
}

// A NaN wins over every number (the first NaN, if several), as torch.max.
bool beats(float candidate, float best) {
  return candidate > best || (std::isnan(candidate) && !std::isnan(best));
}

void max_axis(const float* x, int64_t outer, int64_t n, int64_t inner, float* out, int32_t* arg) {
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < inner; ++j) {
      int64_t best = 0;
      for (int64_t i = 1; i < n; ++i)
        if (beats(x[(o * n + i) * inner + j], x[(o * n + best) * inner + j])) best = i;
      out[o * inner + j] = x[(o * n + best) * inner + j];
      if (arg) arg[o * inner + j] = static_cast<int32_t>(best);
    }
}

// Subtracting the row max keeps exp() from overflowing on large logits. A NaN
// anywhere in a row makes the whole row NaN (through x - max or the sum), as in
// PyTorch; so does +inf (inf - inf), and so does a row of -inf only.
void softmax(const float* x, float* y, int64_t rows, int64_t cols) {
  if (cols == 0) return;  // (max_element would read past an empty row)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    float mx = *std::max_element(xr, xr + cols);
    float total = 0.0f;
    for (int64_t c = 0; c < cols; ++c) total += (yr[c] = std::exp(xr[c] - mx));
    for (int64_t c = 0; c < cols; ++c) yr[c] /= total;
  }
}

// log_softmax(x) = x - max - log(sum(exp(x - max))).
void log_softmax(const float* x, float* y, int64_t rows, int64_t cols) {
  if (cols == 0) return;
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    float mx = *std::max_element(xr, xr + cols);
    float total = 0.0f;
    for (int64_t c = 0; c < cols; ++c) total += std::exp(xr[c] - mx);
    float shift = mx + std::log(total);
    for (int64_t c = 0; c < cols; ++c) y[r * cols + c] = xr[c] - shift;
  }
}

void softmax_backward(const float* y, const float* dy, float* dx, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float *yr = y + r * cols, *gr = dy + r * cols;
    float dot = 0.0f;
    for (int64_t c = 0; c < cols; ++c) dot += gr[c] * yr[c];
    for (int64_t c = 0; c < cols; ++c) dx[r * cols + c] = yr[c] * (gr[c] - dot);
  }
}

void log_softmax_backward(const float* y, const float* dy, float* dx, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float *yr = y + r * cols, *gr = dy + r * cols;
    float total = 0.0f;
    for (int64_t c = 0; c < cols; ++c) total += gr[c];
    for (int64_t c = 0; c < cols; ++c) dx[r * cols + c] = gr[c] - std::exp(yr[c]) * total;
  }
}

void topk(const float* x, int64_t rows, int64_t cols, int64_t k, float* values, int32_t* indices) {
  std::vector<int32_t> order(cols);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t i, int32_t j) {
      return xr[i] > xr[j] || (xr[i] == xr[j] && i < j);
    });
    for (int64_t i = 0; i < k; ++i) {
      values[r * k + i] = xr[order[i]];
      indices[r * k + i] = order[i];
    }
  }
}

void copy_rows(const void* src, int64_t src_stride, void* dst, int64_t dst_stride, int64_t rows,
               int64_t row_bytes) {
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(static_cast<char*>(dst) + r * dst_stride,
                static_cast<const char*>(src) + r * src_stride, row_bytes);
}

void copy_strided(const float* x, float* y, const Rows& rows) {
  for_each_element(rows, [&](int64_t i, int64_t ox, int64_t) { y[i] = x[ox]; });
}

void gather_rows(const float* table, const int32_t* ids, int64_t n, int64_t dim, float* out) {
  for (int64_t i = 0; i < n; ++i) std::memcpy(out + i * dim, table + ids[i] * dim, dim * 4);
}

void scatter_add_rows(const float* grad_out, const int32_t* ids, int64_t n, int64_t dim,
                      float* grad_table) {
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < dim; ++j) grad_table[ids[i] * dim + j] += grad_out[i * dim + j];
}

void cross_entropy(const float* logits, const int32_t* targets, int64_t rows, int64_t cols,
                   int32_t ignore_index, float eps, float* row_loss, float* row_counted,
                   float* log_probs) {
  log_softmax(logits, log_probs, rows, cols);
  for (int64_t r = 0; r < rows; ++r) {
    row_counted[r] = targets[r] == ignore_index ? 0.0f : 1.0f;
    if (targets[r] == ignore_index) {
      row_loss[r] = 0.0f;
      continue;
    }
    if (targets[r] < 0 || targets[r] >= cols) {
      row_loss[r] = NAN;
      continue;
    }
    const float* lp = log_probs + r * cols;
    float mean_nll = 0.0f;
    for (int64_t c = 0; c < cols; ++c) mean_nll -= lp[c];
    mean_nll /= static_cast<float>(cols);
    row_loss[r] = (1.0f - eps) * -lp[targets[r]] + eps * mean_nll;
  }
}

void cross_entropy_backward(const float* log_probs, const int32_t* targets, int64_t rows,
                            int64_t cols, int32_t ignore_index, float eps,
                            const float* scale_of_loss, float* dlogits) {
  const float scale = *scale_of_loss;
  for (int64_t r = 0; r < rows; ++r) {
    float* d = dlogits + r * cols;
    if (targets[r] == ignore_index) {
      std::fill(d, d + cols, 0.0f);
      continue;
    }
    const float* lp = log_probs + r * cols;
    for (int64_t c = 0; c < cols; ++c) d[c] = scale * (std::exp(lp[c]) - eps / cols);
    if (targets[r] >= 0 && targets[r] < cols) d[targets[r]] -= scale * (1.0f - eps);
  }
}

void masked_softmax(const float* x, const int32_t* keep, const Rows& rows, float scale, float* y) {
  const int64_t cols = rows.cols;
  std::vector<float> scores(cols);
  for (int64_t r = 0; r < rows.count; ++r) {
    const int32_t* k = keep ? keep + rows.offset(0, r) : nullptr;
    for (int64_t c = 0; c < cols; ++c)
      scores[c] = !k || k[c * rows.col_strides[0]] ? scale * x[r * cols + c] : kHiddenScore;
    softmax(scores.data(), y + r * cols, 1, cols);
  }
}

void masked_softmax_backward(const float* y, const float* dy, const int32_t* keep, const Rows& rows, float scale,
                             float* dx) {
  const int64_t cols = rows.cols;
  softmax_backward(y, dy, dx, rows.count, cols);
  for (int64_t r = 0; r < rows.count; ++r) {
    const int32_t* k = keep ? keep + rows.offset(0, r) : nullptr;
    for (int64_t c = 0; c < cols; ++c)
      dx[r * cols + c] = !k || k[c * rows.col_strides[0]] ? scale * dx[r * cols + c] : 0.0f;
  }
}

void layer_norm(const float* x, const float* alpha, const float* bias, int64_t rows, int64_t cols,
                float eps, float* y, float* mean, float* std) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    float mu = 0.0f, ss = 0.0f;
    for (int64_t c = 0; c < cols; ++c) mu += xr[c];
    mu /= static_cast<float>(cols);
    for (int64_t c = 0; c < cols; ++c) ss += (xr[c] - mu) * (xr[c] - mu);
    float s = std::sqrt(ss / static_cast<float>(cols - 1));
    for (int64_t c = 0; c < cols; ++c)
      y[r * cols + c] = alpha[c] * (xr[c] - mu) / (s + eps) + bias[c];
    mean[r] = mu;
    std[r] = s;
  }
}

void layer_norm_backward(const float* x, const float* alpha, const float* mean, const float* std,
                         const float* dy, int64_t rows, int64_t cols, float eps, float* dx,
                         float* dalpha, float* dbias) {
  std::fill(dalpha, dalpha + cols, 0.0f);
  std::fill(dbias, dbias + cols, 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = x + r * cols, *gr = dy + r * cols;
    float inv = 1.0f / (std[r] + eps);
    float mean_g = 0.0f, dot = 0.0f;
    for (int64_t c = 0; c < cols; ++c) {
      float xhat = (xr[c] - mean[r]) * inv, g = gr[c] * alpha[c];
      mean_g += g;
      dot += g * xhat;
      dalpha[c] += gr[c] * xhat;
      dbias[c] += gr[c];
    }
    mean_g /= static_cast<float>(cols);
    // A constant row has std 0: its xhat is 0, and so is the second term.
    float k = std[r] > 0.0f ? dot / (static_cast<float>(cols - 1) * std[r]) : 0.0f;
    for (int64_t c = 0; c < cols; ++c) {
      float xhat = (xr[c] - mean[r]) * inv;
      dx[r * cols + c] = (gr[c] * alpha[c] - mean_g) * inv - xhat * k;
    }
  }
}

void bias_relu(const float* x, const float* bias, int64_t rows, int64_t cols, float* y) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) y[r * cols + c] = std::max(x[r * cols + c] + bias[c], 0.0f);
}

void relu_backward(const float* y, const float* dy, float* dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

// A dropped element is x - x: +0 (as the OpenCL kernel, bit for bit), but NaN
// where x is NaN or infinite, as PyTorch's x * mask.
void dropout(const float* x, float* y, int64_t n, float scale, uint32_t seed, uint32_t threshold) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = dropout_keeps(seed, static_cast<uint32_t>(i), threshold) ? x[i] * scale : x[i] - x[i];
}

void dropout_add(const float* x, const float* y, float* out, int64_t n, float scale, uint32_t seed,
                 uint32_t threshold) {
  dropout(y, out, n, scale, seed, threshold);
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] + out[i];
}

void dot(const float* a, const float* b, int64_t n, float* out) {
  double total = 0.0;
  for (int64_t i = 0; i < n; ++i) total += double(a[i]) * b[i];
  out[0] = static_cast<float>(total);
}

void adam_step(float* p, const float* g, float g_scale, float* m, float* v, int64_t n, float step_size,
               float b1, float b2, float eps, float sqrt_bc2, float l2, float decay) {
  for (int64_t i = 0; i < n; ++i) {
    p[i] *= 1.0f - decay;
    float grad = std::fma(l2, p[i], g[i] * g_scale);  // g_scale g + l2 p, rounded as the vectors round it
    m[i] = b1 * m[i] + (1.0f - b1) * grad;
    v[i] = b2 * v[i] + (1.0f - b2) * grad * grad;
    p[i] -= step_size * m[i] / (std::sqrt(v[i]) / sqrt_bc2 + eps);
  }
}

void sgd_step(float* p, const float* g, float g_scale, float* buf, int64_t n, float lr, float momentum,
              float l2, bool nesterov, bool first) {
  for (int64_t i = 0; i < n; ++i) {
    float grad = std::fma(l2, p[i], g[i] * g_scale);  // g_scale g + l2 p
    if (buf) {
      buf[i] = first ? grad : momentum * buf[i] + grad;
      grad = nesterov ? grad + momentum * buf[i] : buf[i];
    }
    p[i] -= lr * grad;
  }
}

void float_to_bf16(const float* x, bf16* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = to_bf16(x[i]);
}

void bf16_to_float(const bf16* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = to_float(x[i]);
}

// The reference: the plain triple loop that defines the result, for float32
// operands, bf16 ones (each widened to float32 exactly) and float32 ones
// rounded to bf16, each element read through `value`.
namespace {

float as_float(float x) { return x; }
float as_float(bf16 x) { return to_float(x); }

template <class T, class Value>
void reference_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const T* a,
                    int64_t lda, int64_t stride_a, const T* b, int64_t ldb, int64_t stride_b, float beta, float* c,
                    int64_t ldc, int64_t stride_c, int64_t batch, Value value) {
  for (int64_t e = 0; e < batch; ++e) {
    const T* ae = a + e * stride_a;
    const T* be = b + e * stride_b;
    float* ce = c + e * stride_c;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        // Accumulate in double so the reference is a trustworthy yardstick.
        double sum = 0.0;
        for (int64_t p = 0; p < k; ++p) {
          const float x = value(trans_a ? ae[p * lda + i] : ae[i * lda + p]);
          const float y = value(trans_b ? be[j * ldb + p] : be[p * ldb + j]);
          sum += static_cast<double>(x) * y;
        }
        float& out = ce[i * ldc + j];
        out = beta == 0.0f ? alpha * static_cast<float>(sum)
                           : alpha * static_cast<float>(sum) + beta * out;
      }
  }
}

}  // namespace

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, int64_t stride_a, const float* b, int64_t ldb, int64_t stride_b, float beta,
          float* c, int64_t ldc, int64_t stride_c, int64_t batch) {
  reference_gemm(trans_a, trans_b, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta, c, ldc, stride_c,
                 batch, [](auto x) { return as_float(x); });
}

void gemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const bf16* a,
               int64_t lda, int64_t stride_a, const bf16* b, int64_t ldb, int64_t stride_b, float beta,
               float* c, int64_t ldc, int64_t stride_c, int64_t batch) {
  reference_gemm(trans_a, trans_b, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta, c, ldc, stride_c,
                 batch, [](auto x) { return as_float(x); });
}

void gemm_rounded_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                       const float* a, int64_t lda, int64_t stride_a, const float* b, int64_t ldb,
                       int64_t stride_b, float beta, float* c, int64_t ldc, int64_t stride_c, int64_t batch) {
  reference_gemm(trans_a, trans_b, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta, c, ldc, stride_c, batch,
                 [](float x) { return round_to_bf16(x); });
}

constexpr HostTable table{.name = "scalar", SF_TABLE_ENTRIES};

}  // namespace sf::kernels::scalar

namespace sf::kernels {

const HostTable& scalar_table() { return scalar::table; }

}  // namespace sf::kernels
