// Batch-norm and activation applied per pixel after a convolution, on any box, in the
// blocked layout nChw{cb}c (padded channels stay zero). Forward is z = act(a[c]*y + b[c]) where
// (a, b) fold the batch-norm (or a = 1, b = 0 without it). Statistics are per-channel
// sums in double over a region the caller chooses (a tile's owned box), so tiles can
// add them up to exact global batch statistics.
#pragma once
#include <cmath>

#include "layers/tensor.hpp"
#include "model/net_spec.hpp"

namespace tt {

// Adds v to the double-double hi + lo with Knuth's TwoSum (an error-free transformation): the
// pair carries the sum to about 2^-100 of its size, so that sums of the same values in
// different orders (a map's tiles) round to the same double but in rare cases.
inline void two_sum_add(double& hi, double& lo, double v) {
  const double t = hi + v, bp = t - hi;
  lo += (hi - (t - bp)) + (v - bp);
  hi = t;
}
// Σ y and Σ y² over `region` (all samples) added, as double-doubles, into sum[c] + sum[C + c]
// and sq[c] + sq[C + c] (C = y.c): the batch statistics, which then do not depend on how the
// map is tiled.
void channel_sums(const TensorView& y, const Box& region, double* sum, double* sq);
// sum[k] += Σ over samples and pixels of channel k of a blocked map [n][c/b][pixels][b],
// in double: the bias gradient of every convolution kernel.
void add_channel_sums(const float* map, int n, int c, int b, long pixels, float* sum);
// z = act(a*y + b) on `region`; y and z may alias.
void affine_act_forward(const TensorView& y, const TensorView& z, const Box& region, const float* a, const float* b,
                        Act act);
// g ← g · act'(a*y + b) on `region`: turns dL/dz into dL/d(pre-activation), in place.
void act_backward(const TensorView& g, const TensorView& y, const Box& region, const float* a, const float* b, Act act);
// act_backward on `region`, then with x̂ = (y - mean)·rstd: sum_g[c] += Σ g,
// sum_gx[c] += Σ g·x̂ over `own` (within region), in one sweep over the rows.
void act_backward_bn_sums(const TensorView& g, const TensorView& y, const Box& region, const Box& own, const float* a,
                          const float* b, Act act, const double* mean, const double* rstd, double* sum_g,
                          double* sum_gx);
// g ← k1[c]·g + k2[c]·(y − mean[c]) + k3[c] on `region` (batch-norm backward folded per
// channel; centring y first avoids cancelling two large terms).
void bn_backward_apply(const TensorView& g, const TensorView& y, const Box& region, const float* k1, const float* k2,
                       const float* k3, const float* mean);

// Inline so that loops over a map inline them and hoist the switch out of the loop.
inline float activate(Act act, float v) {
  switch (act) {
    case Act::Leaky:
      return v > 0 ? v : 0.1f * v;
    case Act::Relu:
      return v > 0 ? v : 0.f;
    case Act::Logistic:
      return 1.f / (1.f + std::exp(-v));
    case Act::Ramp:  // Darknet's x*(x>0) + .1*x, the sum in double
      return float(double(v > 0 ? v : 0.f) + 0.1 * double(v));
    case Act::Linear:
      break;
  }
  return v;
}
// act'(x) at the pre-activation x.
inline float gradient_at_input(Act act, float v) {
  switch (act) {
    case Act::Leaky:
      return v > 0 ? 1.f : 0.1f;
    case Act::Relu:
      return v > 0 ? 1.f : 0.f;
    case Act::Logistic: {
      const float s = 1.f / (1.f + std::exp(-v));
      return s * (1.f - s);
    }
    case Act::Ramp:
      return v > 0 ? 1.1f : 0.1f;
    case Act::Linear:
      break;
  }
  return 1.f;
}
// act'(x) from the activation's output y = act(x), as Darknet's gradient_array computes it.
inline float gradient_at_output(Act act, float y) {
  switch (act) {
    case Act::Leaky:
      return y > 0 ? 1.f : 0.1f;
    case Act::Relu:
      return y > 0 ? 1.f : 0.f;
    case Act::Logistic:
      return (1 - y) * y;
    case Act::Ramp:
      return y > 0 ? 1.1f : 0.1f;
    case Act::Linear:
      break;
  }
  return 1.f;
}

}  // namespace tt
