#include "layers/grouped_conv.hpp"

#include <algorithm>
#include <cstddef>

#include "util/error.hpp"

namespace tt {

using tag = dnnl::memory::format_tag;

dnnl::memory::dims conv_weights_dims(int oc, int ic, int k, int groups) {
  if (groups == 1) return {oc, ic, k, k};
  return {groups, oc / groups, ic / groups, k, k};
}

dnnl::memory::desc plain_conv_weights_desc(int oc, int ic, int k, int groups) {
  return {conv_weights_dims(oc, ic, k, groups), dnnl::memory::data_type::f32, groups == 1 ? tag::oihw : tag::goihw};
}

bool grouped_is_depthwise(const OwnConvShape& s, int groups) { return groups == s.ic && groups == s.oc && s.ib == s.b; }

tag grouped_weights_tag(const OwnConvShape& s, int groups, OwnPass pass) {
  if (pass != OwnPass::BackwardWeights && grouped_is_depthwise(s, groups))
    return s.b == 8 ? tag::Goihw8g : tag::Goihw16g;
  return tag::goihw;
}

namespace {

int cdiv(int a, int b) { return (a + b - 1) / b; }

// One blocked (or plain, cb = 1) map: where channel c of pixel (y, x) of image n is.
struct MapIndex {
  int c, cb, h, w;
  size_t operator()(int n, int ch, int y, int x) const {
    return ((((size_t(n) * size_t(cdiv(c, cb)) + size_t(ch / cb)) * size_t(h) + size_t(y)) * size_t(w) + size_t(x)) *
            size_t(cb)) +
           size_t(ch % cb);
  }
  int padded() const { return cdiv(c, cb) * cb; }
};

void check(const OwnConvShape& s, int groups) {
  if (groups < 1 || s.ic % groups || s.oc % groups)
    fail("internal: groups=", groups, " does not divide ", s.ic, " input and ", s.oc, " output channels");
  if (s.b != 8 && s.b != 16) fail("internal: grouped convolution on a channel block of ", s.b, " (8 or 16)");
  if (s.ib != 1 && s.ib != s.b) fail("internal: grouped convolution input block ", s.ib, " with output block ", s.b);
}

// Depthwise, one channel block of B lanes at a time. Weights Goihw{B}g: [C/B][k][k][B].
template <int B>
void depthwise_forward(const OwnConvShape& s, const float* src, const float* w, const float* bias, float* dst) {
  const MapIndex in{s.ic, B, s.ih, s.iw}, out{s.oc, B, s.oh, s.ow};
  const int CB = cdiv(s.oc, B), kk = s.k * s.k;
#pragma omp parallel for collapse(2) schedule(static)
  for (int n = 0; n < s.n; ++n)
    for (int cbk = 0; cbk < CB; ++cbk) {
      const float* wb = w + size_t(cbk) * size_t(kk) * B;
      for (int oy = 0; oy < s.oh; ++oy)
        for (int ox = 0; ox < s.ow; ++ox) {
          float acc[B] = {};
          for (int ky = 0; ky < s.k; ++ky) {
            const int iy = oy * s.s + ky - s.pt;
            if (iy < 0 || iy >= s.ih) continue;
            for (int kx = 0; kx < s.k; ++kx) {
              const int ix = ox * s.s + kx - s.pl;
              if (ix < 0 || ix >= s.iw) continue;
              const float* x = src + in(n, cbk * B, iy, ix);
              const float* wv = wb + size_t(ky * s.k + kx) * B;
              for (int L = 0; L < B; ++L) acc[L] += x[L] * wv[L];
            }
          }
          float* y = dst + out(n, cbk * B, oy, ox);
          for (int L = 0; L < B; ++L) {
            const int c = cbk * B + L;
            y[L] = c < s.oc ? (bias ? acc[L] + bias[c] : acc[L]) : 0.f;
          }
        }
    }
}

template <int B>
void depthwise_backward_data(const OwnConvShape& s, const float* diff_dst, const float* w, float* diff_src) {
  const MapIndex in{s.ic, B, s.ih, s.iw}, out{s.oc, B, s.oh, s.ow};
  const int CB = cdiv(s.ic, B), kk = s.k * s.k;
#pragma omp parallel for collapse(2) schedule(static)
  for (int n = 0; n < s.n; ++n)
    for (int cbk = 0; cbk < CB; ++cbk) {
      const float* wb = w + size_t(cbk) * size_t(kk) * B;
      for (int iy = 0; iy < s.ih; ++iy)
        for (int ix = 0; ix < s.iw; ++ix) {
          float acc[B] = {};
          for (int ky = 0; ky < s.k; ++ky) {
            const int ty = iy + s.pt - ky;
            if (ty < 0 || ty % s.s) continue;
            const int oy = ty / s.s;
            if (oy >= s.oh) continue;
            for (int kx = 0; kx < s.k; ++kx) {
              const int tx = ix + s.pl - kx;
              if (tx < 0 || tx % s.s) continue;
              const int ox = tx / s.s;
              if (ox >= s.ow) continue;
              const float* d = diff_dst + out(n, cbk * B, oy, ox);
              const float* wv = wb + size_t(ky * s.k + kx) * B;
              for (int L = 0; L < B; ++L) acc[L] += d[L] * wv[L];
            }
          }
          float* x = diff_src + in(n, cbk * B, iy, ix);
          for (int L = 0; L < B; ++L) x[L] = cbk * B + L < s.ic ? acc[L] : 0.f;
        }
    }
}

template <int B>
void depthwise_backward_weights(const OwnConvShape& s, const float* src, const float* diff_dst, float* diff_w,
                                bool accumulate) {
  const MapIndex in{s.ic, B, s.ih, s.iw}, out{s.oc, B, s.oh, s.ow};
  const int CB = cdiv(s.oc, B), kk = s.k * s.k;
#pragma omp parallel for collapse(3) schedule(static)
  for (int cbk = 0; cbk < CB; ++cbk)
    for (int ky = 0; ky < s.k; ++ky)
      for (int kx = 0; kx < s.k; ++kx) {
        float acc[B] = {};
        for (int n = 0; n < s.n; ++n)
          for (int oy = 0; oy < s.oh; ++oy) {
            const int iy = oy * s.s + ky - s.pt;
            if (iy < 0 || iy >= s.ih) continue;
            for (int ox = 0; ox < s.ow; ++ox) {
              const int ix = ox * s.s + kx - s.pl;
              if (ix < 0 || ix >= s.iw) continue;
              const float* x = src + in(n, cbk * B, iy, ix);
              const float* d = diff_dst + out(n, cbk * B, oy, ox);
              for (int L = 0; L < B; ++L) acc[L] += x[L] * d[L];
            }
          }
        for (int L = 0; L < B && cbk * B + L < s.oc; ++L) {
          float& g = diff_w[size_t(cbk * B + L) * size_t(kk) + size_t(ky * s.k + kx)];
          g = accumulate ? g + acc[L] : acc[L];
        }
      }
}

void generic_forward(const OwnConvShape& s, int groups, const float* src, const float* w, const float* bias,
                     float* dst) {
  const MapIndex in{s.ic, s.ib, s.ih, s.iw}, out{s.oc, s.b, s.oh, s.ow};
  const int icg = s.ic / groups, ocg = s.oc / groups, O = out.padded();
#pragma omp parallel for collapse(2) schedule(static)
  for (int n = 0; n < s.n; ++n)
    for (int o = 0; o < O; ++o) {
      const int q = o / ocg;
      const float* wo = w + size_t(o) * size_t(icg) * size_t(s.k) * size_t(s.k);
      for (int oy = 0; oy < s.oh; ++oy)
        for (int ox = 0; ox < s.ow; ++ox) {
          float acc = 0.f;
          if (o < s.oc) {
            for (int j = 0; j < icg; ++j)
              for (int ky = 0; ky < s.k; ++ky) {
                const int iy = oy * s.s + ky - s.pt;
                if (iy < 0 || iy >= s.ih) continue;
                for (int kx = 0; kx < s.k; ++kx) {
                  const int ix = ox * s.s + kx - s.pl;
                  if (ix < 0 || ix >= s.iw) continue;
                  acc += src[in(n, q * icg + j, iy, ix)] * wo[size_t((j * s.k + ky) * s.k + kx)];
                }
              }
            if (bias) acc += bias[o];
          }
          dst[out(n, o, oy, ox)] = acc;
        }
    }
}

void generic_backward_data(const OwnConvShape& s, int groups, const float* diff_dst, const float* w, float* diff_src) {
  const MapIndex in{s.ic, s.ib, s.ih, s.iw}, out{s.oc, s.b, s.oh, s.ow};
  const int icg = s.ic / groups, ocg = s.oc / groups, I = in.padded();
#pragma omp parallel for collapse(2) schedule(static)
  for (int n = 0; n < s.n; ++n)
    for (int ci = 0; ci < I; ++ci) {
      const int q = ci / icg, j = ci % icg;
      for (int iy = 0; iy < s.ih; ++iy)
        for (int ix = 0; ix < s.iw; ++ix) {
          float acc = 0.f;
          if (ci < s.ic)
            for (int oo = 0; oo < ocg; ++oo) {
              const int o = q * ocg + oo;
              const float* wo = w + (size_t(o) * size_t(icg) + size_t(j)) * size_t(s.k) * size_t(s.k);
              for (int ky = 0; ky < s.k; ++ky) {
                const int ty = iy + s.pt - ky;
                if (ty < 0 || ty % s.s || ty / s.s >= s.oh) continue;
                for (int kx = 0; kx < s.k; ++kx) {
                  const int tx = ix + s.pl - kx;
                  if (tx < 0 || tx % s.s || tx / s.s >= s.ow) continue;
                  acc += diff_dst[out(n, o, ty / s.s, tx / s.s)] * wo[ky * s.k + kx];
                }
              }
            }
          diff_src[in(n, ci, iy, ix)] = acc;
        }
    }
}

void generic_backward_weights(const OwnConvShape& s, int groups, const float* src, const float* diff_dst, float* diff_w,
                              bool accumulate) {
  const MapIndex in{s.ic, s.ib, s.ih, s.iw}, out{s.oc, s.b, s.oh, s.ow};
  const int icg = s.ic / groups, ocg = s.oc / groups;
#pragma omp parallel for collapse(2) schedule(static)
  for (int o = 0; o < s.oc; ++o)
    for (int j = 0; j < icg; ++j) {
      const int ci = o / ocg * icg + j;
      for (int ky = 0; ky < s.k; ++ky)
        for (int kx = 0; kx < s.k; ++kx) {
          float acc = 0.f;
          for (int n = 0; n < s.n; ++n)
            for (int oy = 0; oy < s.oh; ++oy) {
              const int iy = oy * s.s + ky - s.pt;
              if (iy < 0 || iy >= s.ih) continue;
              for (int ox = 0; ox < s.ow; ++ox) {
                const int ix = ox * s.s + kx - s.pl;
                if (ix < 0 || ix >= s.iw) continue;
                acc += src[in(n, ci, iy, ix)] * diff_dst[out(n, o, oy, ox)];
              }
            }
          float& g =
              diff_w[((size_t(o) * size_t(icg) + size_t(j)) * size_t(s.k) + size_t(ky)) * size_t(s.k) + size_t(kx)];
          g = accumulate ? g + acc : acc;
        }
    }
}

}  // namespace

void grouped_conv_forward(const OwnConvShape& s, int groups, const float* src, const float* w, const float* bias,
                          float* dst) {
  check(s, groups);
  if (!grouped_is_depthwise(s, groups)) return generic_forward(s, groups, src, w, bias, dst);
  if (s.b == 8) return depthwise_forward<8>(s, src, w, bias, dst);
  depthwise_forward<16>(s, src, w, bias, dst);
}

void grouped_conv_backward_data(const OwnConvShape& s, int groups, const float* diff_dst, const float* w,
                                float* diff_src) {
  check(s, groups);
  if (!grouped_is_depthwise(s, groups)) return generic_backward_data(s, groups, diff_dst, w, diff_src);
  if (s.b == 8) return depthwise_backward_data<8>(s, diff_dst, w, diff_src);
  depthwise_backward_data<16>(s, diff_dst, w, diff_src);
}

void grouped_conv_backward_weights(const OwnConvShape& s, int groups, const float* src, const float* diff_dst,
                                   float* diff_w, float* diff_b, bool accumulate) {
  check(s, groups);
  if (!grouped_is_depthwise(s, groups))
    generic_backward_weights(s, groups, src, diff_dst, diff_w, accumulate);
  else if (s.b == 8)
    depthwise_backward_weights<8>(s, src, diff_dst, diff_w, accumulate);
  else
    depthwise_backward_weights<16>(s, src, diff_dst, diff_w, accumulate);
  if (!diff_b) return;
  const MapIndex out{s.oc, s.b, s.oh, s.ow};
  for (int o = 0; o < s.oc; ++o) {
    float acc = 0.f;
    for (int n = 0; n < s.n; ++n)
      for (int oy = 0; oy < s.oh; ++oy)
        for (int ox = 0; ox < s.ow; ++ox) acc += diff_dst[out(n, o, oy, ox)];
    diff_b[o] = acc;
  }
}

}  // namespace tt
