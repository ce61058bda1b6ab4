// Layer kernels against naive loops in double: convolution on every kernel path (forward,
// backward data, backward weights; oneDNN and own kernels), Darknet max-pooling, the pointwise batch-norm/activation
// kernels and the dense head. Each spatial kernel is also checked on boxes ("ready for
// tiles"): a box computes exactly the matching region of the full-map result.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "layers/conv.hpp"
#include "layers/dense.hpp"
#include "layers/grouped_conv.hpp"
#include "layers/maxpool.hpp"
#include "layers/pointwise.hpp"
#include "layers/tensor.hpp"
#include "test_util.hpp"

namespace tt {
namespace {

using Rng = std::mt19937_64;
constexpr double kTol = 1e-5;  // per tensor, ||a-b||/||b|| against the double reference

std::vector<float> uniform(Rng& rng, size_t n, float lo = -1.f, float hi = 1.f) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}
int randint(Rng& rng, int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); }

// rel_diff of a float result against a double reference.
double rel_diff(const std::vector<float>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

// (Box::str() trips a GCC 12 -Wrestrict false positive when inlined here.)
std::string box_str(const Box& b) {
  char s[96];
  std::snprintf(s, sizeof s, "box [%d,%d)x[%d,%d)", b.y0, b.y1, b.x0, b.x1);
  return s;
}

// Splits [0, n) at up to two random interior points: the first, middle and last pieces
// make corner, edge and interior boxes.
std::vector<int> cuts(Rng& rng, int n) {
  std::vector<int> c{0};
  if (n >= 3) {
    int a = randint(rng, 1, n - 2);
    int b = randint(rng, a + 1, n - 1);
    c.push_back(a);
    c.push_back(b);
  } else if (n == 2) {
    c.push_back(1);
  }
  c.push_back(n);
  return c;
}
std::vector<Box> partition(Rng& rng, int h, int w) {
  std::vector<int> ys = cuts(rng, h), xs = cuts(rng, w);
  std::vector<Box> out;
  for (size_t i = 0; i + 1 < ys.size(); ++i)
    for (size_t j = 0; j + 1 < xs.size(); ++j) out.push_back({ys[i], ys[i + 1], xs[j], xs[j + 1]});
  return out;
}

// Outputs of an oh x ow map whose window reads input cell (y, x), by brute force.
bool touching_outputs_inside(int y, int x, const Window& w, int oh, int ow, const Box& o) {
  for (int oy = 0; oy < oh; ++oy)
    for (int ox = 0; ox < ow; ++ox) {
      const int y0 = oy * w.stride - w.pad, x0 = ox * w.stride - w.pad;
      const bool reads = y >= y0 && y < y0 + w.size && x >= x0 && x < x0 + w.size;
      if (reads && !(oy >= o.y0 && oy < o.y1 && ox >= o.x0 && ox < o.x1)) return false;
    }
  return true;
}

// A plain NCHW map and converters to/from a (possibly blocked) box buffer.
struct Map {
  int n, c, h, w;
  std::vector<float> v;
  TensorView view() { return {v.data(), n, c, 1, full_box(h, w)}; }
  float& at(int s, int ch, int y, int x) { return v[((size_t(s) * c + ch) * h + y) * w + x]; }
};
struct Blocked {
  Buffer buf;
  TensorView t;
  Blocked(int n, int c, int cb, const Box& b) : buf(size_t(tensor_floats(n, c, cb, b))), t{buf.data(), n, c, cb, b} {}
};
Blocked to_box(Map& m, int cb, const Box& b) {
  Blocked r(m.n, m.c, cb, b);
  copy_region(m.view(), r.t, b);
  return r;
}
Map to_map(const TensorView& t, int h, int w) {
  Map m{t.n, t.c, h, w, std::vector<float>(size_t(t.n) * t.c * h * w, 0.f)};
  copy_region(t, m.view(), t.box);
  return m;
}
// True when every padded channel (c..cblocks*cb) of a blocked view is zero.
bool padded_channels_zero(const TensorView& t) {
  if (t.cb == 1 || t.c % t.cb == 0) return true;
  const int blk = t.cblocks() - 1;
  for (int s = 0; s < t.n; ++s)
    for (int y = t.box.y0; y < t.box.y1; ++y)
      for (int x = t.box.x0; x < t.box.x1; ++x)
        for (int c = t.c % t.cb; c < t.cb; ++c)
          if (t.at(s, blk, y, x)[c] != 0.f) return false;
  return true;
}

// ---------------------------------------------------------------- convolution

struct ConvCase {
  int n, ic, oc, k, s, p, ih, iw;
  int cb;  // input layout: 1 (plain) or the context's block B; outputs are in blocks of B
  int B;
  bool bias;
  int groups = 1;
  int oh() const { return (ih + 2 * p - k) / s + 1; }
  int ow() const { return (iw + 2 * p - k) / s + 1; }
  Window win() const { return {k, s, p}; }
  std::string str() const {
    char b[128];
    std::snprintf(b, sizeof b, "n%d ic%d oc%d k%d s%d p%d %dx%d in_cb%d B%d%s groups%d", n, ic, oc, k, s, p, ih, iw, cb,
                  B, bias ? " bias" : "", groups);
    return b;
  }
};

// Naive double-precision convolution with Darknet's symmetric padding p.
struct NaiveConv {
  const ConvCase& c;
  std::vector<double> fwd(const Map& x, const std::vector<float>& w, const std::vector<float>& b) const {
    const int oh = c.oh(), ow = c.ow();
    std::vector<double> y(size_t(c.n) * c.oc * oh * ow);
    for (int s = 0; s < c.n; ++s)
      for (int o = 0; o < c.oc; ++o)
        for (int oy = 0; oy < oh; ++oy)
          for (int ox = 0; ox < ow; ++ox) {
            double acc = c.bias ? b[o] : 0.;
            const int icg = c.ic / c.groups, q = o / (c.oc / c.groups);
            for (int i = q * icg; i < (q + 1) * icg; ++i)
              for (int ky = 0; ky < c.k; ++ky) {
                const int iy = oy * c.s - c.p + ky;
                if (iy < 0 || iy >= c.ih) continue;
                for (int kx = 0; kx < c.k; ++kx) {
                  const int ix = ox * c.s - c.p + kx;
                  if (ix < 0 || ix >= c.iw) continue;
                  acc += double(w[((size_t(o) * icg + i - q * icg) * c.k + ky) * c.k + kx]) *
                         x.v[((size_t(s) * c.ic + i) * c.ih + iy) * c.iw + ix];
                }
              }
            y[((size_t(s) * c.oc + o) * oh + oy) * ow + ox] = acc;
          }
    return y;
  }
  // dx (plain, full input map), dw (oihw), db from dy restricted to the outputs in `ob`.
  void bwd(const Map& x, const Map& dy, const std::vector<float>& w, std::vector<double>& dx, std::vector<double>& dw,
           std::vector<double>& db, Box ob = {0, 1 << 30, 0, 1 << 30}) const {
    const int oh = c.oh(), ow = c.ow();
    ob = intersect(ob, full_box(oh, ow));
    dx.assign(size_t(c.n) * c.ic * c.ih * c.iw, 0.);
    dw.assign(w.size(), 0.);
    db.assign(size_t(c.oc), 0.);
    for (int s = 0; s < c.n; ++s)
      for (int o = 0; o < c.oc; ++o)
        for (int oy = ob.y0; oy < ob.y1; ++oy)
          for (int ox = ob.x0; ox < ob.x1; ++ox) {
            const double g = dy.v[((size_t(s) * c.oc + o) * oh + oy) * ow + ox];
            db[o] += g;
            const int icg = c.ic / c.groups, q = o / (c.oc / c.groups);
            for (int i = q * icg; i < (q + 1) * icg; ++i)
              for (int ky = 0; ky < c.k; ++ky) {
                const int iy = oy * c.s - c.p + ky;
                if (iy < 0 || iy >= c.ih) continue;
                for (int kx = 0; kx < c.k; ++kx) {
                  const int ix = ox * c.s - c.p + kx;
                  if (ix < 0 || ix >= c.iw) continue;
                  const size_t wi = ((size_t(o) * icg + i - q * icg) * c.k + ky) * c.k + kx;
                  const size_t xi = ((size_t(s) * c.ic + i) * c.ih + iy) * c.iw + ix;
                  dx[xi] += g * w[wi];
                  dw[wi] += g * x.v[xi];
                }
              }
          }
  }
};

ConvCase random_conv_case(Rng& rng, int k, int s, int cb, int B) {
  ConvCase c;
  c.B = B;
  c.n = randint(rng, 1, 3);
  c.ic = cb > 1 ? randint(rng, 3, 20) : randint(rng, 1, 7);
  c.oc = randint(rng, 1, 20);
  c.k = k;
  c.s = s;
  c.p = randint(rng, 0, k / 2);
  c.cb = cb;
  c.bias = randint(rng, 0, 1) == 1;
  do {
    c.ih = 2 * randint(rng, 2, 6) + 1;  // odd sizes 5..13, sometimes even below
    c.iw = 2 * randint(rng, 2, 6) + randint(rng, 0, 1);
  } while (c.ih + 2 * c.p < k || c.iw + 2 * c.p < k);
  return c;
}

// A grouped case: depthwise (groups = channels) every other draw, else groups dividing both
// channel counts (ResNeXt's narrow groups, multipliers of the input channels).
ConvCase random_grouped_case(Rng& rng, int k, int s, int cb, int B) {
  ConvCase c = random_conv_case(rng, k, s, cb, B);
  if (randint(rng, 0, 1)) {
    c.ic = c.oc = c.groups = randint(rng, 2, 40);
  } else {
    c.groups = randint(rng, 2, 6);
    c.ic = c.groups * randint(rng, 1, 5);
    c.oc = c.groups * randint(rng, 1, 5);
  }
  return c;
}

// (case number, kernel path): every path computes the same convolution. Cases from 48 on
// are grouped.
class ConvNaive : public ::testing::TestWithParam<std::tuple<int, KernelPath>> {};

// Full map: forward, backward_data, backward_weights (accumulating) against naive
// loops; then the same layer on a 3x3 partition of boxes (corner, edge, interior).
TEST_P(ConvNaive, FullMapAndBoxes) {
  const auto [id, path] = GetParam();
  Rng rng(1000 + id);
  static const int ks[] = {1, 3, 5, 7};
  DnnlContext ctx(path);
  const int B = ctx.config.block;
  const ConvCase c =
      (id < 48 ? random_conv_case : random_grouped_case)(rng, ks[id % 4], 1 + (id / 4) % 2, (id / 8) % 2 ? B : 1, B);
  SCOPED_TRACE(c.str() + " kernels " + kernel_path_name(path));
  const int oh = c.oh(), ow = c.ow();
  const Window win = c.win();
  Map x{c.n, c.ic, c.ih, c.iw, uniform(rng, size_t(c.n) * c.ic * c.ih * c.iw)};
  Map dy{c.n, c.oc, oh, ow, uniform(rng, size_t(c.n) * c.oc * oh * ow)};
  const std::vector<float> w = uniform(rng, size_t(c.oc) * (c.ic / c.groups) * c.k * c.k, -0.5f, 0.5f);
  const std::vector<float> b = uniform(rng, size_t(c.oc));
  const NaiveConv naive{c};
  const std::vector<double> y_ref = naive.fwd(x, w, b);
  std::vector<double> dx_ref, dw_ref, db_ref;
  naive.bwd(x, dy, w, dx_ref, dw_ref, db_ref);

  WeightCache wc(ctx, plain_conv_weights_desc(c.oc, c.ic, c.k, c.groups), false, false);
  const int all = ConvKernel::kFwd | ConvKernel::kBwdData | ConvKernel::kBwdWeights;
  const Box out_full = full_box(oh, ow);
  std::vector<std::unique_ptr<ConvKernel>> kernels;
  auto make_kernel = [&](const Box& o) {
    kernels.push_back(std::make_unique<ConvKernel>(
        ctx, wc, conv_geom(c.n, c.ic, c.oc, win, o, c.ih, c.iw, B, c.cb, c.bias, c.groups), all));
    wc.refresh(w.data());  // new kernels may register new weight formats
    return kernels.back().get();
  };

  // --- full map
  {
    ConvKernel* k = make_kernel(out_full);
    const Box in_box = window_in(out_full, win, c.ih, c.iw);
    EXPECT_EQ(k->geom().ih, in_box.h());
    Blocked src = to_box(x, c.cb, in_box);
    Blocked dst(c.n, c.oc, B, out_full);
    std::fill_n(dst.buf.data(), dst.buf.size(), 7.f);  // must be overwritten, padded channels zeroed
    k->forward(src.t.data, b.data(), dst.t.data);
    EXPECT_LE(rel_diff(to_map(dst.t, oh, ow).v, y_ref), kTol) << "conv_forward";
    EXPECT_TRUE(padded_channels_zero(dst.t)) << "conv_forward leaves padded output channels non-zero";

    Blocked ddst = to_box(dy, B, out_full);
    Blocked dsrc(c.n, c.ic, c.cb, in_box);
    std::fill_n(dsrc.buf.data(), dsrc.buf.size(), 7.f);
    k->backward_data(ddst.t.data, dsrc.t.data);
    EXPECT_LE(rel_diff(to_map(dsrc.t, c.ih, c.iw).v, dx_ref), kTol) << "conv_backward_data";
    EXPECT_TRUE(padded_channels_zero(dsrc.t)) << "conv_backward_data leaves padded channels non-zero";

    std::vector<float> gw = uniform(rng, w.size()), gb = uniform(rng, b.size());
    const std::vector<float> gw0 = gw, gb0 = gb;
    k->backward_weights(src.t.data, ddst.t.data, gw.data(), gb.data());
    std::vector<double> want_w(w.size()), want_b(b.size());
    for (size_t i = 0; i < w.size(); ++i) want_w[i] = gw0[i] + dw_ref[i];
    for (size_t i = 0; i < b.size(); ++i) want_b[i] = c.bias ? gb0[i] + db_ref[i] : gb0[i];
    EXPECT_LE(rel_diff(gw, want_w), kTol) << "conv_backward_weights (accumulates)";
    EXPECT_LE(rel_diff(gb, want_b), kTol) << "conv_backward_weights bias";
  }

  // --- boxes of a partition of the output map
  std::vector<float> gw_sum(w.size(), 0.f), gb_sum(b.size(), 0.f);
  int checked_cells = 0;
  for (const Box& o : partition(rng, oh, ow)) {
    SCOPED_TRACE(box_str(o));
    ConvKernel* k = make_kernel(o);
    const Box in_box = window_in(o, win, c.ih, c.iw);
    const Pad pad = border_pad(o, win, c.ih, c.iw);
    EXPECT_EQ(k->geom().pad.t, pad.t);
    Blocked src = to_box(x, c.cb, in_box);
    Blocked dst(c.n, c.oc, B, o);
    k->forward(src.t.data, b.data(), dst.t.data);
    // forward: equals the full-map reference on the box
    {
      double num = 0, den = 0;
      for (int s = 0; s < c.n; ++s)
        for (int ch = 0; ch < c.oc; ++ch)
          for (int yy = o.y0; yy < o.y1; ++yy)
            for (int xx = o.x0; xx < o.x1; ++xx) {
              const double r = y_ref[((size_t(s) * c.oc + ch) * oh + yy) * ow + xx];
              const double d = dst.t.at(s, ch / B, yy, xx)[ch % B] - r;
              num += d * d;
              den += r * r;
            }
      EXPECT_LE(std::sqrt(num / std::max(den, 1e-30)), kTol) << "conv_forward on a box";
    }
    // backward_data and backward_weights of a box are the full-map operations with
    // dL/d(output) masked to the box; on input cells read only by outputs of the box,
    // backward_data equals the full-map result.
    std::vector<double> dx_o, dw_o, db_o;
    naive.bwd(x, dy, w, dx_o, dw_o, db_o, o);
    Blocked ddst = to_box(dy, B, o);
    Blocked dsrc(c.n, c.ic, c.cb, in_box);
    k->backward_data(ddst.t.data, dsrc.t.data);
    const Map dx_box = to_map(dsrc.t, c.ih, c.iw);
    EXPECT_LE(rel_diff(dx_box.v, dx_o), kTol) << "conv_backward_data on a box";
    {
      double num = 0, den = 0;
      for (int yy = in_box.y0; yy < in_box.y1; ++yy)
        for (int xx = in_box.x0; xx < in_box.x1; ++xx) {
          if (!touching_outputs_inside(yy, xx, win, oh, ow, o)) continue;
          ++checked_cells;
          for (int s = 0; s < c.n; ++s)
            for (int ch = 0; ch < c.ic; ++ch) {
              const size_t i = ((size_t(s) * c.ic + ch) * c.ih + yy) * c.iw + xx;
              num += (dx_box.v[i] - dx_ref[i]) * (dx_box.v[i] - dx_ref[i]);
              den += dx_ref[i] * dx_ref[i];
            }
        }
      EXPECT_LE(std::sqrt(num / std::max(den, 1e-30)), kTol) << "conv_backward_data on cells inside a box";
    }
    // backward_data onto part of the input box only (a tiled backward computes just the
    // input cells it needs): every side cut by up to what leaves each window a cell.
    {
      const Box u = window_in_unclamped(o, win);
      auto cut = [&](int at, int edge, int dir) {  // move `at` inwards, keep |edge - at| < k
        const int most = c.k - 1 - dir * (at - edge);
        return at + dir * randint(rng, 0, std::max(0, most));
      };
      Box part{cut(in_box.y0, u.y0, 1), cut(in_box.y1, u.y1, -1), cut(in_box.x0, u.x0, 1), cut(in_box.x1, u.x1, -1)};
      if (part.empty()) part = in_box;
      SCOPED_TRACE("input part " + box_str(part));
      kernels.push_back(std::make_unique<ConvKernel>(
          ctx, wc, conv_geom_on(c.n, c.ic, c.oc, win, o, part, B, c.cb, c.bias, c.groups), ConvKernel::kBwdData));
      wc.refresh(w.data());
      const ConvGeom& g = kernels.back()->geom();
      EXPECT_EQ(g.ih, part.h());
      EXPECT_LT(std::max({g.pad.t, g.pad.b, g.pad.l, g.pad.r}), c.k);
      Blocked dpart(c.n, c.ic, c.cb, part);
      std::fill_n(dpart.buf.data(), dpart.buf.size(), 7.f);
      kernels.back()->backward_data(ddst.t.data, dpart.t.data);
      std::vector<double> want(dx_o.size(), 0.);
      for (int s = 0; s < c.n; ++s)
        for (int ch = 0; ch < c.ic; ++ch)
          for (int yy = part.y0; yy < part.y1; ++yy)
            for (int xx = part.x0; xx < part.x1; ++xx) {
              const size_t i = ((size_t(s) * c.ic + ch) * c.ih + yy) * c.iw + xx;
              want[i] = dx_o[i];
            }
      EXPECT_LE(rel_diff(to_map(dpart.t, c.ih, c.iw).v, want), kTol) << "conv_backward_data on part of the input box";
      EXPECT_TRUE(padded_channels_zero(dpart.t)) << "conv_backward_data on a part leaves padded channels non-zero";
    }
    std::vector<float> gw(w.size(), 0.f), gb(b.size(), 0.f);
    k->backward_weights(src.t.data, ddst.t.data, gw.data(), gb.data());
    EXPECT_LE(rel_diff(gw, dw_o), kTol) << "conv_backward_weights on a box";
    for (size_t i = 0; i < gw.size(); ++i) gw_sum[i] += gw[i];
    for (size_t i = 0; i < gb.size(); ++i) gb_sum[i] += gb[i];
  }
  RecordProperty("cells_checked_inside_boxes", checked_cells);
  EXPECT_LE(rel_diff(gw_sum, dw_ref), kTol) << "conv_backward_weights summed over a partition";
  if (c.bias) {
    EXPECT_LE(rel_diff(gb_sum, db_ref), kTol) << "conv bias gradient summed over a partition";
  }
}

// k 1/3/5/7 x stride 1/2 x src layout plain/blocked, three random draws each, plain and
// grouped, on the default path (oneDNN's JIT where it has one) and on own kernels only.
INSTANTIATE_TEST_SUITE_P(Random, ConvNaive,
                         ::testing::Combine(::testing::Range(0, 96),
                                            ::testing::Values(KernelPath::Auto, KernelPath::Own)));

// Forward values of a box are bit-identical to the same cells of the whole map, on every
// kernel path: a max-pool after the convolution routes its gradient to one winner, so
// a tiled run is exact only with a summation order that does not depend on the box.
class ConvBitIdentical : public ::testing::TestWithParam<KernelPath> {};

TEST_P(ConvBitIdentical, ForwardOnBoxes) {
  Rng rng(77);
  DnnlContext ctx(GetParam());
  const int B = ctx.config.block;
  struct C {
    int n, ic, oc, k, h, w;
    bool plain_input, bias;
    int groups = 1;
  };
  for (const C& c :
       {C{1, 3, 5, 1, 7, 9, false, true}, C{2, 16, 16, 1, 5, 5, false, false}, C{2, 21, 35, 1, 9, 6, false, true},
        C{1, 40, 7, 1, 13, 11, false, false}, C{1, 1, 1, 1, 1, 1, false, true}, C{1, 3, 32, 3, 26, 26, true, false},
        C{2, 32, 64, 3, 21, 19, false, false}, C{1, 64, 40, 3, 26, 26, false, true},
        C{1, 24, 16, 5, 17, 13, false, false}, C{2, 32, 32, 3, 19, 17, false, true, 32},
        C{1, 24, 24, 5, 13, 14, false, false, 24}, C{1, 20, 20, 3, 15, 16, false, false, 20},
        C{1, 24, 48, 3, 13, 11, false, true, 6}, C{1, 6, 6, 3, 11, 12, true, false, 3},
        C{2, 16, 16, 1, 9, 9, false, false, 4}}) {
    char name[96];
    std::snprintf(name, sizeof name, "n%d ic%d oc%d k%d %dx%d groups %d%s", c.n, c.ic, c.oc, c.k, c.h, c.w, c.groups,
                  c.plain_input ? " plain input" : "");
    SCOPED_TRACE(std::string(name) + " kernels " + kernel_path_name(GetParam()));
    const int cb = c.plain_input ? 1 : B;
    const Window win{c.k, 1, c.k / 2};
    Map x{c.n, c.ic, c.h, c.w, uniform(rng, size_t(c.n) * c.ic * c.h * c.w)};
    const std::vector<float> w = uniform(rng, size_t(c.oc) * (c.ic / c.groups) * c.k * c.k),
                             b = uniform(rng, size_t(c.oc));
    WeightCache wc(ctx, plain_conv_weights_desc(c.oc, c.ic, c.k, c.groups), false, false);
    std::vector<std::unique_ptr<ConvKernel>> kernels;
    auto forward = [&](const Box& o) {
      kernels.push_back(std::make_unique<ConvKernel>(
          ctx, wc, conv_geom(c.n, c.ic, c.oc, win, o, c.h, c.w, B, cb, c.bias, c.groups), ConvKernel::kFwd));
      wc.refresh(w.data());
      auto dst = std::make_unique<Blocked>(c.n, c.oc, B, o);
      Blocked src = to_box(x, cb, window_in(o, win, c.h, c.w));
      kernels.back()->forward(src.t.data, b.data(), dst->t.data);
      return dst;
    };
    const Box full = full_box(c.h, c.w);
    auto whole = forward(full);
    for (int draw = 0; draw < 3; ++draw)
      for (const Box& o : partition(rng, c.h, c.w)) {
        SCOPED_TRACE(box_str(o));
        auto part = forward(o);
        Blocked want(c.n, c.oc, B, o);
        copy_region(whole->t, want.t, o);
        EXPECT_TRUE(std::equal(part->buf.data(), part->buf.data() + part->buf.size(), want.buf.data()))
            << "a box differs from the full map in some bit (forward kernel "
            << kernels.back()->impl_name(ConvPass::Forward) << ")";
      }
  }
}

INSTANTIATE_TEST_SUITE_P(Paths, ConvBitIdentical,
                         ::testing::Values(KernelPath::Auto, KernelPath::OneDnn, KernelPath::Own),
                         [](const auto& info) { return std::string(kernel_path_name(info.param)); });

// ---------------------------------------------------------------- max-pooling

struct PoolCase {
  int size, stride, padding;  // Darknet's `padding` (total over both sides)
  int n, c, h, w, cb;
  bool ties;  // small integer values: many equal maxima
  Window win() const { return {size, stride, padding / 2}; }
  int oh() const { return (h + padding - size) / stride + 1; }
  int ow() const { return (w + padding - size) / stride + 1; }
  std::string str() const {
    char b[128];
    std::snprintf(b, sizeof b, "size%d stride%d padding%d n%d c%d %dx%d cb%d%s", size, stride, padding, n, c, h, w, cb,
                  ties ? " ties" : "");
    return b;
  }
};

// Darknet's max: window of output i starts at i*stride - padding/2; cells outside the
// map never win; the first maximum in row-major order wins ties. Returns the winner's
// global index y*w + x (-1 if the window has no cell in the map).
int naive_argmax(const Map& m, int s, int ch, int oy, int ox, const Window& w) {
  int best = -1;
  float bv = -std::numeric_limits<float>::infinity();
  for (int ky = 0; ky < w.size; ++ky)
    for (int kx = 0; kx < w.size; ++kx) {
      const int y = oy * w.stride - w.pad + ky, x = ox * w.stride - w.pad + kx;
      if (y < 0 || y >= m.h || x < 0 || x >= m.w) continue;
      const float v = m.v[((size_t(s) * m.c + ch) * m.h + y) * m.w + x];
      if (best < 0 || v > bv) {
        bv = v;
        best = y * m.w + x;
      }
    }
  return best;
}

class MaxPoolNaive : public ::testing::TestWithParam<PoolCase> {};

TEST_P(MaxPoolNaive, FullMapAndBoxes) {
  const PoolCase pc = GetParam();
  SCOPED_TRACE(pc.str());
  Rng rng(std::hash<std::string>{}(pc.str()));
  const Window win = pc.win();
  const int oh = pc.oh(), ow = pc.ow();
  Map x{pc.n, pc.c, pc.h, pc.w, uniform(rng, size_t(pc.n) * pc.c * pc.h * pc.w)};
  if (pc.ties)
    for (auto& v : x.v) v = std::floor(v * 2.f);  // values in {-2,-1,0}
  Map dy{pc.n, pc.c, oh, ow, uniform(rng, size_t(pc.n) * pc.c * oh * ow)};
  // references
  std::vector<int> arg_ref(size_t(pc.n) * pc.c * oh * ow);
  std::vector<double> y_ref(arg_ref.size()), dx_ref(x.v.size(), 0.);
  for (int s = 0; s < pc.n; ++s)
    for (int ch = 0; ch < pc.c; ++ch)
      for (int oy = 0; oy < oh; ++oy)
        for (int ox = 0; ox < ow; ++ox) {
          const size_t o = ((size_t(s) * pc.c + ch) * oh + oy) * ow + ox;
          const int a = naive_argmax(x, s, ch, oy, ox, win);
          ASSERT_GE(a, 0) << "a window with no cell in the map";
          arg_ref[o] = a;
          y_ref[o] = x.v[(size_t(s) * pc.c + ch) * pc.h * pc.w + a];
          dx_ref[(size_t(s) * pc.c + ch) * pc.h * pc.w + a] += dy.v[o];
        }
  auto check_out = [&](const TensorView& out, const std::vector<uint8_t>& arg, const char* what) {
    int bad_v = 0, bad_a = 0;
    for (int s = 0; s < pc.n; ++s)
      for (int ch = 0; ch < pc.c; ++ch)
        for (int oy = out.box.y0; oy < out.box.y1; ++oy)
          for (int ox = out.box.x0; ox < out.box.x1; ++ox) {
            const size_t o = ((size_t(s) * pc.c + ch) * oh + oy) * ow + ox;
            const int64_t off = out.offset(s, ch / out.cb, oy, ox) + ch % out.cb;
            bad_v += out.data[off] != float(y_ref[o]);
            const uint8_t a = arg[size_t(off)];  // position in the window, row-major
            const int global = a == kNoWinner ? -1
                                              : (oy * win.stride - win.pad + a / win.size) * pc.w +
                                                    (ox * win.stride - win.pad + a % win.size);
            bad_a += global != arg_ref[o];
          }
    EXPECT_EQ(bad_v, 0) << what << ": outputs differ from the naive max";
    EXPECT_EQ(bad_a, 0) << what << ": winners differ from the first max in row-major order";
  };

  const Box out_full = full_box(oh, ow);
  Blocked in = to_box(x, pc.cb, full_box(pc.h, pc.w));
  Blocked out(pc.n, pc.c, pc.cb, out_full);
  std::vector<uint8_t> arg(size_t(out.t.size()), 77);
  maxpool_forward(in.t, out.t, out.t.box, arg.data(), out.t.box, win);
  check_out(out.t, arg, "maxpool_forward");
  EXPECT_TRUE(padded_channels_zero(out.t));

  Blocked ddst = to_box(dy, pc.cb, out_full);
  Blocked dsrc(pc.n, pc.c, pc.cb, full_box(pc.h, pc.w));
  maxpool_backward(ddst.t, out_full, out_full, arg.data(), dsrc.t, win);
  EXPECT_LE(rel_diff(to_map(dsrc.t, pc.h, pc.w).v, dx_ref), 1e-6) << "maxpool_backward";
  EXPECT_TRUE(padded_channels_zero(dsrc.t));

  // Boxes: forward on window_in(o) only; backward of region o with winners recorded on
  // a larger forward box F ⊇ o, into a buffer holding window_in(o); summed over the
  // partition it is the full backward, and on cells read only by o it is exact alone.
  Map dx_sum{pc.n, pc.c, pc.h, pc.w, std::vector<float>(x.v.size(), 0.f)};
  for (const Box& o : partition(rng, oh, ow)) {
    SCOPED_TRACE(box_str(o));
    const Box F = intersect({o.y0 - 1, o.y1 + 1, o.x0 - 1, o.x1 + 1}, out_full);
    for (const Box& fb : {o, F}) {
      Blocked bin = to_box(x, pc.cb, window_in(fb, win, pc.h, pc.w));
      Blocked bout(pc.n, pc.c, pc.cb, fb);
      std::vector<uint8_t> barg(size_t(bout.t.size()), 77);
      maxpool_forward(bin.t, bout.t, bout.t.box, barg.data(), bout.t.box, win);
      check_out(bout.t, barg, "maxpool_forward on a box");
      if (!(fb == F)) continue;
      const Box reach = window_in(o, win, pc.h, pc.w);
      Blocked bd(pc.n, pc.c, pc.cb, reach);
      Blocked bdy = to_box(dy, pc.cb, o);
      maxpool_backward(bdy.t, o, F, barg.data(), bd.t, win);
      Map part = to_map(bd.t, pc.h, pc.w);
      for (size_t i = 0; i < part.v.size(); ++i) dx_sum.v[i] += part.v[i];
      std::vector<double> dx_o(x.v.size(), 0.);  // naive backward of the outputs in o only
      for (int s = 0; s < pc.n; ++s)
        for (int ch = 0; ch < pc.c; ++ch)
          for (int oy = o.y0; oy < o.y1; ++oy)
            for (int ox = o.x0; ox < o.x1; ++ox) {
              const size_t oi = ((size_t(s) * pc.c + ch) * oh + oy) * ow + ox;
              dx_o[(size_t(s) * pc.c + ch) * pc.h * pc.w + arg_ref[oi]] += dy.v[oi];
            }
      EXPECT_LE(rel_diff(part.v, dx_o), 1e-6) << "maxpool_backward on a box";
      double num = 0, den = 0;
      for (int yy = reach.y0; yy < reach.y1; ++yy)
        for (int xx = reach.x0; xx < reach.x1; ++xx) {
          if (!touching_outputs_inside(yy, xx, win, oh, ow, o)) continue;
          for (int s = 0; s < pc.n; ++s)
            for (int ch = 0; ch < pc.c; ++ch) {
              const double r = dx_ref[((size_t(s) * pc.c + ch) * pc.h + yy) * pc.w + xx];
              const double d = part.at(s, ch, yy, xx) - r;
              num += d * d;
              den += r * r;
            }
        }
      EXPECT_LE(std::sqrt(num / std::max(den, 1e-30)), 1e-6) << "maxpool_backward on cells inside a box";
    }
  }
  EXPECT_LE(rel_diff(dx_sum.v, dx_ref), 1e-6) << "maxpool_backward summed over a partition";

  // The pointwise pass of the convolution before, applied by the pool on the fly: the
  // bits and winners of affine_act_forward then max-pool, on the full map and on boxes.
  const std::vector<float> a = uniform(rng, size_t(pc.c), -1.5f, 1.5f), b = uniform(rng, size_t(pc.c));
  for (Act act : {Act::Leaky, Act::Relu, Act::Linear}) {
    SCOPED_TRACE(act_name(act));
    const PoolInputAct pre{a.data(), b.data(), act};
    for (const Box& o : {out_full, partition(rng, oh, ow).front()}) {
      const Box ib = window_in(o, win, pc.h, pc.w);
      Blocked y = to_box(x, pc.cb, ib), z(pc.n, pc.c, pc.cb, ib);
      affine_act_forward(y.t, z.t, ib, a.data(), b.data(), act);
      Blocked want(pc.n, pc.c, pc.cb, o), got(pc.n, pc.c, pc.cb, o);
      std::vector<uint8_t> want_arg(size_t(want.t.size()), 77), got_arg(size_t(got.t.size()), 77);
      maxpool_forward(z.t, want.t, o, want_arg.data(), o, win);
      maxpool_forward(y.t, got.t, o, got_arg.data(), o, win, &pre);
      EXPECT_EQ(std::memcmp(want.buf.data(), got.buf.data(), want.buf.size() * sizeof(float)), 0)
          << "pooled values differ from affine_act_forward then max-pool on " << box_str(o);
      EXPECT_EQ(want_arg, got_arg) << "winners differ on " << box_str(o);
    }
  }
  const PoolInputAct logistic{a.data(), b.data(), Act::Logistic};
  EXPECT_THROW(maxpool_forward(in.t, out.t, out.t.box, arg.data(), out.t.box, win, &logistic), Error);
}

std::vector<PoolCase> pool_cases() {
  std::vector<PoolCase> v;
  struct W {
    int size, stride, padding;
  };
  // Darknet defaults (padding = size-1) and explicit paddings.
  const W ws[] = {{2, 2, 1}, {3, 2, 2}, {2, 1, 1}, {3, 1, 2}, {2, 2, 0}, {3, 2, 0}, {5, 3, 4}, {1, 1, 0}};
  int i = 0;
  for (const W& w : ws)
    for (int cb : {1, 8, 16})
      for (bool ties : {false, true}) {
        ++i;
        v.push_back({w.size, w.stride, w.padding, 1 + i % 2, cb > 1 ? 5 + 7 * (i % 3) : 3, 7 + 2 * (i % 4),
                     6 + 3 * (i % 3), cb, ties});
      }
  return v;
}
INSTANTIATE_TEST_SUITE_P(Darknet, MaxPoolNaive, ::testing::ValuesIn(pool_cases()));

// ---------------------------------------------------------------- pointwise

// A blocked tensor on a box away from the origin, real channels random, padded zero.
struct PwFixture {
  int n = 2, c;
  Box box{3, 10, 2, 9};
  Box region{4, 8, 3, 9};
  Blocked y, z, g;
  int B;
  PwFixture(int channels, int block, Rng& rng)
      : c(channels), y(n, c, block, box), z(n, c, block, box), g(n, c, block, box), B(block) {
    for (Blocked* t : {&y, &g}) {
      Map m{n, c, box.y1, box.x1, uniform(rng, size_t(n) * c * box.y1 * box.x1, -2.f, 2.f)};
      copy_region(m.view(), t->t, box);
    }
  }
  bool in_region(int yy, int xx) const {
    return yy >= region.y0 && yy < region.y1 && xx >= region.x0 && xx < region.x1;
  }
};

// (channel count, channel block)
class Pointwise : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(Pointwise, ChannelSums) {
  const auto [channels, block] = GetParam();
  Rng rng(11 + channels);
  PwFixture f(channels, block, rng);
  const int B = f.B;
  // Double-doubles: hi in [0, c), lo in [c, 2c), added to.
  std::vector<double> sum(2 * size_t(f.c), 0.), sq(2 * size_t(f.c), 0.), want_s(f.c, 0.5), want_q(f.c, 0.25);
  std::fill_n(sum.begin(), f.c, 0.5);
  std::fill_n(sq.begin(), f.c, 0.25);
  for (int s = 0; s < f.n; ++s)
    for (int ch = 0; ch < f.c; ++ch)
      for (int yy = f.region.y0; yy < f.region.y1; ++yy)
        for (int xx = f.region.x0; xx < f.region.x1; ++xx) {
          const double v = f.y.t.at(s, ch / B, yy, xx)[ch % B];
          want_s[ch] += v;
          want_q[ch] += v * v;
        }
  channel_sums(f.y.t, f.region, sum.data(), sq.data());
  for (int ch = 0; ch < f.c; ++ch) {
    EXPECT_NEAR(sum[ch] + sum[f.c + ch], want_s[ch], 1e-5 * (1 + std::fabs(want_s[ch]))) << "channel " << ch;
    EXPECT_NEAR(sq[ch] + sq[f.c + ch], want_q[ch], 1e-5 * (1 + std::fabs(want_q[ch]))) << "channel " << ch;
  }
}

// The batch statistics must not depend on how the map is tiled: the same cells summed as one
// box, and as four boxes in two orders and added up as double-doubles, give the same
// double. Values over 40 binary orders of magnitude, so that plain double sums of the same
// cells in another order round differently (checked: the test would otherwise prove little),
// while their exact sum still fits the pair's 106 bits.
TEST(Pointwise, ChannelSumsDoNotDependOnTheTiling) {
  const int c = 16, h = 37, w = 41;
  std::vector<float> buf(size_t(c) * h * w);
  Rng rng(77);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (float& v : buf) v = std::ldexp(u(rng), int(rng() % 40) - 20);
  const TensorView y{buf.data(), 1, c, 16, Box{0, h, 0, w}};
  auto total = [&](const std::vector<Box>& boxes) {
    std::vector<double> all(size_t(c), 0.);
    std::vector<double> sh(size_t(c), 0.), sl(size_t(c), 0.);
    for (const Box& b : boxes) {
      std::vector<double> sum(2 * size_t(c), 0.), sq(2 * size_t(c), 0.);
      channel_sums(y, b, sum.data(), sq.data());
      for (int k = 0; k < c; ++k) {
        two_sum_add(sh[size_t(k)], sl[size_t(k)], sum[size_t(k)]);
        sl[size_t(k)] += sum[size_t(c + k)];
      }
    }
    for (int k = 0; k < c; ++k) all[size_t(k)] = sh[size_t(k)] + sl[size_t(k)];
    return all;
  };
  const std::vector<double> whole = total({Box{0, h, 0, w}});
  const std::vector<Box> quarters{Box{0, 20, 0, 13}, Box{0, 20, 13, w}, Box{20, h, 0, 13}, Box{20, h, 13, w}};
  EXPECT_EQ(total(quarters), whole);
  EXPECT_EQ(total({quarters[3], quarters[1], quarters[2], quarters[0]}), whole);
  // Plain double sums of the same cells: row by row, and column by column.
  int differ = 0;
  for (int k = 0; k < c; ++k) {
    double rows = 0, cols = 0;
    for (int yy = 0; yy < h; ++yy)
      for (int xx = 0; xx < w; ++xx) rows += y.at(0, 0, yy, xx)[k];
    for (int xx = 0; xx < w; ++xx)
      for (int yy = 0; yy < h; ++yy) cols += y.at(0, 0, yy, xx)[k];
    differ += rows != cols;
  }
  EXPECT_GT(differ, 0) << "plain double sums agreed in every order: the data is too tame for this test";
}

TEST_P(Pointwise, AffineActForwardAndBackward) {
  const auto [channels, block] = GetParam();
  Rng rng(23 + channels);
  for (Act act : {Act::Linear, Act::Leaky, Act::Relu, Act::Logistic, Act::Ramp}) {
    SCOPED_TRACE(act_name(act));
    PwFixture f(channels, block, rng);
    const int B = f.B;
    const std::vector<float> a = uniform(rng, f.c, 0.5f, 1.5f), b = uniform(rng, f.c, -0.5f, 0.5f);
    std::fill_n(f.z.buf.data(), f.z.buf.size(), 9.f);  // sentinel outside the region
    affine_act_forward(f.y.t, f.z.t, f.region, a.data(), b.data(), act);
    // in place (y and z alias) gives the same values
    Blocked inplace(f.n, f.c, B, f.box);
    std::copy_n(f.y.buf.data(), f.y.buf.size(), inplace.buf.data());
    affine_act_forward(inplace.t, inplace.t, f.region, a.data(), b.data(), act);
    const std::vector<float> g0(f.g.buf.data(), f.g.buf.data() + f.g.buf.size());
    act_backward(f.g.t, f.y.t, f.region, a.data(), b.data(), act);
    int bad_fwd = 0, bad_bwd = 0, bad_outside = 0, bad_pad = 0;
    for (int s = 0; s < f.n; ++s)
      for (int blk = 0; blk < f.y.t.cblocks(); ++blk)
        for (int yy = f.box.y0; yy < f.box.y1; ++yy)
          for (int xx = f.box.x0; xx < f.box.x1; ++xx)
            for (int cc = 0; cc < B; ++cc) {
              const int ch = blk * B + cc;
              const int64_t off = f.y.t.offset(s, blk, yy, xx) + cc;
              const float zv = f.z.buf.data()[off], gv = f.g.buf.data()[off];
              if (!f.in_region(yy, xx)) {
                bad_outside += zv != 9.f || gv != g0[size_t(off)];
                continue;
              }
              if (ch >= f.c) {
                bad_pad += zv != 0.f || gv != 0.f || inplace.buf.data()[off] != 0.f;
                continue;
              }
              const double pre = double(a[ch]) * f.y.buf.data()[off] + b[ch];
              const double zr = test::act_ref(act, pre), gr = g0[size_t(off)] * test::act_grad_ref(act, pre);
              bad_fwd += std::fabs(zv - zr) > 1e-5 * (1 + std::fabs(zr)) || inplace.buf.data()[off] != zv;
              bad_bwd += std::fabs(gv - gr) > 1e-5 * (1 + std::fabs(gr));
            }
    EXPECT_EQ(bad_fwd, 0) << "affine_act_forward";
    EXPECT_EQ(bad_bwd, 0) << "act_backward";
    EXPECT_EQ(bad_outside, 0) << "cells outside the region were written";
    EXPECT_EQ(bad_pad, 0) << "padded channels are not zero";
  }
}

TEST_P(Pointwise, BatchNormBackward) {
  const auto [channels, block] = GetParam();
  Rng rng(37 + channels);
  PwFixture f(channels, block, rng);
  const int B = f.B;
  std::vector<double> mean(f.c), rstd(f.c);
  for (int ch = 0; ch < f.c; ++ch) {
    mean[ch] = std::uniform_real_distribution<double>(-0.5, 0.5)(rng);
    rstd[ch] = std::uniform_real_distribution<double>(0.5, 2.)(rng);
  }
  // The activation's backward on the region, the sums over a smaller owned box within it.
  const Box own{5, 7, 4, 8};
  const std::vector<float> a = uniform(rng, f.c, 0.5f, 1.5f), b = uniform(rng, f.c, -0.5f, 0.5f);
  std::vector<double> sg(f.c, 1.), sgx(f.c, -1.), want_g(f.c, 1.), want_gx(f.c, -1.);
  std::vector<double> g_act(f.g.buf.size());
  for (int s = 0; s < f.n; ++s)
    for (int ch = 0; ch < f.c; ++ch)
      for (int yy = f.region.y0; yy < f.region.y1; ++yy)
        for (int xx = f.region.x0; xx < f.region.x1; ++xx) {
          const int64_t off = f.g.t.offset(s, ch / B, yy, xx) + ch % B;
          const double yv = f.y.buf.data()[off];
          const double gv = f.g.buf.data()[off] * test::act_grad_ref(Act::Leaky, double(a[ch]) * yv + b[ch]);
          g_act[size_t(off)] = gv;
          if (!contains(own, Box{yy, yy + 1, xx, xx + 1})) continue;
          want_g[ch] += gv;
          want_gx[ch] += gv * (yv - mean[ch]) * rstd[ch];
        }
  const std::vector<float> g_in(f.g.buf.data(), f.g.buf.data() + f.g.buf.size());
  act_backward_bn_sums(f.g.t, f.y.t, f.region, own, a.data(), b.data(), Act::Leaky, mean.data(), rstd.data(), sg.data(),
                       sgx.data());
  for (int ch = 0; ch < f.c; ++ch) {
    EXPECT_NEAR(sg[ch], want_g[ch], 1e-5 * (1 + std::fabs(want_g[ch]))) << "act_backward_bn_sums Σg, channel " << ch;
    EXPECT_NEAR(sgx[ch], want_gx[ch], 1e-5 * (1 + std::fabs(want_gx[ch])))
        << "act_backward_bn_sums Σg·x̂, channel " << ch;
  }
  int bad_act = 0;
  for (int s = 0; s < f.n; ++s)
    for (int blk = 0; blk < f.g.t.cblocks(); ++blk)
      for (int yy = f.box.y0; yy < f.box.y1; ++yy)
        for (int xx = f.box.x0; xx < f.box.x1; ++xx)
          for (int cc = 0; cc < B; ++cc) {
            const int64_t off = f.g.t.offset(s, blk, yy, xx) + cc;
            const float gv = f.g.buf.data()[off];
            if (!f.in_region(yy, xx))
              bad_act += gv != g_in[size_t(off)];
            else if (blk * B + cc < f.c)
              bad_act += std::fabs(gv - g_act[size_t(off)]) > 1e-6 * (1 + std::fabs(g_act[size_t(off)]));
          }
  EXPECT_EQ(bad_act, 0) << "act_backward_bn_sums: activation backward on the region, nothing outside it";
  EXPECT_THROW(act_backward_bn_sums(f.g.t, f.y.t, own, f.region, a.data(), b.data(), Act::Leaky, mean.data(),
                                    rstd.data(), sg.data(), sgx.data()),
               Error);

  const std::vector<float> k1 = uniform(rng, f.c), k2 = uniform(rng, f.c), k3 = uniform(rng, f.c),
                           mf = uniform(rng, f.c);
  const std::vector<float> g0(f.g.buf.data(), f.g.buf.data() + f.g.buf.size());
  bn_backward_apply(f.g.t, f.y.t, f.region, k1.data(), k2.data(), k3.data(), mf.data());
  int bad = 0, bad_outside = 0, bad_pad = 0;
  for (int s = 0; s < f.n; ++s)
    for (int blk = 0; blk < f.g.t.cblocks(); ++blk)
      for (int yy = f.box.y0; yy < f.box.y1; ++yy)
        for (int xx = f.box.x0; xx < f.box.x1; ++xx)
          for (int cc = 0; cc < B; ++cc) {
            const int ch = blk * B + cc;
            const int64_t off = f.g.t.offset(s, blk, yy, xx) + cc;
            const float gv = f.g.buf.data()[off];
            if (!f.in_region(yy, xx)) {
              bad_outside += gv != g0[size_t(off)];
            } else if (ch >= f.c) {
              bad_pad += gv != 0.f;
            } else {
              const double r =
                  double(k1[ch]) * g0[size_t(off)] + double(k2[ch]) * (double(f.y.buf.data()[off]) - mf[ch]) + k3[ch];
              bad += std::fabs(gv - r) > 1e-5 * (1 + std::fabs(r));
            }
          }
  EXPECT_EQ(bad, 0) << "bn_backward_apply";
  EXPECT_EQ(bad_outside, 0) << "bn_backward_apply wrote outside the region";
  EXPECT_EQ(bad_pad, 0) << "bn_backward_apply: padded channels are not zero";
}

INSTANTIATE_TEST_SUITE_P(Channels, Pointwise,
                         ::testing::Combine(::testing::Values(1, 5, 16, 21, 35), ::testing::Values(8, 16)));

TEST(Pointwise, Activate) {
  for (Act act : {Act::Linear, Act::Leaky, Act::Relu, Act::Logistic, Act::Ramp})
    for (float v : {-3.f, -0.5f, 0.f, 0.25f, 2.f})
      EXPECT_NEAR(activate(act, v), test::act_ref(act, v), 1e-6) << act_name(act) << " " << v;
}

// ---------------------------------------------------------------- dense head

TEST(DenseNaive, AvgPool) {
  Rng rng(5);
  const int n = 3, c = 7, hw = 13;
  const std::vector<float> x = uniform(rng, size_t(n) * c * hw), dy = uniform(rng, size_t(n) * c);
  std::vector<float> y(size_t(n) * c), dx(x.size(), 5.f);
  avgpool_forward(x.data(), y.data(), n, c, hw);
  avgpool_backward(dy.data(), dx.data(), n, c, hw);
  std::vector<double> yr(y.size(), 0.), dxr(x.size());
  for (int i = 0; i < n * c; ++i) {
    for (int k = 0; k < hw; ++k) yr[i] += x[size_t(i) * hw + k] / double(hw);
    for (int k = 0; k < hw; ++k) dxr[size_t(i) * hw + k] = dy[i] / double(hw);
  }
  EXPECT_LE(rel_diff(y, yr), 1e-6);
  EXPECT_LE(rel_diff(dx, dxr), 1e-6);
}

TEST(DenseNaive, Connected) {
  Rng rng(6);
  const int n = 3, in = 37, out = 11;
  for (Act act : {Act::Linear, Act::Leaky, Act::Relu, Act::Logistic, Act::Ramp}) {
    SCOPED_TRACE(act_name(act));
    const std::vector<float> x = uniform(rng, size_t(n) * in), w = uniform(rng, size_t(out) * in, -0.3f, 0.3f),
                             b = uniform(rng, out), g0 = uniform(rng, size_t(n) * out);
    std::vector<float> y(size_t(n) * out), z(y.size());
    connected_forward(x.data(), w.data(), b.data(), y.data(), z.data(), n, in, out, act);
    std::vector<double> yr(y.size()), zr(y.size()), gyr(y.size()), dwr(w.size()), dbr(out, 0.), dxr(x.size(), 0.);
    for (int s = 0; s < n; ++s)
      for (int o = 0; o < out; ++o) {
        double acc = b[o];
        for (int i = 0; i < in; ++i) acc += double(x[size_t(s) * in + i]) * w[size_t(o) * in + i];
        yr[size_t(s) * out + o] = acc;
        zr[size_t(s) * out + o] = test::act_ref(act, acc);
        gyr[size_t(s) * out + o] = g0[size_t(s) * out + o] * test::act_grad_ref(act, acc);
      }
    EXPECT_LE(rel_diff(y, yr), 1e-6) << "connected_forward pre-activation";
    EXPECT_LE(rel_diff(z, zr), 1e-6) << "connected_forward output";
    // backward: dW and db accumulate onto what is there, dx is written
    std::vector<float> g = g0, dw = uniform(rng, w.size()), db = uniform(rng, out), dx(x.size(), 3.f);
    for (size_t i = 0; i < dw.size(); ++i) dwr[i] = dw[i];
    for (int o = 0; o < out; ++o) dbr[o] = db[o];
    for (int s = 0; s < n; ++s)
      for (int o = 0; o < out; ++o) {
        const double gy = gyr[size_t(s) * out + o];
        dbr[o] += gy;
        for (int i = 0; i < in; ++i) {
          dwr[size_t(o) * in + i] += gy * x[size_t(s) * in + i];
          dxr[size_t(s) * in + i] += gy * w[size_t(o) * in + i];
        }
      }
    connected_backward(g.data(), x.data(), w.data(), y.data(), dw.data(), db.data(), dx.data(), n, in, out, act);
    EXPECT_LE(rel_diff(g, gyr), 1e-6) << "connected_backward: g becomes dL/dy";
    EXPECT_LE(rel_diff(dw, dwr), 1e-6) << "connected_backward dW";
    EXPECT_LE(rel_diff(db, dbr), 1e-6) << "connected_backward db";
    EXPECT_LE(rel_diff(dx, dxr), 1e-6) << "connected_backward dx";
    // dx may be skipped
    std::vector<float> g2 = g0, dw2(w.size(), 0.f), db2(size_t(out), 0.f);
    connected_backward(g2.data(), x.data(), w.data(), y.data(), dw2.data(), db2.data(), nullptr, n, in, out, act);
    EXPECT_EQ(g2, g);
  }
}

TEST(DenseNaive, Softmax) {
  Rng rng(7);
  const int n = 4, c = 9;
  std::vector<float> x = uniform(rng, size_t(n) * c, -3.f, 3.f);
  for (int i = 0; i < c; ++i) x[size_t(3) * c + i] += 1000.f;  // large logits must not overflow
  std::vector<float> p(x.size());
  softmax_forward(x.data(), p.data(), n, c);
  std::vector<double> pr(x.size());
  for (int s = 0; s < n; ++s) {
    double m = -1e300, sum = 0;
    for (int i = 0; i < c; ++i) m = std::max(m, double(x[size_t(s) * c + i]));
    for (int i = 0; i < c; ++i) sum += std::exp(x[size_t(s) * c + i] - m);
    for (int i = 0; i < c; ++i) pr[size_t(s) * c + i] = std::exp(x[size_t(s) * c + i] - m) / sum;
  }
  EXPECT_LE(rel_diff(p, pr), 1e-6);
  for (float v : p) EXPECT_TRUE(std::isfinite(v));

  // cross-entropy against a distribution; grad = p - truth
  std::vector<float> truth(p.size(), 0.f), grad(p.size());
  for (int s = 0; s < n; ++s) truth[size_t(s) * c + (s * 5) % c] = 1.f;
  double want = 0;
  for (size_t i = 0; i < p.size(); ++i)
    if (truth[i] != 0) want -= truth[i] * std::log(double(p[i]));
  EXPECT_NEAR(softmax_cross_entropy(p.data(), truth.data(), grad.data(), int64_t(p.size())), want,
              1e-5 * std::fabs(want));
  for (size_t i = 0; i < p.size(); ++i) EXPECT_EQ(grad[i], p[i] - truth[i]);
}

TEST(DenseNaive, Sse) {
  Rng rng(8);
  const std::vector<float> out = uniform(rng, 101), truth = uniform(rng, 101);
  std::vector<float> grad(out.size());
  double want = 0;
  for (size_t i = 0; i < out.size(); ++i) want += double(out[i] - truth[i]) * (out[i] - truth[i]);
  EXPECT_NEAR(sse(out.data(), truth.data(), grad.data(), int64_t(out.size())), want, 1e-9 * want);
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(grad[i], out[i] - truth[i]);
}

TEST(DenseNaive, DropoutMask) {
  Rng rng(9);
  const int n = 3;
  const int64_t per = 5000;
  const float p = 0.3f;
  const std::vector<float> x = uniform(rng, size_t(n * per), 0.5f, 1.5f);  // never zero
  std::vector<float> a(x.size()), b(x.size()), c(x.size()), two(size_t(2 * per));
  dropout_apply(x.data(), a.data(), per, n, p, 42, 7);
  dropout_apply(x.data(), b.data(), per, n, p, 42, 7);
  dropout_apply(x.data(), c.data(), per, n, p, 42, 8);
  dropout_apply(x.data(), two.data(), per, 2, p, 42, 7);
  EXPECT_EQ(a, b) << "the mask is a function of (seed, step, sample, index)";
  EXPECT_NE(a, c) << "the mask changes with the step";
  EXPECT_TRUE(std::equal(two.begin(), two.end(), a.begin())) << "a sample's mask does not depend on the batch size";
  int64_t dropped = 0, bad_scale = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (a[i] == 0.f) {
      ++dropped;
    } else {
      bad_scale += std::fabs(a[i] - x[i] / (1.f - p)) > 1e-6f * std::fabs(a[i]);
    }
  }
  EXPECT_EQ(bad_scale, 0) << "kept cells are scaled by 1/(1-p)";
  EXPECT_NEAR(double(dropped) / double(x.size()), p, 0.02);
  // samples get different masks
  int same = 0;
  for (int64_t i = 0; i < per; ++i) same += (a[size_t(i)] == 0.f) == (a[size_t(per + i)] == 0.f);
  EXPECT_LT(same, per * 0.7);
}

}  // namespace
}  // namespace tt
