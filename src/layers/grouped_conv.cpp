#include "layers/grouped_conv.hpp"

#include <algorithm>
#include <bit>
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

const char* grouped_kernel_name(const OwnConvShape& s, int groups) {
  return grouped_is_depthwise(s, groups) ? "own:depthwise" : "own:grouped";
}

tag grouped_weights_tag(const OwnConvShape& s, int groups, OwnPass pass) {
  if (pass != OwnPass::BackwardWeights && grouped_is_depthwise(s, groups))
    return s.b == 8 ? tag::Goihw8g : tag::Goihw16g;
  return tag::goihw;
}

namespace {

int cdiv(int a, int b) { return (a + b - 1) / b; }

// One blocked (or plain, cb = 1) map: where channel ch of pixel (y, x) of image n is. The
// block is a power of two (1, 8 or 16): shifts and masks, no divisions per access.
struct MapIndex {
  MapIndex(int c, int cb, int h, int w)
      : cb(cb), shift(std::countr_zero(unsigned(cb))), blocks(size_t(cdiv(c, cb))), h(size_t(h)), w(size_t(w)) {}
  size_t operator()(int n, int ch, int y, int x) const {
    return (((size_t(n) * blocks + size_t(ch >> shift)) * h + size_t(y)) * w + size_t(x)) * size_t(cb) +
           size_t(ch & (cb - 1));
  }
  int padded() const { return int(blocks) * cb; }
  int cb, shift;
  size_t blocks, h, w;
};

void check(const OwnConvShape& s, int groups) {
  if (groups < 1 || s.ic % groups || s.oc % groups)
    fail("internal: groups=", groups, " does not divide ", s.ic, " input and ", s.oc, " output channels");
  if (s.b != 8 && s.b != 16) fail("internal: grouped convolution on a channel block of ", s.b, " (8 or 16)");
  if (s.ib != 1 && s.ib != s.b) fail("internal: grouped convolution input block ", s.ib, " with output block ", s.b);
}

// Depthwise, one channel block of B lanes at a time. Weights Goihw{B}g: [C/B][k][k][B].
// Pointers step by whole pixels (B floats); the taps inside the map are found per output
// row and column, so the inner loops have no bounds checks and keep B sums in registers.
template <int B>
void depthwise_forward(const OwnConvShape& s, const float* src, const float* w, const float* bias, float* dst) {
  const int CB = cdiv(s.oc, B), k = s.k;
  const size_t in_plane = size_t(s.ih) * s.iw * B, out_plane = size_t(s.oh) * s.ow * B;
#pragma omp parallel for collapse(2) schedule(static)
  for (int n = 0; n < s.n; ++n)
    for (int cbk = 0; cbk < CB; ++cbk) {
      const float* wb = w + size_t(cbk) * size_t(k * k) * B;
      const float* in = src + (size_t(n) * CB + size_t(cbk)) * in_plane;
      float* out = dst + (size_t(n) * CB + size_t(cbk)) * out_plane;
      float b[B];
      for (int L = 0; L < B; ++L) b[L] = bias && cbk * B + L < s.oc ? bias[cbk * B + L] : 0.f;
      for (int oy = 0; oy < s.oh; ++oy) {
        const int y0 = oy * s.s - s.pt, ky0 = std::max(0, -y0), ky1 = std::min(k, s.ih - y0);
        for (int ox = 0; ox < s.ow; ++ox) {
          const int x0 = ox * s.s - s.pl, kx0 = std::max(0, -x0), kx1 = std::min(k, s.iw - x0);
          float acc[B] = {};
          for (int ky = ky0; ky < ky1; ++ky) {
            const float* row = in + (size_t(y0 + ky) * s.iw + size_t(x0 + kx0)) * B;  // the first tap inside
            const float* wr = wb + size_t(ky * k + kx0) * B;
            for (int t = 0; t < kx1 - kx0; ++t)
              for (int L = 0; L < B; ++L) acc[L] += row[t * B + L] * wr[t * B + L];
          }
          float* y = out + (size_t(oy) * s.ow + size_t(ox)) * B;
          if (bias)
            for (int L = 0; L < B; ++L) y[L] = acc[L] + b[L];
          else
            for (int L = 0; L < B; ++L) y[L] = acc[L];
        }
      }
    }
}

// The taps k of a window (0 <= k < size) that reach input cell a - k = o * stride of an
// output o in [0, outputs), for a = input cell + padding: first, first + stride, ... last
// (none when first > last). Ascending, as the generic loops skip their way through them.
struct Taps {
  int first, last;
};
Taps taps(int a, int size, int stride, int outputs) {
  const int lo = std::max(0, a - (outputs - 1) * stride), hi = std::min(size - 1, a);
  if (lo > hi) return {1, 0};
  return {lo + (a - lo) % stride, hi};
}

template <int B>
void depthwise_backward_data(const OwnConvShape& s, const float* diff_dst, const float* w, float* diff_src) {
  const int CB = cdiv(s.ic, B), k = s.k;
  const size_t in_plane = size_t(s.ih) * s.iw * B, out_plane = size_t(s.oh) * s.ow * B;
#pragma omp parallel for collapse(2) schedule(static)
  for (int n = 0; n < s.n; ++n)
    for (int cbk = 0; cbk < CB; ++cbk) {
      const float* wb = w + size_t(cbk) * size_t(k * k) * B;
      const float* d = diff_dst + (size_t(n) * CB + size_t(cbk)) * out_plane;
      float* dx = diff_src + (size_t(n) * CB + size_t(cbk)) * in_plane;
      for (int iy = 0; iy < s.ih; ++iy) {
        const Taps ty = taps(iy + s.pt, k, s.s, s.oh);
        for (int ix = 0; ix < s.iw; ++ix) {
          const Taps tx = taps(ix + s.pl, k, s.s, s.ow);
          float acc[B] = {};
          for (int ky = ty.first; ky <= ty.last; ky += s.s) {
            const float* drow = d + size_t((iy + s.pt - ky) / s.s) * s.ow * B;
            const float* wr = wb + size_t(ky * k) * B;
            for (int kx = tx.first; kx <= tx.last; kx += s.s) {
              const float* dv = drow + size_t((ix + s.pl - kx) / s.s) * B;
              for (int L = 0; L < B; ++L) acc[L] += dv[L] * wr[kx * B + L];
            }
          }
          float* x = dx + (size_t(iy) * s.iw + size_t(ix)) * B;
          for (int L = 0; L < B; ++L) x[L] = acc[L];
        }
      }
    }
}

template <int B>
void depthwise_backward_weights(const OwnConvShape& s, const float* src, const float* diff_dst, float* diff_w,
                                bool accumulate) {
  const int CB = cdiv(s.oc, B), k = s.k, kk = k * k;
  const size_t in_plane = size_t(s.ih) * s.iw * B, out_plane = size_t(s.oh) * s.ow * B;
#pragma omp parallel for collapse(3) schedule(static)
  for (int cbk = 0; cbk < CB; ++cbk)
    for (int ky = 0; ky < k; ++ky)
      for (int kx = 0; kx < k; ++kx) {
        float acc[B] = {};
        // Output columns whose tap (ky, kx) lies inside the input: [ox0, ox1).
        const int ox0 = std::max(0, cdiv(s.pl - kx, s.s)), ox1 = std::min(s.ow, cdiv(s.iw + s.pl - kx, s.s));
        for (int n = 0; n < s.n; ++n) {
          const float* in = src + (size_t(n) * CB + size_t(cbk)) * in_plane;
          const float* d = diff_dst + (size_t(n) * CB + size_t(cbk)) * out_plane;
          for (int oy = 0; oy < s.oh; ++oy) {
            const int iy = oy * s.s + ky - s.pt;
            if (iy < 0 || iy >= s.ih) continue;
            const float* drow = d + size_t(oy) * s.ow * B;
            const float* irow = in + size_t(iy) * s.iw * B;
            for (int ox = ox0; ox < ox1; ++ox) {
              const float* x = irow + size_t(ox * s.s + kx - s.pl) * B;
              const float* dv = drow + size_t(ox) * B;
              for (int L = 0; L < B; ++L) acc[L] += x[L] * dv[L];
            }
          }
        }
        for (int L = 0; L < B && cbk * B + L < s.oc; ++L) {
          float& g = diff_w[size_t(cbk * B + L) * size_t(kk) + size_t(ky * k + kx)];
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
      for (int oy = 0; oy < s.oh; ++oy) {
        const int y0 = oy * s.s - s.pt, ky0 = std::max(0, -y0), ky1 = std::min(s.k, s.ih - y0);
        for (int ox = 0; ox < s.ow; ++ox) {
          const int x0 = ox * s.s - s.pl, kx0 = std::max(0, -x0), kx1 = std::min(s.k, s.iw - x0);
          float acc = 0.f;
          if (o < s.oc) {
            for (int j = 0; j < icg; ++j)
              for (int ky = ky0; ky < ky1; ++ky) {
                const float* x = src + in(n, q * icg + j, y0 + ky, x0 + kx0);  // the first tap inside
                const float* wr = wo + size_t((j * s.k + ky) * s.k + kx0);
                for (int t = 0; t < kx1 - kx0; ++t) acc += x[t * s.ib] * wr[t];
              }
            if (bias) acc += bias[o];
          }
          dst[out(n, o, oy, ox)] = acc;
        }
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
      for (int iy = 0; iy < s.ih; ++iy) {
        const Taps ty = taps(iy + s.pt, s.k, s.s, s.oh);
        for (int ix = 0; ix < s.iw; ++ix) {
          const Taps tx = taps(ix + s.pl, s.k, s.s, s.ow);
          float acc = 0.f;
          if (ci < s.ic)
            for (int oo = 0; oo < ocg; ++oo) {
              const int o = q * ocg + oo;
              const float* wo = w + (size_t(o) * size_t(icg) + size_t(j)) * size_t(s.k) * size_t(s.k);
              for (int ky = ty.first; ky <= ty.last; ky += s.s)
                for (int kx = tx.first; kx <= tx.last; kx += s.s)
                  acc += diff_dst[out(n, o, (iy + s.pt - ky) / s.s, (ix + s.pl - kx) / s.s)] * wo[ky * s.k + kx];
            }
          diff_src[in(n, ci, iy, ix)] = acc;
        }
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
          const int ox0 = std::max(0, cdiv(s.pl - kx, s.s)), ox1 = std::min(s.ow, cdiv(s.iw + s.pl - kx, s.s));
          for (int n = 0; n < s.n; ++n)
            for (int oy = 0; oy < s.oh; ++oy) {
              const int iy = oy * s.s + ky - s.pt;
              if (iy < 0 || iy >= s.ih || ox0 >= ox1) continue;
              const float* x = src + in(n, ci, iy, ox0 * s.s + kx - s.pl);
              const float* d = diff_dst + out(n, o, oy, ox0);
              for (int t = 0; t < ox1 - ox0; ++t) acc += x[size_t(t) * s.s * s.ib] * d[size_t(t) * s.b];
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
