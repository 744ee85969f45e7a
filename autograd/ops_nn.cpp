// The ops a neural network is built from beyond arithmetic: softmax,
// cross-entropy, embedding lookup and dropout.
#include <optional>

#include "ops.h"
#include "ops_common.h"

namespace sf {
using namespace detail;

static int64_t rows_of(const Tensor& x) { return x.ndim() == 0 ? 1 : x.numel() / x.size(-1); }

static void require_rows(const Tensor& x, const char* op) {
  require_float(x, op);
  if (x.ndim() == 0) internal_fail(op, ": needs at least one dim");
}

// softmax(x)_i = exp(x_i) / sum_j exp(x_j); dx = y * (dy - sum(dy * y)): the
// masked softmax with nothing hidden, at scale 1.
Tensor softmax(const Tensor& x) { return masked_softmax(x, Tensor(), 1.0f); }

// log_softmax(x)_i = x_i - log sum_j exp(x_j); dx = dy - softmax(x) * sum(dy).
Tensor log_softmax(const Tensor& x) {
  require_rows(x, "log_softmax");
  Tensor y = empty_like_device(x, x.shape());
  kernels_of(x).log_softmax(x.mem(), y.mem(), rows_of(x), x.size(-1));
  return record(y, "log_softmax", {x}, [y = y.detach()](const Tensor& g) -> Grads {
    Tensor dx = empty_like_device(y, y.shape());
    kernels_of(y).log_softmax_backward(y.mem(), g.mem(), dx.mem(), rows_of(y), y.size(-1));
    return {dx};
  });
}

Tensor masked_softmax(const Tensor& x, const Tensor& host_keep, float scale) {
  require_rows(x, "masked_softmax");
  Shape keep_strides(x.ndim(), 0);  // no mask: every row alike
  Tensor keep;
  if (host_keep.defined()) {
    if (host_keep.dtype() != DType::I32) internal_fail("masked_softmax: the mask must be int32 (1 = keep)");
    keep = beside(host_keep, x);
    if (broadcast_shapes(x.shape(), keep.shape(), "masked_softmax") != x.shape())
      internal_fail("masked_softmax: mask ", to_string(keep.shape()), " does not broadcast to scores ",
                    to_string(x.shape()));
    keep_strides = broadcast_strides(keep.shape(), x.shape());
  }
  kernels::Rows rows = rows_view(x.shape(), {keep_strides}, true);
  Tensor y = empty_like_device(x, x.shape());
  Mem<int32_t> keep_mem = keep.defined() ? keep.int_mem() : Mem<int32_t>();
  kernels_of(x).masked_softmax(x.mem(), keep_mem, rows, scale, y.mem());
  return record(y, "masked_softmax", {x}, [y = y.detach(), keep, keep_mem, rows, scale](const Tensor& g) -> Grads {
    Tensor dx = empty_like_device(y, y.shape());
    kernels_of(y).masked_softmax_backward(y.mem(), g.mem(), keep_mem, rows, scale, dx.mem());
    return {dx};
  });
}

static void require_feature_vector(const Tensor& v, const Tensor& x, const char* op,
                                   const char* what) {
  require_float(v, op);
  if (v.shape() != Shape{x.size(-1)})
    internal_fail(op, ": ", what, " of shape ", to_string(v.shape()), " for inputs of shape ",
                  to_string(x.shape()), " (expected [", x.size(-1), "])");
}

Tensor layer_norm(const Tensor& x, const Tensor& alpha, const Tensor& bias, float eps) {
  require_rows(x, "layer_norm");
  require_feature_vector(alpha, x, "layer_norm", "alpha");
  require_feature_vector(bias, x, "layer_norm", "bias");
  int64_t rows = rows_of(x), cols = x.size(-1);
  if (cols < 2) internal_fail("layer_norm: the unbiased std needs 2 or more features");
  common_device(x, alpha, "layer_norm");
  common_device(x, bias, "layer_norm");
  Tensor y = empty_like_device(x, x.shape()), mean = empty_like_device(x, {rows}),
         std = empty_like_device(x, {rows});
  kernels_of(x).layer_norm(x.mem(), alpha.mem(), bias.mem(), rows, cols, eps, y.mem(),
                           mean.mem(), std.mem());
  return record(y, "layer_norm", {x, alpha, bias},
                [x, alpha, mean, std, rows, cols, eps](const Tensor& g) -> Grads {
                  Tensor dx = empty_like_device(x, x.shape()),
                         dalpha = empty_like_device(x, {cols}),
                         dbias = empty_like_device(x, {cols});
                  kernels_of(x).layer_norm_backward(x.mem(), alpha.mem(), mean.mem(), std.mem(),
                                                    g.mem(), rows, cols, eps, dx.mem(),
                                                    dalpha.mem(), dbias.mem());
                  return {dx, dalpha, dbias};
                });
}

// relu(x + b): dx = dy where the output is positive; dbias sums dx over rows.
Tensor bias_relu(const Tensor& x, const Tensor& bias) {
  require_rows(x, "bias_relu");
  require_feature_vector(bias, x, "bias_relu", "bias");
  common_device(x, bias, "bias_relu");
  Tensor y = empty_like_device(x, x.shape());
  kernels_of(x).bias_relu(x.mem(), bias.mem(), rows_of(x), x.size(-1), y.mem());
  return record(y, "bias_relu", {x, bias}, [y = y.detach()](const Tensor& g) -> Grads {
    Tensor dx = empty_like_device(y, y.shape());
    kernels_of(y).relu_backward(y.mem(), g.mem(), dx.mem(), y.numel());
    return {dx, sum_to(dx, {y.size(-1)})};
  });
}

// Values that come from the host (targets, token ids) are range-checked there,
// before they are copied to the device of the op.
static void check_indices(const Tensor& ids, int64_t limit, std::optional<int32_t> ignore_index,
                          const char* op, const char* what, const char* range_before,
                          const char* range_after) {
  if (!ids.device().host_addressable()) return;  // checked where it entered that device
  const int32_t* id = ids.ints();
  for (int64_t i = 0, n = ids.numel(); i < n; ++i)
    if (id[i] != ignore_index && (id[i] < 0 || id[i] >= limit))
      internal_fail(op, ": ", what, " ", id[i], " out of range for ", range_before, limit, range_after);
}

// loss = (1/R) sum over the R rows whose target is not ignored of
//        (1-eps) (-log p_target) + eps * mean_c(-log p_c).
Tensor cross_entropy(const Tensor& logits, const Tensor& host_targets, int32_t ignore_index,
                     float label_smoothing) {
  require_rows(logits, "cross_entropy");
  if (host_targets.dtype() != DType::I32) internal_fail("cross_entropy: targets must be int32");
  Shape expect(logits.shape().begin(), logits.shape().end() - 1);
  if (host_targets.shape() != expect)
    internal_fail("cross_entropy: targets of shape ", to_string(host_targets.shape()),
                  " for logits of shape ", to_string(logits.shape()), " (expected ", to_string(expect), ")");
  if (label_smoothing < 0.0f || label_smoothing > 1.0f)
    internal_fail("cross_entropy: label_smoothing ", label_smoothing, " is outside [0, 1]");
  int64_t rows = rows_of(logits), cols = logits.size(-1);
  check_indices(host_targets, cols, ignore_index, "cross_entropy", "target", "", " classes");
  Tensor targets = beside(host_targets, logits);
  Tensor row_loss = empty_like_device(logits, {rows}), counted = empty_like_device(logits, {rows});
  Tensor log_probs = empty_like_device(logits, logits.shape());
  kernels_of(logits).cross_entropy(logits.mem(), targets.int_mem(), rows, cols, ignore_index,
                                   label_smoothing, row_loss.mem(), counted.mem(),
                                   log_probs.mem());
  // The mean over the counted rows, computed on the device. With every target
  // ignored it is 0/0 = NaN, as in PyTorch.
  Tensor count = sum(counted);
  Tensor loss = sum(row_loss) / count;
  return record(loss, "cross_entropy", {logits}, [=](const Tensor& g) -> Grads {
    Tensor scale = g / count;  // d loss / d row_loss, one element
    Tensor dx = empty_like_device(log_probs, log_probs.shape());
    kernels_of(g).cross_entropy_backward(log_probs.mem(), targets.int_mem(), rows, cols,
                                         ignore_index, label_smoothing, scale.mem(), dx.mem());
    return {dx};
  });
}

Tensor embedding(const Tensor& weight, const Tensor& host_ids) {
  require_float(weight, "embedding");
  if (weight.ndim() != 2) internal_fail("embedding: the table must be 2-d, got ", to_string(weight.shape()));
  if (host_ids.dtype() != DType::I32) internal_fail("embedding: ids must be int32");
  int64_t rows = weight.size(0), dim = weight.size(1);
  check_indices(host_ids, rows, std::nullopt, "embedding", "index", "a table of ", " rows");
  Tensor ids = beside(host_ids, weight);
  Shape out_shape = ids.shape();
  out_shape.push_back(dim);
  Tensor out = empty_like_device(weight, out_shape);
  kernels_of(weight).gather_rows(weight.mem(), ids.int_mem(), ids.numel(), dim, out.mem());
  // Each looked-up row's gradient adds into the table row it came from.
  return record(out, "embedding", {weight}, [ids, sw = weight.shape()](const Tensor& g) -> Grads {
    Tensor grad = Tensor::zeros(sw, DType::F32, g.device());
    kernels_of(g).scatter_add_rows(g.mem(), ids.int_mem(), ids.numel(), sw[1], grad.mem());
    return {grad};
  });
}

Tensor index_select(const Tensor& x, const Tensor& rows) {
  if (x.ndim() < 1) internal_fail("index_select: needs a tensor with a first axis, got a scalar");
  if (rows.ndim() != 1) internal_fail("index_select: rows must be 1-d, got ", to_string(rows.shape()));
  // A bf16 tensor (e.g. the keys and values a decoder caches under autocast,
  // which beam search reorders) is gathered in float32: widening and rounding
  // back are both exact, so the result is bit for bit the selected rows.
  if (x.dtype() == DType::BF16) return to_dtype(index_select(to_dtype(x, DType::F32), rows), DType::BF16);
  // The rows of x, flattened, are an embedding table.
  Shape shape = x.shape();
  shape[0] = rows.size(0);
  Tensor table = reshape(x, {x.size(0), x.numel() / std::max<int64_t>(x.size(0), 1)});
  return reshape(embedding(table, rows), shape);
}

// Inverted dropout: survivors are scaled by 1/(1-p) so the expectation is x.
// One draw from rng seeds a stateless per-element hash (kernels.h); the
// backward pass applies the same mask to the gradient by reusing that seed.
struct DropoutMask {
  float scale;
  uint32_t seed, threshold;

  DropoutMask(float p, Rng& rng, const char* op)
      : scale(1.0f / (1.0f - p)), seed(static_cast<uint32_t>(rng.next_u64() >> 32)),
        threshold(static_cast<uint32_t>(static_cast<double>(p) * 4294967296.0)) {
    if (p < 0.0f || p >= 1.0f) internal_fail(op, ": p = ", p, " is outside [0, 1)");
  }

  Tensor apply(const Tensor& x) const {
    Tensor y = empty_like_device(x, x.shape());
    kernels_of(x).dropout(x.mem(), y.mem(), x.numel(), scale, seed, threshold);
    return y;
  }
};

Tensor dropout(const Tensor& x, float p, Rng& rng) {
  require_float(x, "dropout");
  if (p == 0.0f) return x;
  DropoutMask mask(p, rng, "dropout");
  return record(mask.apply(x), "dropout", {x}, [mask](const Tensor& g) -> Grads { return {mask.apply(g)}; });
}

Tensor dropout_add(const Tensor& x, const Tensor& y, float p, Rng& rng) {
  require_float(x, "dropout_add");
  require_float(y, "dropout_add");
  common_device(x, y, "dropout_add");
  if (x.shape() != y.shape())
    internal_fail("dropout_add: shapes ", to_string(x.shape()), " and ", to_string(y.shape()), " differ");
  if (p == 0.0f) return x + y;
  DropoutMask mask(p, rng, "dropout_add");
  Tensor out = empty_like_device(x, x.shape());
  kernels_of(x).dropout_add(x.mem(), y.mem(), out.mem(), x.numel(), mask.scale, mask.seed, mask.threshold);
  return record(out, "dropout_add", {x, y}, [mask](const Tensor& g) -> Grads { return {g, mask.apply(g)}; });
}

}  // namespace sf
