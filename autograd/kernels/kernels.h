// The kernel table: every computation an op needs, as one struct of function
// pointers. Each device (device.h) offers one, and ops in autograd/ do their
// arithmetic only through it (they read values on the host only to validate
// inputs that come from the host, e.g. token ids).
//
// The entries are declared once, as `KernelTable<Ptr>` over a pointer type:
//   - `Table = KernelTable<Mem>`: what a device offers. Memory is addressed as
//     (buffer, byte offset), so a buffer may live off the host (an OpenCL
//     cl_mem); ops never do arithmetic on host addresses.
//   - `HostTable = KernelTable<HostPtr>`: plain host pointers. The CPU's kernels
//     are written against it: `scalar_table()` holds the reference loops,
//     `fast_table()` the SIMD and threaded ones, and `active()` is the one the
//     CPU device uses. The CPU device's `Table` resolves each `Mem` to its host
//     address and calls the active host table (autograd/device.cpp).
// Tests compare the fast host table, and every other device's table, against
// the scalar one (tests/test_kernels.cpp, tests/test_backend.cpp).
//
// All arrays are contiguous row-major float32 (or int32 or bf16 where named). Edge
// values behave as in PyTorch, on every table: NaN propagates (through max,
// relu and exp too), e^x overflows to inf and underflows to 0 as std::exp, and
// every size may be 0 unless a kernel says not: nothing of an empty array is
// read or written, and a sum over nothing is 0.
//
// One output convention: a kernel OVERWRITES every element of its outputs and
// never reads them first, so the caller may hand it uninitialised memory. The
// exceptions say so where they are declared: gemm's `beta * C` (BLAS; beta = 0
// overwrites), scatter_add_rows (adds, as its name says: an embedding's rows
// may repeat), and the optimizer steps, which update parameters and their
// state in place.
//
// Masks: an attention mask is int32 with 1 = keep (the position may be
// attended to) and 0 = hidden, and its parameter is named `keep`; a condition
// that selects elements to change is named `where` (fill_where).
//
// The entries are grouped by kind: matrix products, elementwise, reductions,
// neural-network rows, copies and indexing, optimizer steps. Adding one is a
// recipe in docs/adding-an-op.md.
#pragma once
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <type_traits>
#include <vector>

// The op enums (Unary, Binary, Predicate), kHiddenScore and dropout_hash,
// which the OpenCL kernels share.
#include "shared.h"
// The bfloat16 storage type and its conversions.
#include "bf16.h"

namespace sf::kernels {

// Every code of each elementwise op, in order, from shared.h's lists: what
// the tests run on every backend.
#define SF_BINARY_CODE(code) Binary::code,
#define SF_PREDICATE_CODE(code) Predicate::code,
#define SF_UNARY_CODE(code) Unary::code,
#define SF_FORMULA_CODE(code, function) Unary::code,
inline constexpr Binary kBinaryCodes[] = {SF_BINARY_CODES(SF_BINARY_CODE)};
inline constexpr Predicate kPredicateCodes[] = {SF_PREDICATE_CODES(SF_PREDICATE_CODE)};
inline constexpr Unary kUnaryCodes[] = {SF_UNARY_CODES(SF_UNARY_CODE) SF_FORMULA_CODES(SF_FORMULA_CODE)};
#undef SF_BINARY_CODE
#undef SF_PREDICATE_CODE
#undef SF_UNARY_CODE
#undef SF_FORMULA_CODE

// Device memory as kernels see it: the device's handle of an allocation (on
// the CPU its host address, on OpenCL a cl_mem) and a byte offset into it.
// `mem + n` advances by n elements (n bytes for Mem<void>).
template <class T>
struct Mem {
  static constexpr size_t unit() {
    if constexpr (std::is_void_v<T>)
      return 1;
    else
      return sizeof(T);
  }

  void* buffer = nullptr;
  size_t offset = 0;

  Mem() = default;
  Mem(void* buffer, size_t offset) : buffer(buffer), offset(offset) {}
  // Mem<float> passes where Mem<const float> (or Mem<const void>) is expected.
  template <class U>
    requires(!std::is_same_v<U, T> && std::is_convertible_v<U*, T*>)
  Mem(Mem<U> other) : buffer(other.buffer), offset(other.offset) {}

  Mem operator+(int64_t elements) const {
    return {buffer, offset + static_cast<size_t>(elements) * unit()};
  }
  explicit operator bool() const { return buffer != nullptr; }
};

template <class T>
using HostPtr = T*;

// The host address of CPU memory (only the CPU device's buffers are addresses).
template <class T>
T* host_address(Mem<T> m) {
  using Byte = std::conditional_t<std::is_const_v<T>, const char, char>;
  return m.buffer ? reinterpret_cast<T*>(static_cast<Byte*>(m.buffer) + m.offset) : nullptr;
}

// Dropout's keep decision for element i (shared.h: dropout_hash).
inline bool dropout_keeps(uint32_t seed, uint32_t i, uint32_t threshold) { return dropout_hash(seed, i) >= threshold; }

// The index space of an op over a shape, prepared once above the seam
// (rows_view, below) and handed to every backend, which keeps only its
// loops. Dims of size 1 are dropped and neighbours merged where every operand
// walks them as one, so [B, T, D] + [B, T, D] is one row of B·T·D elements and
// [B, T, D] + [D] is B·T rows of D; the result is `count` rows of `cols`
// elements in row-major order. Each operand (at most two) is read through
// element strides, 0 along the dims it is broadcast along: its row r starts at
// offset(operand, r) and steps col_strides[operand] along the row.
struct Rows {
  static constexpr int kMaxDims = 8;

  int64_t count = 1, cols = 1;
  int ndim = 0;  // the outer dims that rows range over, outermost first
  int64_t shape[kMaxDims] = {};
  int64_t strides[2][kMaxDims] = {};
  int64_t col_strides[2] = {};

  int64_t offset(int operand, int64_t row) const {
    int64_t offset = 0;
    for (int d = ndim - 1; d >= 0; --d) {
      offset += row % shape[d] * strides[operand][d];
      row /= shape[d];
    }
    return offset;
  }
};

// Elements from a gemm operand's first to its last, over the whole batch: op(X)
// is rows x cols, X stored with leading dimension ld (X is cols x rows when
// transposed), entry i at i * stride. 0 when the product is empty.
inline int64_t gemm_operand_extent(bool trans, int64_t rows, int64_t cols, int64_t ld, int64_t stride,
                                   int64_t batch) {
  if (rows <= 0 || cols <= 0 || batch <= 0) return 0;
  const int64_t stored_rows = trans ? cols : rows, stored_cols = trans ? rows : cols;
  return (batch - 1) * stride + (stored_rows - 1) * ld + stored_cols;
}

template <template <class> class Ptr>
struct KernelTable {
  const char* name;

  // --- matrix products -------------------------------------------------------
  // C[m,n] = alpha * op(A)[m,k] op(B)[k,n] + beta * C, the BLAS sgemm contract
  // (beta = 0 overwrites: C is not read). Row-major; op(A) = A ([m,k], leading
  // dimension lda) or, with trans_a, A^T where A is [k,m]. `batch` products,
  // operand i at base + i * stride (a stride may be 0).
  void (*gemm)(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
               Ptr<const float> a, int64_t lda, int64_t stride_a, Ptr<const float> b, int64_t ldb,
               int64_t stride_b, float beta, Ptr<float> c, int64_t ldc, int64_t stride_c,
               int64_t batch);
  // The same product of bf16 operands (bf16.h), C float32: each product of
  // two bf16 values is exact in float32, and the sums are float32's, as
  // PyTorch's CPU autocast computes a matmul. Only the order of the float32
  // additions differs between kernels (and the AVX512-BF16 instruction reads
  // subnormal operands as zero, see docs/13-bf16.md).
  void (*gemm_bf16)(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                    Ptr<const bf16> a, int64_t lda, int64_t stride_a, Ptr<const bf16> b, int64_t ldb,
                    int64_t stride_b, float beta, Ptr<float> c, int64_t ldc, int64_t stride_c,
                    int64_t batch);
  // gemm on float32 operands each rounded to bf16 (to nearest even, bf16.h)
  // as it is read: the exact products gemm_bf16 forms of the rounded values,
  // summed in float32, without a rounded copy of A or B. Autocast's products
  // where bf16 ones are no faster than float32's (docs/13-bf16.md).
  void (*gemm_rounded_bf16)(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                            Ptr<const float> a, int64_t lda, int64_t stride_a, Ptr<const float> b, int64_t ldb,
                            int64_t stride_b, float beta, Ptr<float> c, int64_t ldc, int64_t stride_c,
                            int64_t batch);

  // --- elementwise -----------------------------------------------------------
  // y = f(x); `s` is the scalar of the *Scalar ops (x + s, x * s, x^s, s - x, s / x).
  void (*unary)(Unary op, Ptr<const float> x, Ptr<float> y, int64_t n, float s);
  // Broadcasting: out[i] = a op b over `rows`, a its operand 0 and b its
  // operand 1; out is contiguous.
  void (*binary)(Binary op, Ptr<const float> a, Ptr<const float> b, Ptr<float> out, const Rows& rows);
  void (*predicate)(Predicate op, Ptr<const float> a, Ptr<const float> b, Ptr<int32_t> out, const Rows& rows);
  void (*predicate_int)(Predicate op, Ptr<const int32_t> a, Ptr<const int32_t> b, Ptr<int32_t> out,
                        const Rows& rows);
  // out = where != 0 ? value : x, x operand 0 and where operand 1.
  void (*fill_where)(Ptr<const float> x, Ptr<const int32_t> where, float value, Ptr<float> out, const Rows& rows);
  // y = relu(x + bias) over [rows, cols], bias [cols]: a Linear layer's epilogue.
  void (*bias_relu)(Ptr<const float> x, Ptr<const float> bias, int64_t rows, int64_t cols, Ptr<float> y);
  // dx = y > 0 ? dy : 0, from relu's output y.
  void (*relu_backward)(Ptr<const float> y, Ptr<const float> dy, Ptr<float> dx, int64_t n);
  // y = x * scale (scale = 1 / (1 - p)) where dropout_keeps(seed, i, threshold),
  // else +0, or NaN where x is NaN or infinite (as PyTorch's x * mask).
  void (*dropout)(Ptr<const float> x, Ptr<float> y, int64_t n, float scale, uint32_t seed,
                  uint32_t threshold);
  // A residual connection, out = x + dropout(y) with dropout as above, in one
  // pass over memory where dropout then add take two (Vaswani et al. 2017,
  // §5.4: dropout on each sub-layer's output before it is added to its input).
  void (*dropout_add)(Ptr<const float> x, Ptr<const float> y, Ptr<float> out, int64_t n, float scale, uint32_t seed,
                      uint32_t threshold);

  // --- reductions ------------------------------------------------------------
  // The adjoint of broadcasting: out = x summed over the dims out is broadcast
  // along, x operand 0 of `rows` (contiguous) and out operand 1 (stride 0 along
  // the dims summed away). x is not empty. A sum over an axis is the case of
  // out with that dim of size 1.
  void (*sum_to)(Ptr<const float> x, Ptr<float> out, const Rows& rows);
  // Max over n >= 1; `arg` (int32, may be null) receives the index of the first
  // maximum. A NaN is the maximum (its first index in arg), as in torch.max.
  void (*max_axis)(Ptr<const float> x, int64_t outer, int64_t n, int64_t inner, Ptr<float> out,
                   Ptr<int32_t> arg);
  // out[0] = sum_i a[i] * b[i], accumulated in double (norms of large
  // gradients). The result stays in the kernel's memory, so a norm over many
  // tensors reads its parts from the device once (optim/clip.cpp).
  void (*dot)(Ptr<const float> a, Ptr<const float> b, int64_t n, Ptr<float> out);
  // Top k of each row of [rows, cols], largest first (ties: lower index first).
  void (*topk)(Ptr<const float> x, int64_t rows, int64_t cols, int64_t k, Ptr<float> values,
               Ptr<int32_t> indices);

  // --- neural-network rows: softmax, layer norm, loss --------------------------
  // Row-wise over [rows, cols]: y = log_softmax(x), and its backward given the
  // forward output y: dx = dy - exp(y) * sum(dy). (softmax is masked_softmax
  // without a mask, at scale 1.)
  void (*log_softmax)(Ptr<const float> x, Ptr<float> y, int64_t rows, int64_t cols);
  void (*log_softmax_backward)(Ptr<const float> y, Ptr<const float> dy, Ptr<float> dx, int64_t rows,
                               int64_t cols);
  // Attention weights over each row of x (contiguous, `rows` rows of the last
  // dim): y = softmax(keep ? scale * x : -1e9), i.e. Vaswani et al. 2017,
  // §3.2.1's softmax(QKᵀ/√d_k) with hidden positions set to -1e9 after
  // scaling. `keep` is an int32 attention mask (1 = may attend, 0 = hidden),
  // operand 0 of `rows`; it may be null for no mask (plain softmax, with scale
  // 1: one kernel serves both).
  void (*masked_softmax)(Ptr<const float> x, Ptr<const int32_t> keep, const Rows& rows, float scale, Ptr<float> y);
  // dx = scale * y * (dy - sum(dy * y)) where `keep` is 1, 0 where it hides.
  void (*masked_softmax_backward)(Ptr<const float> y, Ptr<const float> dy, Ptr<const int32_t> keep,
                                  const Rows& rows, float scale, Ptr<float> dx);
  // Layer normalization per row of [rows, cols] as in the annotated Transformer:
  // y = alpha * (x - mean) / (std + eps) + bias, std unbiased (n - 1), unlike
  // torch.nn.LayerNorm's sqrt(var + eps). Saves mean and std per row for the
  // backward pass.
  void (*layer_norm)(Ptr<const float> x, Ptr<const float> alpha, Ptr<const float> bias, int64_t rows,
                     int64_t cols, float eps, Ptr<float> y, Ptr<float> mean, Ptr<float> std);
  // With xhat = (x - mean) / (std + eps) and g = dy * alpha:
  // dx = (g - mean(g)) / (std + eps) - xhat * sum(g * xhat) / ((n - 1) std);
  // dalpha = sum over rows of dy * xhat, dbias = sum over rows of dy.
  void (*layer_norm_backward)(Ptr<const float> x, Ptr<const float> alpha, Ptr<const float> mean,
                              Ptr<const float> std, Ptr<const float> dy, int64_t rows, int64_t cols,
                              float eps, Ptr<float> dx, Ptr<float> dalpha, Ptr<float> dbias);
  // Cross-entropy of logits [rows, cols] against int32 targets, PyTorch semantics:
  // rows whose target is ignore_index contribute nothing; per other row the loss is
  // (1-eps) * -log p_target + eps * mean_c(-log p_c). Writes the per-row losses
  // (0 for ignored rows), row_counted (1, or 0 for ignored rows: the mean's
  // denominator is their sum) and log_probs [rows, cols] for the backward pass.
  // A target outside [0, cols) that is not ignore_index gives a NaN row loss
  // (ops validate targets on the host before they reach a device).
  void (*cross_entropy)(Ptr<const float> logits, Ptr<const int32_t> targets, int64_t rows,
                        int64_t cols, int32_t ignore_index, float eps, Ptr<float> row_loss,
                        Ptr<float> row_counted, Ptr<float> log_probs);
  // dlogits = scale[0] * (softmax - ((1-eps) onehot + eps/cols)), 0 on ignored
  // rows. `scale` is a one-element array in the kernel's memory, so the loss's
  // gradient never has to visit the host.
  void (*cross_entropy_backward)(Ptr<const float> log_probs, Ptr<const int32_t> targets,
                                 int64_t rows, int64_t cols, int32_t ignore_index, float eps,
                                 Ptr<const float> scale, Ptr<float> dlogits);

  // --- copies and indexing ---------------------------------------------------
  // Copies `rows` rows of `row_bytes` bytes between arrays with the given row
  // strides in bytes (concat and slice; works for any element type).
  void (*copy_rows)(Ptr<const void> src, int64_t src_stride, Ptr<void> dst, int64_t dst_stride,
                    int64_t rows, int64_t row_bytes);
  // y = the elements of x in the order `rows` walks them, x its operand 0 and y
  // contiguous: a permutation is x read through its strides permuted.
  void (*copy_strided)(Ptr<const float> x, Ptr<float> y, const Rows& rows);
  // Embedding: out[i, :] = table[ids[i], :] (ids already range-checked).
  void (*gather_rows)(Ptr<const float> table, Ptr<const int32_t> ids, int64_t n, int64_t dim, Ptr<float> out);
  // Its backward ADDS into its output: grad_table[ids[i], :] += grad_out[i, :]
  // (a repeated id adds once per occurrence).
  void (*scatter_add_rows)(Ptr<const float> grad_out, Ptr<const int32_t> ids, int64_t n, int64_t dim,
                           Ptr<float> grad_table);

  // --- bfloat16 conversions (bf16.h) ------------------------------------------
  // y = x rounded to the nearest bf16 (ties to even; NaN stays NaN), and back
  // (exact: every bf16 value is a float32).
  void (*float_to_bf16)(Ptr<const float> x, Ptr<bf16> y, int64_t n);
  void (*bf16_to_float)(Ptr<const bf16> x, Ptr<float> y, int64_t n);

  // --- optimizer steps (update p and their state in place) ---------------------
  // One optimizer update of n parameters p with gradients g, as PyTorch's
  // torch.optim.Adam (l2 = weight_decay added to the gradient) and AdamW
  // (decay = lr * weight_decay, applied to p first):
  //   p *= 1 - decay; g = g_scale g + l2 p; m = b1 m + (1-b1) g;
  //   v = b2 v + (1-b2) g^2; p -= step_size * m / (sqrt(v) / sqrt_bc2 + eps)
  // with step_size = lr / (1 - b1^t) and sqrt_bc2 = sqrt(1 - b2^t). g_scale
  // is gradient clipping's coefficient (1 unclipped), applied here rather
  // than in a pass of its own over the gradients; g_scale g is rounded to
  // float before l2 p is added, as that pass would have stored it.
  void (*adam_step)(Ptr<float> p, Ptr<const float> g, float g_scale, Ptr<float> m, Ptr<float> v, int64_t n,
                    float step_size, float b1, float b2, float eps, float sqrt_bc2, float l2, float decay);
  // torch.optim.SGD: g = g_scale g + l2 p (g_scale as above); with momentum,
  // buf = first ? g : momentum buf + g, and g = nesterov ? g + momentum buf : buf;
  // then p -= lr g.
  void (*sgd_step)(Ptr<float> p, Ptr<const float> g, float g_scale, Ptr<float> buf, int64_t n, float lr,
                   float momentum, float l2, bool nesterov, bool first);
};

// Every table is expanded from the entries' names: SF_KERNEL_LIST(X) is
// X(gemm) X(unary) ..., in declaration order, written by the build from the
// struct above (tools/kernel-list), so the struct is the only list. A backend
// defines one function per entry, named as the entry, and fills its table with
// SF_TABLE_ENTRIES (`.gemm = gemm, .unary = unary, ...`) where they are in
// scope: a function it lacks is a compile error.
#include "kernel_list.h"
#define SF_TABLE_ENTRY(entry) .entry = entry,
#define SF_TABLE_ENTRIES SF_KERNEL_LIST(SF_TABLE_ENTRY)

using Table = KernelTable<Mem>;
using HostTable = KernelTable<HostPtr>;

// The Rows view of an op over `shape` whose operands (at most two) walk it
// with the given element strides, one per dim of `shape` (rows.cpp). With
// `whole_rows` the last dim stays the rows' columns, unmerged: row kernels
// (softmax) see each row of x as one row.
Rows rows_view(const std::vector<int64_t>& shape, std::initializer_list<std::vector<int64_t>> strides,
               bool whole_rows = false);

// The reference kernels (scalar.cpp), declared from the list with each
// entry's type: the plainest loop for each entry, which defines what it means.
namespace scalar {
#define SF_DECLARE_REFERENCE(entry) std::remove_pointer_t<decltype(HostTable::entry)> entry;
SF_KERNEL_LIST(SF_DECLARE_REFERENCE)
#undef SF_DECLARE_REFERENCE
}  // namespace scalar

const HostTable& scalar_table();
const HostTable& fast_table();  // SIMD for the build's target CPU, threaded
// The host table the CPU device uses. Defaults to the fastest one built for this CPU.
const HostTable& active();
void set_active(const HostTable& table);

}  // namespace sf::kernels
