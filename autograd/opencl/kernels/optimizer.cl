// The optimizer steps (common.cl has the helpers and conventions): 16
// consecutive parameters per item (launch.h: vectors).

// torch.optim.Adam / AdamW (kernels.h; g_scale: gradient clipping's coefficient):
//   p *= 1 - decay; g = g_scale g + l2 p; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
//   p -= step_size * m / (sqrt(v) / sqrt_bc2 + eps).
__kernel void adam_step(__global float* p, long p_off, __global const float* g, long g_off, float g_scale,
                        __global float* m, long m_off, __global float* v, long v_off, long n,
                        float step_size, float b1, float b2, float eps, float sqrt_bc2, float l2,
                        float decay) {
  long i;
  int count;
  if (!vector_item(n, &i, &count)) return;
  p += p_off + i;
  m += m_off + i;
  v += v_off + i;
  float16 param = load16(p, 1, 0, count, 0.0f) * (1.0f - decay);
  float16 grad = fma((float16)(l2), param, load16(g + g_off + i, 1, 0, count, 0.0f) * g_scale);
  float16 mi = b1 * load16(m, 1, 0, count, 0.0f) + (1.0f - b1) * grad;
  float16 vi = b2 * load16(v, 1, 0, count, 0.0f) + (1.0f - b2) * grad * grad;
  store16(mi, m, 1, 0, count);
  store16(vi, v, 1, 0, count);
  store16(param - step_size * mi / (sqrt(vi) / sqrt_bc2 + eps), p, 1, 0, count);
}

// torch.optim.SGD: g = g_scale g + l2 p; with momentum (has_buf), buf = first ? g :
// momentum buf + g and g = nesterov ? g + momentum buf : buf; p -= lr g.
__kernel void sgd_step(__global float* p, long p_off, __global const float* g, long g_off, float g_scale,
                       __global float* buf, long buf_off, int has_buf, long n, float lr, float momentum,
                       float l2, int nesterov, int first) {
  long i;
  int count;
  if (!vector_item(n, &i, &count)) return;
  p += p_off + i;
  float16 param = load16(p, 1, 0, count, 0.0f);
  float16 grad = fma((float16)(l2), param, load16(g + g_off + i, 1, 0, count, 0.0f) * g_scale);
  if (has_buf) {
    buf += buf_off + i;
    float16 b = first ? grad : momentum * load16(buf, 1, 0, count, 0.0f) + grad;
    store16(b, buf, 1, 0, count);
    grad = nesterov ? grad + momentum * b : b;
  }
  store16(param - lr * grad, p, 1, 0, count);
}
