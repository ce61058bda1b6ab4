// The untiled head of a net, on plain row-major [batch][features] arrays (features of
// a map in C,H,W order): global average pooling, fully connected, softmax, dropout and
// the SSE cost, with Darknet's semantics (softmax passes its delta through unchanged,
// i.e. softmax + cross-entropy; SSE delta = output - truth).
#pragma once
#include <cstdint>

#include "model/net_spec.hpp"

namespace tt {

void avgpool_forward(const float* in, float* out, int n, int c, int hw);
void avgpool_backward(const float* dout, float* din, int n, int c, int hw);

// C = op(A)·op(B) + beta·C on row-major matrices (oneDNN's sgemm; 'N' or 'T' per operand).
void gemm(char ta, char tb, int m, int n, int k, const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
          float* c, int64_t ldc);

// y = x·Wᵀ + b (W is [out][in]), z = act(y). z may alias y.
void connected_forward(const float* x, const float* w, const float* b, float* y, float* z, int n, int in, int out,
                       Act act);
// g (dL/dz, [n][out]) becomes dL/dy in place; adds dW, db; writes dx unless null.
void connected_backward(float* g, const float* x, const float* w, const float* y, float* dw, float* db, float* dx,
                        int n, int in, int out, Act act);

void softmax_forward(const float* in, float* out, int n, int c);

// Deterministic mask from (seed, step, sample, index): the same cells are dropped
// however the map is split. Scale 1/(1-p) on kept cells, as Darknet.
void dropout_apply(const float* in, float* out, int64_t n_per_sample, int n, float p, uint64_t seed, int64_t step);

// Returns Σ (out - truth)²; writes grad = out - truth.
double sse(const float* out, const float* truth, float* grad, int64_t count);
// Returns -Σ truth·log(p); writes grad = p - truth (the delta Darknet's softmax passes on).
double softmax_cross_entropy(const float* p, const float* truth, float* grad, int64_t count);

}  // namespace tt
