#include "layers/reshape_ops.hpp"

#include <algorithm>

namespace tt {

void route_forward(const std::vector<RoutePart>& parts, float* out, int batch) {
  int64_t total = 0;
  for (const RoutePart& p : parts) total += p.size;
  for (int b = 0; b < batch; ++b) {
    float* o = out + b * total;
    for (const RoutePart& p : parts) o = std::copy_n(p.data + b * p.size, p.size, o);
  }
}

void route_backward(const std::vector<RoutePart>& parts, const float* dout, int batch) {
  int64_t total = 0;
  for (const RoutePart& p : parts) total += p.size;
  for (int b = 0; b < batch; ++b) {
    const float* g = dout + b * total;
    for (const RoutePart& p : parts) {
      float* d = p.delta + b * p.size;
      for (int64_t i = 0; i < p.size; ++i) d[i] += g[i];
      g += p.size;
    }
  }
}

void darknet_reorg(const float* x, int w, int h, int c, int batch, int stride, bool forward, float* out, bool add) {
  const int out_c = c / (stride * stride);
  for (int b = 0; b < batch; ++b)
    for (int k = 0; k < c; ++k)
      for (int j = 0; j < h; ++j)
        for (int i = 0; i < w; ++i) {
          const int64_t in_index = i + int64_t(w) * (j + int64_t(h) * (k + int64_t(c) * b));
          const int c2 = k % out_c, offset = k / out_c;
          const int w2 = i * stride + offset % stride, h2 = j * stride + offset / stride;
          const int64_t out_index = w2 + int64_t(w) * stride * (h2 + int64_t(h) * stride * (c2 + int64_t(out_c) * b));
          const int64_t to = forward ? out_index : in_index, from = forward ? in_index : out_index;
          out[to] = add ? out[to] + x[from] : x[from];
        }
}

// Darknet passes the layer's input dimensions; forward_reorg_layer uses forward = 0 for a
// plain reorg (the famous "backwards" index order of YOLOv2's passthrough layer).
void reorg_forward(const LayerSpec& l, const float* in, float* out, int batch) {
  darknet_reorg(in, l.in.w, l.in.h, l.in.c, batch, l.reorg().stride, l.reorg().reverse, out, false);
}

void reorg_backward(const LayerSpec& l, const float* dout, float* din, int batch) {
  darknet_reorg(dout, l.in.w, l.in.h, l.in.c, batch, l.reorg().stride, !l.reorg().reverse, din, true);
}

// Darknet's upsample_cpu(in, w, h, c, batch, stride, forward, scale, out) with w, h the
// small map's size: forward writes out = scale * in, backward adds in += scale * out.
static void upsample_cpu(float* small, int w, int h, int c, int batch, int s, bool forward, float scale, float* big) {
  for (int b = 0; b < batch; ++b)
    for (int k = 0; k < c; ++k)
      for (int j = 0; j < h * s; ++j)
        for (int i = 0; i < w * s; ++i) {
          const int64_t in_index = int64_t(b) * w * h * c + int64_t(k) * w * h + (j / s) * w + i / s;
          const int64_t out_index =
              int64_t(b) * w * h * c * s * s + int64_t(k) * w * h * s * s + int64_t(j) * w * s + i;
          if (forward)
            big[out_index] = scale * small[in_index];
          else
            small[in_index] += scale * big[out_index];
        }
}

void upsample_forward(const LayerSpec& l, const float* in, float* out, int batch) {
  const UpsampleParams& u = l.upsample();
  if (u.reverse) {  // downsample: each output sums its stride x stride inputs
    std::fill_n(out, batch * l.out.size(), 0.f);
    upsample_cpu(out, l.out.w, l.out.h, l.out.c, batch, u.stride, false, u.scale, const_cast<float*>(in));
  } else {
    upsample_cpu(const_cast<float*>(in), l.in.w, l.in.h, l.in.c, batch, u.stride, true, u.scale, out);
  }
}

void upsample_backward(const LayerSpec& l, const float* dout, float* din, int batch) {
  const UpsampleParams& u = l.upsample();
  if (u.reverse) {
    const int s = u.stride, w = l.out.w, h = l.out.h, c = l.out.c;
    for (int b = 0; b < batch; ++b)  // din[big] += scale * dout[small]
      for (int k = 0; k < c; ++k)
        for (int j = 0; j < h * s; ++j)
          for (int i = 0; i < w * s; ++i)
            din[int64_t(b) * w * h * c * s * s + int64_t(k) * w * h * s * s + int64_t(j) * w * s + i] +=
                u.scale * dout[int64_t(b) * w * h * c + int64_t(k) * w * h + (j / s) * w + i / s];
  } else {
    upsample_cpu(din, l.in.w, l.in.h, l.in.c, batch, u.stride, false, u.scale, const_cast<float*>(dout));
  }
}

}  // namespace tt
