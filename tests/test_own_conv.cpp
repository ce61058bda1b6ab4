// The project's own Highway convolution kernels (src/layers/own_conv.hpp): against a naive
// double-precision reference, against oneDNN, and bit-identical on tiles (sub-boxes). Also
// the OpenBLAS backward-weights (src/layers/gemm_conv.hpp) against the same reference.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "layers/box.hpp"
#include "layers/gemm_conv.hpp"
#include "layers/own_conv.hpp"
#include "util/error.hpp"

namespace tt {
namespace {

constexpr uint64_t kSeed = 20261123;

int cdiv(int a, int b) { return (a + b - 1) / b; }

std::string str(const OwnConvShape& s) {
  char buf[200];
  std::snprintf(buf, sizeof buf, "n%d ic%d oc%d k%d s%d in %dx%d out %dx%d pad t%d l%d ib%d b%d", s.n, s.ic, s.oc,
                s.k, s.s, s.ih, s.iw, s.oh, s.ow, s.pt, s.pl, s.ib, s.b);
  return buf;
}

// Plain NCHW <-> [n][C/cb][h][w][cb] (cb = 1: plain).
std::vector<float> to_blocked(const std::vector<float>& p, int n, int c, int h, int w, int cb, float pad_value = 0.f) {
  const int cbs = cdiv(c, cb);
  std::vector<float> b(size_t(n) * cbs * cb * h * w, pad_value);
  for (int s = 0; s < n; ++s)
    for (int ch = 0; ch < c; ++ch)
      for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x)
          b[(((size_t(s) * cbs + ch / cb) * h + y) * w + x) * cb + ch % cb] = p[((size_t(s) * c + ch) * h + y) * w + x];
  return b;
}
float& blocked_at(std::vector<float>& b, int c, int h, int w, int cb, int s, int ch, int y, int x) {
  const int cbs = cdiv(c, cb);
  return b[(((size_t(s) * cbs + ch / cb) * h + y) * w + x) * cb + ch % cb];
}

// oihw -> the layouts own_weights_tag names (padded entries zero).
std::vector<float> pack_weights(const std::vector<float>& oihw, const OwnConvShape& s, OwnPass pass) {
  const int B = s.b, k = s.k, ocbs = cdiv(s.oc, B), icbs = cdiv(s.ic, B);
  std::vector<float> w(size_t(own_weights_floats(s, pass)), 0.f);
  for (int o = 0; o < s.oc; ++o)
    for (int i = 0; i < s.ic; ++i)
      for (int t = 0; t < k * k; ++t) {
        const float v = oihw[(size_t(o) * s.ic + i) * k * k + t];
        size_t idx;
        if (pass == OwnPass::BackwardData)
          idx = ((((size_t(o / B) * icbs + i / B) * k * k + t) * B + o % B) * B) + i % B;
        else if (s.ib == 1)
          idx = ((size_t(o / B) * s.ic + i) * k * k + t) * B + o % B;
        else
          idx = ((((size_t(o / B) * icbs + i / B) * k * k + t) * B + i % B) * B) + o % B;
        w[idx] = v;
      }
  (void)ocbs;
  return w;
}
// Forward-layout weights (or their gradient) -> oihw; also reports whether padded entries are zero.
struct Case {
  OwnConvShape s;
  std::vector<float> src, w, bias, dd;  // plain src / diff_dst, oihw weights
  bool has_bias = false;
};

void fill(std::vector<float>& v, size_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  v.resize(n);
  for (float& x : v) x = u(rng);
}

Case make_case(const OwnConvShape& s, bool bias, std::mt19937_64& rng) {
  Case c;
  c.s = s;
  c.has_bias = bias;
  fill(c.src, size_t(s.n) * s.ic * s.ih * s.iw, rng);
  fill(c.w, size_t(s.oc) * s.ic * s.k * s.k, rng);
  fill(c.bias, size_t(s.oc), rng);
  fill(c.dd, size_t(s.n) * s.oc * s.oh * s.ow, rng);
  return c;
}

// Naive references in double; `mag` receives Σ|terms| of each result (the error scale).
void ref_forward(const Case& c, std::vector<double>& out, std::vector<double>& mag) {
  const OwnConvShape& s = c.s;
  out.assign(size_t(s.n) * s.oc * s.oh * s.ow, 0.);
  mag.assign(out.size(), 0.);
  for (int n = 0; n < s.n; ++n)
    for (int o = 0; o < s.oc; ++o)
      for (int oy = 0; oy < s.oh; ++oy)
        for (int ox = 0; ox < s.ow; ++ox) {
          double acc = c.has_bias ? c.bias[o] : 0., m = c.has_bias ? std::fabs(c.bias[o]) : 0.;
          for (int i = 0; i < s.ic; ++i)
            for (int ky = 0; ky < s.k; ++ky)
              for (int kx = 0; kx < s.k; ++kx) {
                const int iy = oy * s.s + ky - s.pt, ix = ox * s.s + kx - s.pl;
                if (iy < 0 || iy >= s.ih || ix < 0 || ix >= s.iw) continue;
                const double p = double(c.src[((size_t(n) * s.ic + i) * s.ih + iy) * s.iw + ix]) *
                                 c.w[((size_t(o) * s.ic + i) * s.k + ky) * s.k + kx];
                acc += p;
                m += std::fabs(p);
              }
          const size_t j = ((size_t(n) * s.oc + o) * s.oh + oy) * s.ow + ox;
          out[j] = acc;
          mag[j] = m;
        }
}
void ref_backward_data(const Case& c, std::vector<double>& out, std::vector<double>& mag) {
  const OwnConvShape& s = c.s;
  out.assign(size_t(s.n) * s.ic * s.ih * s.iw, 0.);
  mag.assign(out.size(), 0.);
  for (int n = 0; n < s.n; ++n)
    for (int o = 0; o < s.oc; ++o)
      for (int oy = 0; oy < s.oh; ++oy)
        for (int ox = 0; ox < s.ow; ++ox)
          for (int i = 0; i < s.ic; ++i)
            for (int ky = 0; ky < s.k; ++ky)
              for (int kx = 0; kx < s.k; ++kx) {
                const int iy = oy * s.s + ky - s.pt, ix = ox * s.s + kx - s.pl;
                if (iy < 0 || iy >= s.ih || ix < 0 || ix >= s.iw) continue;
                const double p = double(c.dd[((size_t(n) * s.oc + o) * s.oh + oy) * s.ow + ox]) *
                                 c.w[((size_t(o) * s.ic + i) * s.k + ky) * s.k + kx];
                const size_t j = ((size_t(n) * s.ic + i) * s.ih + iy) * s.iw + ix;
                out[j] += p;
                mag[j] += std::fabs(p);
              }
}
void ref_backward_weights(const Case& c, std::vector<double>& dw, std::vector<double>& mag, std::vector<double>& db,
                          std::vector<double>& dbmag) {
  const OwnConvShape& s = c.s;
  dw.assign(size_t(s.oc) * s.ic * s.k * s.k, 0.);
  mag.assign(dw.size(), 0.);
  db.assign(size_t(s.oc), 0.);
  dbmag.assign(db.size(), 0.);
  for (int n = 0; n < s.n; ++n)
    for (int o = 0; o < s.oc; ++o)
      for (int oy = 0; oy < s.oh; ++oy)
        for (int ox = 0; ox < s.ow; ++ox) {
          const double g = c.dd[((size_t(n) * s.oc + o) * s.oh + oy) * s.ow + ox];
          db[o] += g;
          dbmag[o] += std::fabs(g);
          for (int i = 0; i < s.ic; ++i)
            for (int ky = 0; ky < s.k; ++ky)
              for (int kx = 0; kx < s.k; ++kx) {
                const int iy = oy * s.s + ky - s.pt, ix = ox * s.s + kx - s.pl;
                if (iy < 0 || iy >= s.ih || ix < 0 || ix >= s.iw) continue;
                const double p = g * c.src[((size_t(n) * s.ic + i) * s.ih + iy) * s.iw + ix];
                const size_t j = ((size_t(o) * s.ic + i) * s.k + ky) * s.k + kx;
                dw[j] += p;
                mag[j] += std::fabs(p);
              }
        }
}

constexpr double kTol = 1e-5;
// |got - ref| <= kTol * Σ|terms| (+ a tiny absolute floor for sums of no terms).
::testing::AssertionResult close(const char* what, const std::vector<float>& got, const std::vector<double>& ref,
                                 const std::vector<double>& mag, const std::string& shape) {
  for (size_t j = 0; j < ref.size(); ++j)
    if (!(std::fabs(got[j] - ref[j]) <= kTol * mag[j] + 1e-30))
      return ::testing::AssertionFailure() << what << " element " << j << ": got " << got[j] << ", reference " << ref[j]
                                           << " (scale " << mag[j] << ") for " << shape;
  return ::testing::AssertionSuccess();
}

OwnConvShape random_shape(std::mt19937_64& rng, int max_in) {
  auto pick = [&](std::initializer_list<int> l) { return l.begin()[rng() % l.size()]; };
  auto uni = [&](int a, int b) { return a + int(rng() % unsigned(b - a + 1)); };
  OwnConvShape s;
  s.b = pick({8, 16});
  s.ib = pick({1, s.b});
  s.n = uni(1, 3);
  s.k = pick({1, 3, 3, 5, 7});
  s.s = pick({1, 1, 2, 3});
  s.ic = pick({1, 3, 5, 8, 16, 21, 35});
  s.oc = pick({1, 3, 5, 8, 16, 21, 35});
  s.pt = pick({0, 0, 1, uni(0, s.k + 1)});
  s.pl = pick({0, 0, 1, uni(0, s.k + 1)});
  const int pb = uni(0, s.k), pr = uni(0, s.k);
  s.ih = uni(1, max_in);
  s.iw = uni(1, max_in);
  if (rng() % 6 == 0) s.ih = s.iw = 1;  // tiny boxes
  s.oh = std::max(1, (s.ih + s.pt + pb - s.k) / s.s + 1);
  s.ow = std::max(1, (s.iw + s.pl + pr - s.k) / s.s + 1);
  return s;
}

const float kNaN = std::numeric_limits<float>::quiet_NaN();

// Checks padded channels of a blocked output are zero.
::testing::AssertionResult padding_zero(const std::vector<float>& b, int n, int c, int h, int w, int cb,
                                        const std::string& what, const std::string& shape) {
  if (cb == 1) return ::testing::AssertionSuccess();
  const int cbs = cdiv(c, cb);
  for (int s = 0; s < n; ++s)
    for (int ch = c; ch < cbs * cb; ++ch)
      for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x) {
          const float v = b[(((size_t(s) * cbs + ch / cb) * h + y) * w + x) * cb + ch % cb];
          if (!(v == 0.f))
            return ::testing::AssertionFailure() << what << ": padded channel " << ch << " holds " << v << " for "
                                                 << shape;
        }
  return ::testing::AssertionSuccess();
}

struct Printed {
  Printed() { std::printf("OwnConv: seed %llu, target %s\n", (unsigned long long)kSeed, own_conv_target().c_str()); }
};
void print_once() { static Printed p; }

TEST(OwnConv, RejectsUnsupportedBlocks) {
  print_once();
  OwnConvShape s;
  std::vector<float> buf(4096, 0.f);
  for (auto [b, ib] : {std::pair{4, 4}, {8, 16}, {16, 8}, {32, 32}, {8, 2}, {0, 1}}) {
    s.b = b;
    s.ib = ib;
    EXPECT_THROW(own_conv_forward(s, buf.data(), buf.data(), nullptr, buf.data()), Error) << b << " " << ib;
    EXPECT_THROW(own_conv_backward_data(s, buf.data(), buf.data(), buf.data()), Error) << b << " " << ib;
    EXPECT_THROW(own_conv_backward_weights(s, buf.data(), buf.data(), buf.data(), nullptr), Error) << b << " " << ib;
    EXPECT_THROW(own_weights_tag(b, ib, OwnPass::Forward), Error);
  }
  EXPECT_FALSE(own_conv_target().empty());
}

TEST(OwnConv, WeightsTagMatchesOneDnnReorder) {
  using tag = dnnl::memory::format_tag;
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);
  std::mt19937_64 rng(kSeed);
  for (int b : {8, 16})
    for (int ib : {1, b})
      for (OwnPass pass : {OwnPass::Forward, OwnPass::BackwardData})
        for (auto [oc, ic] : {std::pair{21, 3}, {8, 35}, {35, 16}}) {
          OwnConvShape s;
          s.b = b;
          s.ib = ib;
          s.oc = oc;
          s.ic = ic;
          s.k = 3;
          std::vector<float> oihw;
          fill(oihw, size_t(oc) * ic * 9, rng);
          const dnnl::memory::dims dims{oc, ic, 3, 3};
          dnnl::memory plain({dims, dnnl::memory::data_type::f32, tag::oihw}, eng, oihw.data());
          dnnl::memory::desc own_d(dims, dnnl::memory::data_type::f32, own_weights_tag(b, ib, pass));
          ASSERT_EQ(own_d.get_size(), own_weights_floats(s, pass) * sizeof(float)) << str(s);
          dnnl::memory own(own_d, eng);
          dnnl::reorder(plain, own).execute(strm, plain, own);
          strm.wait();
          const std::vector<float> mine = pack_weights(oihw, s, pass);
          ASSERT_EQ(0, std::memcmp(mine.data(), own.get_data_handle(), own_d.get_size()))
              << "pass " << int(pass) << " " << str(s);
        }
}

// Random shapes: forward, backward-data and backward-weights against the double reference.
TEST(OwnConv, MatchesNaiveReference) {
  print_once();
  std::mt19937_64 rng(kSeed + 1);
  int cases = 0;
  for (int rep = 0; rep < 160; ++rep) {
    const OwnConvShape s = random_shape(rng, rep < 120 ? 9 : 17);
    const Case c = make_case(s, rng() % 2, rng);
    const std::string shape = str(s) + (c.has_bias ? " bias" : "");
    SCOPED_TRACE(shape);
    const int B = s.b;
    const std::vector<float> src = to_blocked(c.src, s.n, s.ic, s.ih, s.iw, s.ib);
    const std::vector<float> dd = to_blocked(c.dd, s.n, s.oc, s.oh, s.ow, B);
    std::vector<double> ref, mag;
    // forward, output prefilled with NaN: every element (padding too) must be written
    std::vector<float> dst(size_t(s.n) * cdiv(s.oc, B) * B * s.oh * s.ow, kNaN);
    own_conv_forward(s, src.data(), pack_weights(c.w, s, OwnPass::Forward).data(),
                     c.has_bias ? c.bias.data() : nullptr, dst.data());
    ref_forward(c, ref, mag);
    std::vector<float> got(ref.size());
    for (int n = 0; n < s.n; ++n)
      for (int o = 0; o < s.oc; ++o)
        for (int y = 0; y < s.oh; ++y)
          for (int x = 0; x < s.ow; ++x)
            got[((size_t(n) * s.oc + o) * s.oh + y) * s.ow + x] = blocked_at(dst, s.oc, s.oh, s.ow, B, n, o, y, x);
    ASSERT_TRUE(close("forward", got, ref, mag, shape));
    ASSERT_TRUE(padding_zero(dst, s.n, s.oc, s.oh, s.ow, B, "forward dst", shape));
    // backward-data
    std::vector<float> dsrc(size_t(s.n) * cdiv(s.ic, s.ib) * s.ib * s.ih * s.iw, kNaN);
    own_conv_backward_data(s, dd.data(), pack_weights(c.w, s, OwnPass::BackwardData).data(), dsrc.data());
    ref_backward_data(c, ref, mag);
    got.resize(ref.size());
    for (int n = 0; n < s.n; ++n)
      for (int i = 0; i < s.ic; ++i)
        for (int y = 0; y < s.ih; ++y)
          for (int x = 0; x < s.iw; ++x)
            got[((size_t(n) * s.ic + i) * s.ih + y) * s.iw + x] = blocked_at(dsrc, s.ic, s.ih, s.iw, s.ib, n, i, y, x);
    ASSERT_TRUE(close("backward-data", got, ref, mag, shape));
    ASSERT_TRUE(padding_zero(dsrc, s.n, s.ic, s.ih, s.iw, s.ib, "diff_src", shape));
    // backward-weights (+ diff_b), outputs prefilled with NaN: they are overwritten
    std::vector<float> dw(size_t(own_weights_floats(s, OwnPass::BackwardWeights)), kNaN), db(size_t(s.oc), kNaN);
    ASSERT_EQ(dw.size(), size_t(s.oc) * s.ic * s.k * s.k);  // plain oihw
    own_conv_backward_weights(s, src.data(), dd.data(), dw.data(), db.data());
    std::vector<double> dbref, dbmag;
    ref_backward_weights(c, ref, mag, dbref, dbmag);
    ASSERT_TRUE(close("backward-weights", dw, ref, mag, shape));
    ASSERT_TRUE(close("diff_b", db, dbref, dbmag, shape));
    // accumulate: adds the same gradient to what is there (here: to itself)
    std::vector<float> twice = dw;
    own_conv_backward_weights(s, src.data(), dd.data(), twice.data(), nullptr, true);
    for (size_t j = 0; j < dw.size(); ++j) ref[j] *= 2, mag[j] *= 2;
    ASSERT_TRUE(close("backward-weights, accumulated", twice, ref, mag, shape));
    ++cases;
  }
  EXPECT_EQ(cases, 160);
}

// Random shapes, also maps taller than one product's slice of rows: the three passes on
// plain oihw weights; backward-weights overwrites or adds to what is there.
TEST(GemmConv, MatchesNaiveReference) {
  std::mt19937_64 rng(kSeed + 7);
  for (int rep = 0; rep < 60; ++rep) {
    OwnConvShape s = random_shape(rng, 17);
    if (rep % 10 == 0) {  // wide and tall: several slices
      s.ic = 61, s.oc = 40, s.k = 3, s.s = 1, s.pt = s.pl = 1, s.n = 2;
      s.ih = s.oh = 150, s.iw = s.ow = 23;
    }
    const Case c = make_case(s, rng() % 2, rng);
    const std::string shape = str(s) + (c.has_bias ? " bias" : "");
    SCOPED_TRACE(shape);
    const int B = s.b;
    const std::vector<float> src = to_blocked(c.src, s.n, s.ic, s.ih, s.iw, s.ib);
    const std::vector<float> dd = to_blocked(c.dd, s.n, s.oc, s.oh, s.ow, B);
    std::vector<float> work(gemm_conv_work_floats(s), kNaN);
    std::vector<double> ref, mag, dbref, dbmag;
    // forward
    std::vector<float> dst(size_t(s.n) * cdiv(s.oc, B) * B * s.oh * s.ow, kNaN);
    gemm_conv_forward(s, src.data(), c.w.data(), c.has_bias ? c.bias.data() : nullptr, dst.data(), work.data());
    ref_forward(c, ref, mag);
    std::vector<float> got(ref.size());
    for (int n = 0; n < s.n; ++n)
      for (int o = 0; o < s.oc; ++o)
        for (int y = 0; y < s.oh; ++y)
          for (int x = 0; x < s.ow; ++x)
            got[((size_t(n) * s.oc + o) * s.oh + y) * s.ow + x] = blocked_at(dst, s.oc, s.oh, s.ow, B, n, o, y, x);
    ASSERT_TRUE(close("forward", got, ref, mag, shape));
    ASSERT_TRUE(padding_zero(dst, s.n, s.oc, s.oh, s.ow, B, "forward dst", shape));
    // backward-data
    std::vector<float> dsrc(size_t(s.n) * cdiv(s.ic, s.ib) * s.ib * s.ih * s.iw, kNaN);
    gemm_conv_backward_data(s, dd.data(), c.w.data(), dsrc.data(), work.data());
    ref_backward_data(c, ref, mag);
    got.resize(ref.size());
    for (int n = 0; n < s.n; ++n)
      for (int i = 0; i < s.ic; ++i)
        for (int y = 0; y < s.ih; ++y)
          for (int x = 0; x < s.iw; ++x)
            got[((size_t(n) * s.ic + i) * s.ih + y) * s.iw + x] = blocked_at(dsrc, s.ic, s.ih, s.iw, s.ib, n, i, y, x);
    ASSERT_TRUE(close("backward-data", got, ref, mag, shape));
    ASSERT_TRUE(padding_zero(dsrc, s.n, s.ic, s.ih, s.iw, s.ib, "diff_src", shape));
    // backward-weights
    ref_backward_weights(c, ref, mag, dbref, dbmag);
    std::vector<float> dw(ref.size(), kNaN), db(size_t(s.oc), kNaN);
    gemm_conv_backward_weights(s, src.data(), dd.data(), dw.data(), db.data(), false, work.data());
    ASSERT_TRUE(close("backward-weights", dw, ref, mag, shape));
    ASSERT_TRUE(close("diff_b", db, dbref, dbmag, shape));
    gemm_conv_backward_weights(s, src.data(), dd.data(), dw.data(), nullptr, true, work.data());
    for (size_t i = 0; i < ref.size(); ++i) ref[i] *= 2, mag[i] *= 2;
    ASSERT_TRUE(close("backward-weights added", dw, ref, mag, shape));
  }
}

// The kernels' semantics are oneDNN's convolution_direct (plain formats) for a few shapes.
TEST(OwnConv, MatchesOneDnn) {
  using tag = dnnl::memory::format_tag;
  using dt = dnnl::memory::data_type;
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);
  std::mt19937_64 rng(kSeed + 2);
  struct G {
    int ic, oc, k, s, ih, iw, pt, pl, pb, pr, ib, b;
  };
  for (const G& g : {G{3, 32, 3, 1, 20, 23, 1, 1, 1, 1, 1, 8}, G{32, 21, 3, 2, 15, 12, 1, 0, 1, 2, 8, 8},
                     G{35, 40, 1, 1, 7, 9, 0, 0, 0, 0, 16, 16}, G{5, 16, 5, 3, 17, 13, 2, 4, 0, 3, 1, 16}}) {
    OwnConvShape s;
    s.n = 2;
    s.ic = g.ic;
    s.oc = g.oc;
    s.k = g.k;
    s.s = g.s;
    s.ih = g.ih;
    s.iw = g.iw;
    s.pt = g.pt;
    s.pl = g.pl;
    s.oh = (g.ih + g.pt + g.pb - g.k) / g.s + 1;
    s.ow = (g.iw + g.pl + g.pr - g.k) / g.s + 1;
    s.ib = g.ib;
    s.b = g.b;
    const std::string shape = str(s);
    const Case c = make_case(s, true, rng);
    const dnnl::memory::dims sd{s.n, s.ic, s.ih, s.iw}, wd{s.oc, s.ic, s.k, s.k}, dd{s.n, s.oc, s.oh, s.ow},
        st{s.s, s.s}, pl{s.pt, s.pl}, pr{g.pb, g.pr};
    dnnl::memory::desc src_d(sd, dt::f32, tag::nchw), w_d(wd, dt::f32, tag::oihw), dst_d(dd, dt::f32, tag::nchw),
        b_d({s.oc}, dt::f32, tag::x);
    auto alg = dnnl::algorithm::convolution_direct;
    dnnl::convolution_forward::primitive_desc fpd(
        {dnnl::prop_kind::forward_training, alg, src_d, w_d, b_d, dst_d, st, pl, pr}, eng);
    std::vector<float> src = c.src, w = c.w, bias = c.bias, ddv = c.dd;
    std::vector<float> dst(size_t(s.n) * s.oc * s.oh * s.ow), dsrc(src.size()), dw(w.size()), db(size_t(s.oc));
    auto m = [&](const dnnl::memory::desc& d, std::vector<float>& v) { return dnnl::memory(d, eng, v.data()); };
    dnnl::convolution_forward(fpd).execute(
        strm, {{DNNL_ARG_SRC, m(src_d, src)}, {DNNL_ARG_WEIGHTS, m(w_d, w)}, {DNNL_ARG_BIAS, m(b_d, bias)},
               {DNNL_ARG_DST, m(dst_d, dst)}});
    dnnl::convolution_backward_data::primitive_desc bdpd({alg, src_d, w_d, dst_d, st, pl, pr}, eng, fpd);
    dnnl::convolution_backward_data(bdpd).execute(
        strm, {{DNNL_ARG_DIFF_DST, m(dst_d, ddv)}, {DNNL_ARG_WEIGHTS, m(w_d, w)}, {DNNL_ARG_DIFF_SRC, m(src_d, dsrc)}});
    dnnl::convolution_backward_weights::primitive_desc bwpd({alg, src_d, w_d, b_d, dst_d, st, pl, pr}, eng, fpd);
    dnnl::convolution_backward_weights(bwpd).execute(strm, {{DNNL_ARG_SRC, m(src_d, src)},
                                                            {DNNL_ARG_DIFF_DST, m(dst_d, ddv)},
                                                            {DNNL_ARG_DIFF_WEIGHTS, m(w_d, dw)},
                                                            {DNNL_ARG_DIFF_BIAS, m(b_d, db)}});
    strm.wait();

    const std::vector<float> srcb = to_blocked(src, s.n, s.ic, s.ih, s.iw, s.ib), ddb = to_blocked(ddv, s.n, s.oc, s.oh, s.ow, s.b);
    std::vector<float> my_dst(size_t(s.n) * cdiv(s.oc, s.b) * s.b * s.oh * s.ow);
    own_conv_forward(s, srcb.data(), pack_weights(w, s, OwnPass::Forward).data(), bias.data(), my_dst.data());
    std::vector<float> my_dsrc(size_t(s.n) * cdiv(s.ic, s.ib) * s.ib * s.ih * s.iw);
    own_conv_backward_data(s, ddb.data(), pack_weights(w, s, OwnPass::BackwardData).data(), my_dsrc.data());
    std::vector<float> my_dw(size_t(own_weights_floats(s, OwnPass::BackwardWeights))), my_db(size_t(s.oc));
    own_conv_backward_weights(s, srcb.data(), ddb.data(), my_dw.data(), my_db.data());

    auto cmp = [&](const char* what, const std::vector<float>& mine, const std::vector<float>& theirs) {
      double num = 0, den = 0;
      for (size_t j = 0; j < theirs.size(); ++j) {
        num += double(mine[j] - theirs[j]) * (mine[j] - theirs[j]);
        den += double(theirs[j]) * theirs[j];
      }
      EXPECT_LT(std::sqrt(num / den), 1e-5) << what << " vs oneDNN for " << shape;
    };
    cmp("forward", to_blocked(dst, s.n, s.oc, s.oh, s.ow, s.b), my_dst);
    cmp("backward-data", to_blocked(dsrc, s.n, s.ic, s.ih, s.iw, s.ib), my_dsrc);
    cmp("backward-weights", my_dw, dw);
    cmp("diff_b", my_db, db);
  }
}

// A global map computed whole, then sub-boxes of it computed as the engine computes tiles
// (clamped input box window_in, padding border_pad): forward values must be bit-identical,
// and so must backward-data values of the cells that receive all their contributions.
void box_invariance(bool forward) {
  print_once();
  std::mt19937_64 rng(kSeed + (forward ? 3 : 4));
  auto uni = [&](int a, int b) { return a + int(rng() % unsigned(b - a + 1)); };
  long compared = 0;
  for (int rep = 0; rep < 60; ++rep) {
    const int B = rng() % 2 ? 8 : 16;
    const int k = std::initializer_list<int>{1, 3, 3, 5, 7}.begin()[rng() % 5];
    const Window win{k, forward ? uni(1, 3) : (rng() % 3 ? 1 : uni(2, 3)), uni(0, k / 2 + 1)};
    const int H = uni(std::max(k, 5), 30), W = uni(std::max(k, 5), 30);
    const int OH = (H + 2 * win.pad - k) / win.stride + 1, OW = (W + 2 * win.pad - k) / win.stride + 1;
    OwnConvShape g;
    g.b = B;
    g.ib = rng() % 3 ? B : 1;
    g.n = uni(1, 2);
    g.ic = std::initializer_list<int>{3, 5, 16, 21, 35}.begin()[rng() % 5];
    g.oc = std::initializer_list<int>{3, 8, 21, 35}.begin()[rng() % 4];
    g.k = k;
    g.s = win.stride;
    g.ih = H;
    g.iw = W;
    g.oh = OH;
    g.ow = OW;
    g.pt = g.pl = win.pad;
    const Case c = make_case(g, rng() % 2, rng);
    const std::vector<float> src = to_blocked(c.src, g.n, g.ic, H, W, g.ib);
    const std::vector<float> dd = to_blocked(c.dd, g.n, g.oc, OH, OW, B);
    const std::vector<float> wf = pack_weights(c.w, g, OwnPass::Forward), wb = pack_weights(c.w, g, OwnPass::BackwardData);
    const int icbs = cdiv(g.ic, g.ib), ocbs = cdiv(g.oc, B);
    std::vector<float> whole;
    if (forward) {
      whole.assign(size_t(g.n) * ocbs * B * OH * OW, 0.f);
      own_conv_forward(g, src.data(), wf.data(), c.has_bias ? c.bias.data() : nullptr, whole.data());
    } else {
      whole.assign(size_t(g.n) * icbs * g.ib * H * W, 0.f);
      own_conv_backward_data(g, dd.data(), wb.data(), whole.data());
    }
    for (int t = 0; t < 6; ++t) {
      Box o;
      o.y0 = uni(0, OH - 1);
      o.y1 = uni(o.y0 + 1, std::min(OH, o.y0 + 1 + uni(0, OH)));
      o.x0 = uni(0, OW - 1);
      o.x1 = uni(o.x0 + 1, std::min(OW, o.x0 + 1 + uni(0, OW)));
      const Box in = window_in(o, win, H, W);
      if (in.empty()) continue;
      const Pad p = border_pad(o, win, H, W);
      OwnConvShape s = g;
      s.ih = in.h();
      s.iw = in.w();
      s.oh = o.h();
      s.ow = o.w();
      s.pt = p.t;
      s.pl = p.l;
      const std::string shape = str(s) + " box " + o.str() + " of " + str(g);
      if (forward) {
        std::vector<float> tsrc(size_t(g.n) * icbs * g.ib * in.area());
        for (int n = 0; n < g.n; ++n)
          for (int cb = 0; cb < icbs; ++cb)
            for (int y = in.y0; y < in.y1; ++y)
              std::memcpy(&tsrc[(((size_t(n) * icbs + cb) * in.h() + y - in.y0) * in.w()) * g.ib],
                          &src[(((size_t(n) * icbs + cb) * H + y) * W + in.x0) * g.ib], sizeof(float) * in.w() * g.ib);
        std::vector<float> tdst(size_t(g.n) * ocbs * B * o.area(), kNaN);
        own_conv_forward(s, tsrc.data(), wf.data(), c.has_bias ? c.bias.data() : nullptr, tdst.data());
        for (int n = 0; n < g.n; ++n)
          for (int cb = 0; cb < ocbs; ++cb)
            for (int y = o.y0; y < o.y1; ++y)
              for (int x = o.x0; x < o.x1; ++x) {
                const float* a = &tdst[(((size_t(n) * ocbs + cb) * o.h() + y - o.y0) * o.w() + x - o.x0) * B];
                const float* b = &whole[(((size_t(n) * ocbs + cb) * OH + y) * OW + x) * B];
                ASSERT_EQ(0, std::memcmp(a, b, sizeof(float) * B))
                    << "forward differs at (" << y << "," << x << ") block " << cb << ": " << shape;
                ++compared;
              }
      } else {
        std::vector<float> tdd(size_t(g.n) * ocbs * B * o.area());
        for (int n = 0; n < g.n; ++n)
          for (int cb = 0; cb < ocbs; ++cb)
            for (int y = o.y0; y < o.y1; ++y)
              std::memcpy(&tdd[(((size_t(n) * ocbs + cb) * o.h() + y - o.y0) * o.w()) * B],
                          &dd[(((size_t(n) * ocbs + cb) * OH + y) * OW + o.x0) * B], sizeof(float) * o.w() * B);
        std::vector<float> tds(size_t(g.n) * icbs * g.ib * in.area(), kNaN);
        own_conv_backward_data(s, tdd.data(), wb.data(), tds.data());
        for (int y = in.y0; y < in.y1; ++y)
          for (int x = in.x0; x < in.x1; ++x) {
            if (!contains(o, touching_out({y, y + 1, x, x + 1}, win, OH, OW))) continue;  // partial sums only
            for (int n = 0; n < g.n; ++n)
              for (int ch = 0; ch < icbs * g.ib; ++ch) {
                const size_t lt = g.ib == 1 ? ((size_t(n) * g.ic + ch) * in.h() + y - in.y0) * in.w() + x - in.x0
                                            : ((((size_t(n) * icbs + ch / g.ib) * in.h() + y - in.y0) * in.w() +
                                                x - in.x0) * g.ib) + ch % g.ib;
                const size_t lw = g.ib == 1 ? ((size_t(n) * g.ic + ch) * H + y) * W + x
                                            : ((((size_t(n) * icbs + ch / g.ib) * H + y) * W + x) * g.ib) + ch % g.ib;
                if (g.ib == 1 && ch >= g.ic) continue;
                ASSERT_EQ(0, std::memcmp(&tds[lt], &whole[lw], sizeof(float)))
                    << "backward-data differs at (" << y << "," << x << ") channel " << ch << ": " << tds[lt]
                    << " vs " << whole[lw] << " " << shape;
                ++compared;
              }
          }
      }
    }
  }
  EXPECT_GT(compared, 2000) << "too few cells (forward: blocks of cells) compared";
}

TEST(OwnConv, ForwardBitIdenticalOnSubBoxes) { box_invariance(true); }
TEST(OwnConv, BackwardDataBitIdenticalOnSubBoxes) { box_invariance(false); }

}  // namespace
}  // namespace tt
