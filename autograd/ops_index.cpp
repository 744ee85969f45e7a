// No-grad helpers for decoding and masks: argmax, top-k, comparisons, arange.
#include "ops.h"
#include "ops_common.h"

namespace sf {
using namespace detail;
using kernels::Predicate;

Tensor argmax(const Tensor& x) {
  require_float(x, "argmax");
  if (x.ndim() == 0 || x.size(-1) == 0) internal_fail("argmax: needs a non-empty last axis");
  Shape out_shape(x.shape().begin(), x.shape().end() - 1);
  Tensor values = empty_like_device(x, out_shape),
         indices = empty_like_device(x, out_shape, DType::I32);
  kernels_of(x).max_axis(x.mem(), x.numel() / x.size(-1), x.size(-1), 1, values.mem(),
                         indices.int_mem());
  return indices;
}

std::pair<Tensor, Tensor> topk(const Tensor& x, int64_t k) {
  require_float(x, "topk");
  if (x.ndim() == 0 || k < 0 || k > x.size(-1))
    internal_fail("topk: k = ", k, " for shape ", to_string(x.shape()));
  Shape out_shape = x.shape();
  out_shape.back() = k;
  Tensor values = empty_like_device(x, out_shape),
         indices = empty_like_device(x, out_shape, DType::I32);
  int64_t cols = x.size(-1);
  kernels_of(x).topk(x.mem(), cols == 0 ? 0 : x.numel() / cols, cols, k, values.mem(),
                     indices.int_mem());
  return {values, indices};
}

static Tensor compare(Predicate op, const Tensor& a, const Tensor& b, const char* name) {
  if (a.dtype() != b.dtype())
    internal_fail(name, ": operands are ", to_string(a.dtype()), " and ", to_string(b.dtype()));
  common_device(a, b, name);
  Shape shape = broadcast_shapes(a.shape(), b.shape(), name);
  Tensor out = empty_like_device(a, shape, DType::I32);
  kernels::Rows rows = broadcast_rows(shape, a.shape(), b.shape());
  if (a.dtype() == DType::F32)
    kernels_of(a).predicate(op, a.mem(), b.mem(), out.int_mem(), rows);
  else
    kernels_of(a).predicate_int(op, a.int_mem(), b.int_mem(), out.int_mem(), rows);
  return out;
}

Tensor eq(const Tensor& a, const Tensor& b) { return compare(Predicate::Eq, a, b, "eq"); }
Tensor ne(const Tensor& a, const Tensor& b) { return compare(Predicate::Ne, a, b, "ne"); }
Tensor lt(const Tensor& a, const Tensor& b) { return compare(Predicate::Lt, a, b, "lt"); }
Tensor le(const Tensor& a, const Tensor& b) { return compare(Predicate::Le, a, b, "le"); }
Tensor gt(const Tensor& a, const Tensor& b) { return compare(Predicate::Gt, a, b, "gt"); }
Tensor ge(const Tensor& a, const Tensor& b) { return compare(Predicate::Ge, a, b, "ge"); }
Tensor logical_and(const Tensor& a, const Tensor& b) {
  return compare(Predicate::And, a, b, "logical_and");
}
Tensor logical_or(const Tensor& a, const Tensor& b) {
  return compare(Predicate::Or, a, b, "logical_or");
}

// Both are built on the host and then moved: small, and off the hot path.
Tensor arange(int64_t end, Device& device) {
  if (end < 0) internal_fail("arange: negative end ", end);
  Tensor out = Tensor::empty({end}, DType::I32);
  for (int64_t i = 0; i < end; ++i) out.ints()[i] = static_cast<int32_t>(i);
  return out.to(device);
}

Tensor to_float(const Tensor& ints) {
  if (ints.dtype() != DType::I32) internal_fail("to_float: expected an int32 tensor");
  std::vector<int32_t> values = ints.to_int_vector();
  return Tensor::from(std::vector<float>(values.begin(), values.end()), ints.shape())
      .to(ints.device());
}

}  // namespace sf
