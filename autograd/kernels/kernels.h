// The one dispatch point for compute kernels.
//
// Ops in autograd/ do their arithmetic through the functions in `kernels::Table`
// (they loop over data only to validate it, e.g. index ranges, or to build
// small host-side tensors such as arange). `scalar_table()` holds the plain reference loops; a faster
// table (SIMD, threads) can replace it in one place with `set_active()`, and the
// tests compare any table against the scalar one.
//
// All pointers are contiguous row-major float32 (or int32 where named) arrays.
#pragma once
#include <cstdint>

namespace sf::kernels {

enum class Binary { Add, Sub, Mul, Div };
// Predicates write int32 1 / 0; And and Or treat nonzero as true.
enum class Predicate { Eq, Ne, Lt, Le, Gt, Ge, And, Or };
enum class Unary { Neg, Exp, Log, Sqrt, Relu, Tanh, Sigmoid, AddScalar, MulScalar, PowScalar, RSubScalar, RDivScalar };

// A strided view of an operand of a broadcasting op: `strides` are per output
// dimension, 0 where the operand is broadcast along that dimension.
template <class T>
struct Strided {
  const T* data;
  const int64_t* strides;
};

// Dropout's keep decision for element i: a stateless hash of (seed, i), so the
// result does not depend on how threads split the work, and the backward pass
// recomputes the mask instead of storing it. (The "lowbias32" integer hash.)
inline bool dropout_keeps(uint32_t seed, uint32_t i, uint32_t threshold) {
  uint32_t h = i * 0x9E3779B1u + seed;
  h ^= h >> 16;
  h *= 0x7feb352du;
  h ^= h >> 15;
  h *= 0x846ca68bu;
  h ^= h >> 16;
  return h >= threshold;  // P(keep) = 1 - threshold / 2^32
}

// Offset of row `row` (an index over all dims of `shape` but the last) under
// per-dim `strides`.
inline int64_t row_offset(int64_t row, const int64_t* shape, int ndim, const int64_t* strides) {
  int64_t offset = 0;
  for (int d = ndim - 2; d >= 0; --d) {
    offset += (row % shape[d]) * strides[d];
    row /= shape[d];
  }
  return offset;
}

struct Table {
  const char* name;

  // C[m,n] = alpha * op(A)[m,k] op(B)[k,n] + beta * C. Row-major; op(A) = A
  // ([m,k], leading dimension lda) or, with trans_a, A^T where A is [k,m].
  // `batch` products, operand i at base + i * stride (a stride may be 0).
  void (*gemm)(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
               const float* a, int64_t lda, int64_t stride_a, const float* b, int64_t ldb,
               int64_t stride_b, float beta, float* c, int64_t ldc, int64_t stride_c,
               int64_t batch);

  // out[i] = a[i] op b[i] over `shape` (ndim dims), a and b broadcast by strides.
  void (*binary)(Binary op, Strided<float> a, Strided<float> b, float* out, const int64_t* shape,
                 int ndim);
  void (*predicate)(Predicate op, Strided<float> a, Strided<float> b, int32_t* out,
                    const int64_t* shape, int ndim);
  void (*predicate_int)(Predicate op, Strided<int32_t> a, Strided<int32_t> b, int32_t* out,
                        const int64_t* shape, int ndim);
  // out = mask ? value : x, both broadcast by strides.
  void (*masked_fill)(Strided<float> x, Strided<int32_t> mask, float value, float* out,
                      const int64_t* shape, int ndim);

  // y = f(x); `s` is the scalar of the *Scalar ops (x + s, x * s, x^s, s - x, s / x).
  void (*unary)(Unary op, const float* x, float* y, int64_t n, float s);

  // Broadcast reduction: out (zeroed by the caller) += x, where x has `shape` and
  // out is addressed by `out_strides` (0 along the dimensions being summed away).
  void (*sum_to)(const float* x, const int64_t* shape, int ndim, float* out,
                 const int64_t* out_strides);

  // x viewed as [outer, n, inner], reduced over n into out [outer, inner].
  void (*sum_axis)(const float* x, int64_t outer, int64_t n, int64_t inner, float* out);
  // Max over n; `arg` (int32, may be null) receives the index of the first maximum.
  void (*max_axis)(const float* x, int64_t outer, int64_t n, int64_t inner, float* out,
                   int32_t* arg);

  // Row-wise over [rows, cols]: y = softmax(x) or log_softmax(x).
  void (*softmax)(const float* x, float* y, int64_t rows, int64_t cols);
  void (*log_softmax)(const float* x, float* y, int64_t rows, int64_t cols);
  // Backward given the forward output y: dx = y * (dy - sum(dy * y)) for softmax,
  // dx = dy - exp(y) * sum(dy) for log_softmax.
  void (*softmax_backward)(const float* y, const float* dy, float* dx, int64_t rows, int64_t cols);
  void (*log_softmax_backward)(const float* y, const float* dy, float* dx, int64_t rows,
                               int64_t cols);

  // Attention weights over the last dim of x (`shape`, ndim dims):
  // y = softmax(mask ? scale * x : -1e9), the seed's masked_fill(mask == 0, -1e9)
  // after scaling. mask is int32 (0 = hidden) under broadcast strides, one per
  // dim of `shape`; mask.data may be null for no mask.
  void (*masked_softmax)(const float* x, Strided<int32_t> mask, const int64_t* shape, int ndim,
                         float scale, float* y);
  // dx = scale * y * (dy - sum(dy * y)) where the mask keeps, 0 where it hides.
  void (*masked_softmax_backward)(const float* y, const float* dy, Strided<int32_t> mask,
                                  const int64_t* shape, int ndim, float scale, float* dx);

  // The seed's LayerNormalization per row of [rows, cols]:
  // y = alpha * (x - mean) / (std + eps) + bias, std unbiased (n - 1).
  // Saves mean and std per row for the backward pass.
  void (*layer_norm)(const float* x, const float* alpha, const float* bias, int64_t rows,
                     int64_t cols, float eps, float* y, float* mean, float* std);
  // With xhat = (x - mean) / (std + eps) and g = dy * alpha:
  // dx = (g - mean(g)) / (std + eps) - xhat * sum(g * xhat) / ((n - 1) std);
  // dalpha = sum over rows of dy * xhat, dbias = sum over rows of dy (overwritten).
  void (*layer_norm_backward)(const float* x, const float* alpha, const float* mean,
                              const float* std, const float* dy, int64_t rows, int64_t cols,
                              float eps, float* dx, float* dalpha, float* dbias);

  // y = relu(x + bias) over [rows, cols], bias [cols]: a Linear layer's epilogue.
  void (*bias_relu)(const float* x, const float* bias, int64_t rows, int64_t cols, float* y);
  // dx = y > 0 ? dy : 0, from relu's output y.
  void (*relu_backward)(const float* y, const float* dy, float* dx, int64_t n);

  // y = x / (1 - p) where dropout_keeps(seed, i, threshold), else 0.
  void (*dropout)(const float* x, float* y, int64_t n, float scale, uint32_t seed,
                  uint32_t threshold);

  // sum_i a[i] * b[i], accumulated in double (norms of large gradients).
  double (*dot)(const float* a, const float* b, int64_t n);

  // One optimizer update of n parameters p with gradients g, as PyTorch's
  // torch.optim.Adam (l2 = weight_decay added to the gradient) and AdamW
  // (decay = lr * weight_decay, applied to p first):
  //   p *= 1 - decay; g += l2 p; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
  //   p -= step_size * m / (sqrt(v) / sqrt_bc2 + eps)
  // with step_size = lr / (1 - b1^t) and sqrt_bc2 = sqrt(1 - b2^t).
  void (*adam_step)(float* p, const float* g, float* m, float* v, int64_t n, float step_size,
                    float b1, float b2, float eps, float sqrt_bc2, float l2, float decay);
  // torch.optim.SGD: g += l2 p; with momentum, buf = first ? g : momentum buf + g,
  // and g = nesterov ? g + momentum buf : buf; then p -= lr g.
  void (*sgd_step)(float* p, const float* g, float* buf, int64_t n, float lr, float momentum,
                   float l2, bool nesterov, bool first);

  // Top k of each row of [rows, cols], largest first (ties: lower index first).
  void (*topk)(const float* x, int64_t rows, int64_t cols, int64_t k, float* values,
               int32_t* indices);

  // Copies `rows` rows of `row_bytes` bytes between arrays with the given row
  // strides in bytes (concat and slice; works for any element type).
  void (*copy_rows)(const void* src, int64_t src_stride, void* dst, int64_t dst_stride,
                    int64_t rows, int64_t row_bytes);

  // y = x with dims permuted: y dim i is x dim perm[i]. `shape` is x's shape.
  void (*permute)(const float* x, const int64_t* shape, const int* perm, int ndim, float* y);

  // Embedding: out[i, :] = table[ids[i], :] (ids already range-checked);
  // backward: grad_table[ids[i], :] += grad_out[i, :].
  void (*gather_rows)(const float* table, const int32_t* ids, int64_t n, int64_t dim, float* out);
  void (*scatter_add_rows)(const float* grad_out, const int32_t* ids, int64_t n, int64_t dim,
                           float* grad_table);

  // Cross-entropy of logits [rows, cols] against int32 targets, PyTorch semantics:
  // rows whose target is ignore_index contribute nothing; per other row the loss is
  // (1-eps) * -log p_target + eps * mean_c(-log p_c). Writes the per-row losses
  // (0 for ignored rows) and log_probs [rows, cols] for the backward pass.
  void (*cross_entropy)(const float* logits, const int32_t* targets, int64_t rows, int64_t cols,
                        int32_t ignore_index, float eps, float* row_loss, float* log_probs);
  // dlogits = scale * (softmax - ((1-eps) onehot + eps/cols)), 0 on ignored rows.
  void (*cross_entropy_backward)(const float* log_probs, const int32_t* targets, int64_t rows,
                                 int64_t cols, int32_t ignore_index, float eps, float scale,
                                 float* dlogits);
};

const Table& scalar_table();
const Table& fast_table();  // SIMD for the build's target CPU, threaded
// The table ops use. Defaults to the fastest table built for this CPU.
const Table& active();
void set_active(const Table& table);

}  // namespace sf::kernels
