// Layers that move values between whole maps without weights, on plain NCHW arrays
// ([batch][c][h][w]), with Darknet's semantics and index orders: [route] (channel
// concatenation of earlier outputs), [reorg] (blas.c reorg_cpu) and [upsample]
// (blas.c upsample_cpu). Backward functions add into the input delta, because an
// output may feed several layers.
#pragma once
#include <vector>

#include "model/net_spec.hpp"

namespace tt {

struct RoutePart {
  const float* data;  // forward: an input map; backward: its delta (written through `delta`)
  float* delta;
  int64_t size;  // floats per sample
};

// out[b] = concat(parts[0][b], parts[1][b], ...)
void route_forward(const std::vector<RoutePart>& parts, float* out, int batch);
// parts[i].delta[b] += the matching slice of dout[b]
void route_backward(const std::vector<RoutePart>& parts, const float* dout, int batch);

// Darknet's reorg_cpu(x, w, h, c, batch, stride, forward, out) with the input's w, h, c:
// [reorg] forward calls it with forward = !reverse, backward with forward = reverse.
// Here `add` adds into `out` instead of overwriting it (for backward).
void darknet_reorg(const float* x, int w, int h, int c, int batch, int stride, bool forward, float* out, bool add);
void reorg_forward(const LayerSpec& l, const float* in, float* out, int batch);
void reorg_backward(const LayerSpec& l, const float* dout, float* din, int batch);

void upsample_forward(const LayerSpec& l, const float* in, float* out, int batch);
void upsample_backward(const LayerSpec& l, const float* dout, float* din, int batch);

}  // namespace tt
