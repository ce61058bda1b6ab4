#include "layers/dense.hpp"

#include <oneapi/dnnl/dnnl.h>

#include <cmath>

#include "layers/pointwise.hpp"
#include "util/error.hpp"
#include "util/hash.hpp"

namespace tt {

void avgpool_forward(const float* in, float* out, int n, int c, int hw) {
  for (int i = 0; i < n * c; ++i) {
    double s = 0;
    for (int k = 0; k < hw; ++k) s += in[int64_t(i) * hw + k];
    out[i] = float(s / hw);
  }
}

void avgpool_backward(const float* dout, float* din, int n, int c, int hw) {
  for (int i = 0; i < n * c; ++i)
    for (int k = 0; k < hw; ++k) din[int64_t(i) * hw + k] = dout[i] / hw;
}

void gemm(char ta, char tb, int m, int n, int k, const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
          float* c, int64_t ldc) {
  if (dnnl_sgemm(ta, tb, m, n, k, 1.f, a, lda, b, ldb, beta, c, ldc) != dnnl_success) fail("dnnl_sgemm failed");
}

void connected_forward(const float* x, const float* w, const float* b, float* y, float* z, int n, int in, int out,
                       Act act) {
  gemm('N', 'T', n, out, in, x, in, w, in, 0.f, y, out);
  for (int s = 0; s < n; ++s)
    for (int o = 0; o < out; ++o) {
      float& v = y[s * out + o];
      v += b[o];
      z[s * out + o] = activate(act, v);
    }
}

void connected_backward(float* g, const float* x, const float* w, const float* y, float* dw, float* db, float* dx,
                        int n, int in, int out, Act act) {
  for (int i = 0; i < n * out; ++i) {
    const float v = y[i];
    g[i] *= gradient_at_input(act, v);
  }
  for (int s = 0; s < n; ++s)
    for (int o = 0; o < out; ++o) db[o] += g[s * out + o];
  gemm('T', 'N', out, in, n, g, out, x, in, 1.f, dw, in);          // dW += gᵀ·x
  if (dx) gemm('N', 'N', n, in, out, g, out, w, in, 0.f, dx, in);  // dx = g·W
}

void softmax_forward(const float* in, float* out, int n, int c) {
  for (int s = 0; s < n; ++s) {
    const float* a = in + int64_t(s) * c;
    float* p = out + int64_t(s) * c;
    float m = a[0];
    for (int i = 1; i < c; ++i) m = std::max(m, a[i]);
    double sum = 0;
    for (int i = 0; i < c; ++i) sum += (p[i] = std::exp(a[i] - m));
    for (int i = 0; i < c; ++i) p[i] = float(p[i] / sum);
  }
}

void dropout_apply(const float* in, float* out, int64_t n_per_sample, int n, float p, uint64_t seed, int64_t step) {
  const float scale = 1.f / (1.f - p);
  const uint64_t base = mix(seed ^ mix(uint64_t(step)));
  for (int s = 0; s < n; ++s)
    for (int64_t i = 0; i < n_per_sample; ++i) {
      const double u = double(mix(base ^ mix(uint64_t(s) << 40 ^ uint64_t(i))) >> 11) * 0x1.0p-53;
      const int64_t k = s * n_per_sample + i;
      out[k] = u < p ? 0.f : in[k] * scale;
    }
}

double sse(const float* out, const float* truth, float* grad, int64_t count) {
  double loss = 0;
  for (int64_t i = 0; i < count; ++i) {
    const float d = out[i] - truth[i];
    grad[i] = d;
    loss += double(d) * d;
  }
  return loss;
}

double softmax_cross_entropy(const float* p, const float* truth, float* grad, int64_t count) {
  double loss = 0;
  for (int64_t i = 0; i < count; ++i) {
    grad[i] = p[i] - truth[i];
    if (truth[i] != 0) loss -= truth[i] * std::log(std::max(p[i], 1e-30f));
  }
  return loss;
}

}  // namespace tt
