#include "layers/pointwise.hpp"

#include <cmath>
#include <vector>

#include "layers/affine_act.hpp"
#include "layers/simd_block.hpp"
#include "util/error.hpp"

namespace tt {

namespace {

// Calls f(ptr_a, ptr_b, blk, n_pixels) for each row of `region` in two same-layout views.
template <int B, class F>
void rows2(const TensorView& a, const TensorView& b, const Box& r, F&& f) {
  for (int s = 0; s < a.n; ++s)
    for (int blk = 0; blk < a.cblocks(); ++blk)
      for (int y = r.y0; y < r.y1; ++y) f(a.at(s, blk, y, r.x0), b.at(s, blk, y, r.x0), blk, r.w());
}

template <int B, bool kSquares>
void channel_sums_b(const TensorView& y, const Box& r, double* sum, double* sq) {
  // Double-double accumulators (two_sum_add, lane by lane): which tile adds which cells then
  // changes the statistics by about 2^-100 of their size, below what rounds them to another
  // double but in rare cases; plain double sums rounded to another float in about one run of
  // darknet53 at 128x128 on 2x2 tiles (bench/RESULTS.md, Debian's cfgs).
  using W = Wide<B>;
  const int C = y.c;
  rows2<B>(y, y, r, [&](const float* p, const float*, int blk, int n) {
    typename W::D s[W::N] = {}, se[W::N] = {}, q[W::N] = {}, qe[W::N] = {};
    for (int i = 0; i < n; ++i)
      for (int k = 0; k < W::N; ++k) {
        const typename W::D v = W::load(p + i * B + k * W::L), v2 = v * v;  // v * v is exact in double
        typename W::D t = s[k] + v, bp = t - s[k];
        se[k] += (s[k] - (t - bp)) + (v - bp);
        s[k] = t;
        if constexpr (kSquares) {
          t = q[k] + v2, bp = t - q[k];
          qe[k] += (q[k] - (t - bp)) + (v2 - bp);
          q[k] = t;
        }
      }
    double ss[B], sse[B], qq[B], qqe[B];
    for (int k = 0; k < W::N; ++k) {
      W::store(ss + k * W::L, s[k]);
      W::store(sse + k * W::L, se[k]);
      W::store(qq + k * W::L, q[k]);
      W::store(qqe + k * W::L, qe[k]);
    }
    for (int c = 0; c < B && blk * B + c < C; ++c) {
      const int ch = blk * B + c;
      two_sum_add(sum[ch], sum[C + ch], ss[c]);
      sum[C + ch] += sse[c];
      if constexpr (kSquares) {
        two_sum_add(sq[ch], sq[C + ch], qq[c]);
        sq[C + ch] += qqe[c];
      }
    }
  });
}

template <int B>
void affine_act_forward_b(const TensorView& y, const TensorView& z, const Box& r, const float* a, const float* b,
                          Act act) {
  using K = Block<B>;
  for (int s = 0; s < y.n; ++s)
    for (int blk = 0; blk < y.cblocks(); ++blk) {
      // Each pixel's B channels are loaded before any is stored, so y and z may be the
      // same buffer (in place).
      if (vector_act(act)) {
        with_vector_act(act, [&](auto A) {
          const auto f = affine_act_of<B, A>(a, b, blk, y.c);
          for (int yy = r.y0; yy < r.y1; ++yy) {
            const float* p = y.at(s, blk, yy, r.x0);
            float* q = z.at(s, blk, yy, r.x0);
            for (int i = 0; i < r.w(); ++i) K::store(q + i * B, f(K::load(p + i * B)));
          }
        });
        continue;
      }
      float aa[B], bb[B], mask[B];
      for (int c = 0; c < B; ++c) {
        bool real = blk * B + c < y.c;
        aa[c] = real ? a[blk * B + c] : 0.f;
        bb[c] = real ? b[blk * B + c] : 0.f;
        mask[c] = real ? 1.f : 0.f;
      }
      for (int yy = r.y0; yy < r.y1; ++yy) {
        const float* p = y.at(s, blk, yy, r.x0);
        float* q = z.at(s, blk, yy, r.x0);
        for (int i = 0; i < r.w(); ++i) {
          float v[B];
          for (int c = 0; c < B; ++c) v[c] = aa[c] * p[i * B + c] + bb[c];
          for (int c = 0; c < B; ++c) q[i * B + c] = mask[c] * activate(act, v[c]);
        }
      }
    }
}

// The real channels of block blk of a[] (padded lanes 0): a kernel's per-channel factors.
template <int B, class T>
void block_of(const T* a, int blk, int C, T* out) {
  for (int c = 0; c < B; ++c) out[c] = blk * B + c < C ? a[blk * B + c] : T(0);
}

// d ← d · act'(a*p + b) on n pixels of one row.
template <int B>
void act_row(float* d, const float* p, int n, const float* aa, const float* bb, Act act) {
  using K = Block<B>;
  const typename K::V va = K::load(aa), vb = K::load(bb), zero = K::splat(0.f), one = K::splat(1.f);
  if (act == Act::Leaky || act == Act::Relu) {
    const typename K::V slope = K::splat(act == Act::Leaky ? 0.1f : 0.f);
    for (int i = 0; i < n; ++i)
      K::store(d + i * B, K::load(d + i * B) * (va * K::load(p + i * B) + vb > zero ? one : slope));
  } else if (act != Act::Linear) {
    for (int i = 0; i < n; ++i)
      for (int c = 0; c < B; ++c) d[i * B + c] *= gradient_at_input(act, aa[c] * p[i * B + c] + bb[c]);
  }
}

// sg[c] += Σ d, sgx[c] += Σ d·(p − m)·rs on n pixels of one row.
template <int B>
void sums_row(const float* d, const float* p, int n, const double* m, const double* rs, double* sg, double* sgx) {
  // Double throughout, as in channel_sums: these sums set the mean-removal terms of every
  // delta, which then cancel inside the next weight gradient.
  using W = Wide<B>;
  for (int k = 0; k < W::N; ++k) {
    const int o = k * W::L;
    const typename W::D vm = W::load(m + o), vrs = W::load(rs + o);
    typename W::D g = W::load(sg + o), gx = W::load(sgx + o);
    for (int i = 0; i < n; ++i) {
      const typename W::D dv = W::load(d + i * B + o);
      g += dv;
      gx += dv * (W::load(p + i * B + o) - vm) * vrs;
    }
    W::store(sg + o, g);
    W::store(sgx + o, gx);
  }
}

template <int B>
void act_backward_b(const TensorView& g, const TensorView& y, const Box& r, const float* a, const float* b, Act act) {
  if (act == Act::Linear) return;
  for (int s = 0; s < g.n; ++s)
    for (int blk = 0; blk < g.cblocks(); ++blk) {
      float aa[B], bb[B];
      block_of<B>(a, blk, g.c, aa);
      block_of<B>(b, blk, g.c, bb);
      for (int yy = r.y0; yy < r.y1; ++yy)
        act_row<B>(g.at(s, blk, yy, r.x0), y.at(s, blk, yy, r.x0), r.w(), aa, bb, act);
    }
}

template <int B>
void act_backward_bn_sums_b(const TensorView& g, const TensorView& y, const Box& r, const Box& own, const float* a,
                            const float* b, Act act, const double* mean, const double* rstd, double* sum_g,
                            double* sum_gx) {
  for (int s = 0; s < g.n; ++s)
    for (int blk = 0; blk < g.cblocks(); ++blk) {
      float aa[B], bb[B];
      block_of<B>(a, blk, g.c, aa);
      block_of<B>(b, blk, g.c, bb);
      double m[B], rs[B], sg[B] = {}, sgx[B] = {};
      block_of<B>(mean, blk, g.c, m);
      block_of<B>(rstd, blk, g.c, rs);
      // One sweep: each row is summed while still in cache from its activation pass.
      for (int yy = r.y0; yy < r.y1; ++yy) {
        act_row<B>(g.at(s, blk, yy, r.x0), y.at(s, blk, yy, r.x0), r.w(), aa, bb, act);
        if (yy >= own.y0 && yy < own.y1)
          sums_row<B>(g.at(s, blk, yy, own.x0), y.at(s, blk, yy, own.x0), own.w(), m, rs, sg, sgx);
      }
      for (int c = 0; c < B && blk * B + c < g.c; ++c) {
        sum_g[blk * B + c] += sg[c];
        sum_gx[blk * B + c] += sgx[c];
      }
    }
}

template <int B>
void bn_backward_apply_b(const TensorView& g, const TensorView& y, const Box& r, const float* k1, const float* k2,
                         const float* k3, const float* mean) {
  for (int s = 0; s < g.n; ++s)
    for (int blk = 0; blk < g.cblocks(); ++blk) {
      float a[B], b[B], c3[B], m[B];
      for (int c = 0; c < B; ++c) {
        bool real = blk * B + c < g.c;
        a[c] = real ? k1[blk * B + c] : 0.f;
        b[c] = real ? k2[blk * B + c] : 0.f;
        c3[c] = real ? k3[blk * B + c] : 0.f;
        m[c] = real ? mean[blk * B + c] : 0.f;
      }
      for (int yy = r.y0; yy < r.y1; ++yy) {
        float* d = g.at(s, blk, yy, r.x0);
        const float* p = y.at(s, blk, yy, r.x0);
        using K = Block<B>;
        const typename K::V va = K::load(a), vb = K::load(b), vc = K::load(c3), vm = K::load(m);
        for (int i = 0; i < r.w(); ++i)
          K::store(d + i * B, va * K::load(d + i * B) + vb * (K::load(p + i * B) - vm) + vc);
      }
    }
}

}  // namespace

void channel_sums(const TensorView& y, const Box& r, double* sum, double* sq) {
  with_block(y.cb, [&](auto B) { channel_sums_b<B, true>(y, r, sum, sq); });
}
void add_channel_sums(const float* map, int n, int c, int b, long pixels, float* sum) {
  // In double: a bias gradient is often a small sum of large terms, and the float sums of
  // oneDNN, OpenBLAS and a vector kernel differ from each other by several times the
  // rounding of the result (a layer's tiled and untiled runs may use different kernels).
  const TensorView v{const_cast<float*>(map), n, c, b, Box{0, 1, 0, int(pixels)}};  // pixels as one row
  std::vector<double> s(2 * size_t(c), 0.);                                         // double-doubles: hi, then lo
  with_block(b, [&](auto B) { channel_sums_b<B, false>(v, v.box, s.data(), nullptr); });
  for (int k = 0; k < c; ++k) sum[k] += float(s[size_t(k)] + s[size_t(c + k)]);
}
void affine_act_forward(const TensorView& y, const TensorView& z, const Box& r, const float* a, const float* b,
                        Act act) {
  with_block(y.cb, [&](auto B) { affine_act_forward_b<B>(y, z, r, a, b, act); });
}
void act_backward(const TensorView& g, const TensorView& y, const Box& r, const float* a, const float* b, Act act) {
  with_block(g.cb, [&](auto B) { act_backward_b<B>(g, y, r, a, b, act); });
}
void act_backward_bn_sums(const TensorView& g, const TensorView& y, const Box& region, const Box& own, const float* a,
                          const float* b, Act act, const double* mean, const double* rstd, double* sum_g,
                          double* sum_gx) {
  if (!contains(region, own))
    fail("internal: batch-norm sums over ", own.str(), ", outside the activation's box ", region.str());
  with_block(g.cb, [&](auto B) { act_backward_bn_sums_b<B>(g, y, region, own, a, b, act, mean, rstd, sum_g, sum_gx); });
}
void bn_backward_apply(const TensorView& g, const TensorView& y, const Box& r, const float* k1, const float* k2,
                       const float* k3, const float* mean) {
  with_block(g.cb, [&](auto B) { bn_backward_apply_b<B>(g, y, r, k1, k2, k3, mean); });
}

}  // namespace tt
