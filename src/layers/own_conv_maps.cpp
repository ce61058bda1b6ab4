// Direct convolution with Google Highway: see own_conv.hpp for layouts and the fixed
// summation order. This file is compiled once per Highway target (foreach_target.h).
//
// Forward and backward-data share one micro-kernel: P output pixels x NOB output blocks
// of accumulators, a loop over (channel block c, tap a, tap b, lane i) that loads the
// NOB weight vectors of (c, a, b, i) and broadcasts one input value per pixel. Every
// accumulator sees the same sequence of MulAdds whatever P, NOB or the tap range, and
// the tap range only leaves out taps outside the box, so values do not depend on the box.
// A row's last run of P pixels overlaps the one before instead of falling back to
// narrower kernels (overlapping pixels are recomputed bit-identically).
//
// Also the weights' layouts, the ONEDNN_MAX_CPU_ISA cap and the target's name; the
// backward-weights kernel is in own_conv_weights.cpp.
// clang-format off
#include "layers/own_conv_common.hpp"  // first: Highway's target macros
// clang-format on

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <string>

#include "util/error.hpp"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "layers/own_conv_maps.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "layers/own_conv-inl.hpp"

HWY_BEFORE_NAMESPACE();
namespace tt::HWY_NAMESPACE {

// Runs f<P>(m) over m in [0, count) in runs of P pixels; the last run may overlap the one
// before (only where outputs are written once: not with a split reduction, which resumes
// from what the run before stored).
template <int P, class F>
HWY_INLINE void Runs(int count, F&& f, bool overlap) {
  if constexpr (P > 1) {
    if (count >= P) {
      int m = 0;
      for (; m + P <= count; m += P) f.template operator()<P>(m);
      const int rest = count - m;
      if (overlap && 2 * rest >= P) {
        f.template operator()<P>(count - P);  // overlaps the run before
      } else if (rest > 0) {
        auto shifted = [&]<int Q>(int j) { f.template operator()<Q>(m + j); };
        Runs<P / 2>(rest, shifted, overlap);
      }
      return;
    }
    Runs<P / 2>(count, f, overlap);
  } else {
    for (int m = 0; m < count; ++m) f.template operator()<1>(m);
  }
}

struct Taps {
  int ncb = 0, nky = 0, nkx = 0;
  ptrdiff_t in_cb = 0, in_ky = 0, in_kx = 0, in_px = 0;  // input offsets (floats)
  ptrdiff_t w_cb = 0, w_ky = 0, w_kx = 0, w_ob = 0;      // weight offsets (floats)
};
struct Out {
  ptrdiff_t px = 0, ob = 0, ch = 0;  // pixel and block strides; ch: channel stride (plain output)
  int valid_last = 0;                // valid channels in the call's last block
  // The sum over channel blocks may be split into chunks (cache blocking): a chunk after
  // the first resumes from the partial sums it stored (a float stored and loaded is the
  // same float, so the sequence of MulAdds is unchanged); the last adds bias and masks.
  bool first = true, last = true;
};

// out[p][ob] = (bias[ob] +) Σ_c Σ_a Σ_b Σ_i in[c][a][b][p][i] · w[ob][c][a][b][i][:]
// PX: compile-time pixel stride of the input (0: t.in_px). kPlain: output plain NCHW.
template <int B, int IBT, int P, int NOB, int PX, bool kPlain>
HWY_NOINLINE void Micro(const float* HWY_RESTRICT in, const float* HWY_RESTRICT w, const Taps& t,
                        const float* HWY_RESTRICT bias, float* HWY_RESTRICT out, const Out& o) {
  using C = Cfg<B>;
  using D = typename C::D;
  using V = hn::Vec<D>;
  constexpr int L = C::L, NV = C::NV;
  const D d;
  const ptrdiff_t px = PX ? PX : t.in_px;
  V acc[P][NOB][NV];
  for (int p = 0; p < P; ++p)
    for (int ob = 0; ob < NOB; ++ob)
      for (int v = 0; v < NV; ++v)
        acc[p][ob][v] = o.first ? hn::Zero(d) : hn::LoadU(d, out + p * o.px + ob * o.ob + v * L);
  for (int c = 0; c < t.ncb; ++c)
    for (int a = 0; a < t.nky; ++a)
      for (int b = 0; b < t.nkx; ++b) {
        const float* HWY_RESTRICT ip = in + c * t.in_cb + a * t.in_ky + b * t.in_kx;
        const float* HWY_RESTRICT wp = w + c * t.w_cb + a * t.w_ky + b * t.w_kx;
#pragma GCC unroll 16
        for (int i = 0; i < IBT; ++i) {
          V wv[NOB][NV];
#pragma GCC unroll 4
          for (int ob = 0; ob < NOB; ++ob)
#pragma GCC unroll 4
            for (int v = 0; v < NV; ++v) wv[ob][v] = hn::LoadU(d, wp + ob * t.w_ob + i * B + v * L);
#pragma GCC unroll 12
          for (int p = 0; p < P; ++p) {
            const V x = hn::Set(d, ip[p * px + i]);
#pragma GCC unroll 4
            for (int ob = 0; ob < NOB; ++ob)
#pragma GCC unroll 4
              for (int v = 0; v < NV; ++v) acc[p][ob][v] = hn::MulAdd(x, wv[ob][v], acc[p][ob][v]);
          }
        }
      }
  for (int p = 0; p < P; ++p)
    for (int ob = 0; ob < NOB; ++ob)
      for (int v = 0; v < NV; ++v) {
        V r = acc[p][ob][v];
        if (!o.last) {
          hn::StoreU(r, d, out + p * o.px + ob * o.ob + v * L);
          continue;
        }
        if (bias) r = hn::Add(r, hn::LoadU(d, bias + ob * B + v * L));
        const int valid = ob == NOB - 1 ? o.valid_last : B;
        if (valid < B) r = hn::IfThenElseZero(hn::FirstN(d, size_t(std::clamp(valid - v * L, 0, L))), r);
        if constexpr (!kPlain) {
          hn::StoreU(r, d, out + p * o.px + ob * o.ob + v * L);
        } else {
          alignas(64) float tmp[L];
          hn::StoreU(r, d, tmp);
          for (int l = 0; l < L && v * L + l < valid; ++l) out[(ob * B + v * L + l) * o.ch + p * o.px] = tmp[l];
        }
      }
}

// Channel blocks per chunk of the reduction: one group's weights of a chunk should stay
// in L1 while the group sweeps the rows, the chunk's input planes in L2.
inline int ReductionChunk(int ncb, ptrdiff_t in_cb, ptrdiff_t w_cb_group, int fma_per_cb) {
  constexpr ptrdiff_t kL1 = 5 * 1024, kL2 = 48 * 1024;  // floats (20 KB, 192 KB)
  const int min_chunk = std::max(1, cdiv(128, fma_per_cb));  // keep partial stores rare
  const ptrdiff_t c = std::min(kL1 / w_cb_group, kL2 / in_cb);
  const int chunk = int(std::max<ptrdiff_t>(min_chunk, c));
  if (chunk >= ncb) return ncb;
  const int chunks = cdiv(ncb, chunk);
  return cdiv(ncb, chunks);
}

// ---------------------------------------------------------------- forward
template <int B, int IB, int NOB, int PX>
void ForwardRow(const OwnConvShape& s, const Taps& t, int x_lo, int x_hi, const float* irow, const float* wg,
                const float* bias, float* orow, const Out& o) {
  constexpr int PMAX = Cfg<B>::PMAX;
  Taps ti = t;
  ti.nkx = t.nky > 0 ? s.k : 0;
  Runs<PMAX>(x_hi - x_lo, [&]<int P>(int m) {
    const int ox = x_lo + m;
    Micro<B, IB, P, NOB, PX, false>(irow + ptrdiff_t(ox * s.s - s.pl) * IB, wg, ti, bias, orow + ptrdiff_t(ox) * B, o);
  }, o.first && o.last);
  auto edge = [&](int ox) {
    const int kx0 = std::max(0, s.pl - ox * s.s), kx1 = std::min(s.k, s.iw + s.pl - ox * s.s);
    Taps te = t;
    te.nkx = t.nky > 0 ? std::max(0, kx1 - kx0) : 0;
    const float* ip = te.nkx ? irow + ptrdiff_t(ox * s.s + kx0 - s.pl) * IB : irow;
    Micro<B, IB, 1, NOB, PX, false>(ip, wg + kx0 * t.w_kx, te, bias, orow + ptrdiff_t(ox) * B, o);
  };
  for (int ox = 0; ox < x_lo; ++ox) edge(ox);
  for (int ox = x_hi; ox < s.ow; ++ox) edge(ox);
}

template <int B, int IB>
void Forward(const OwnConvShape& s, const float* src, const float* w, const float* bias, float* dst) {
  constexpr int OBN = Cfg<B>::OBN;
  const int ocbs = cdiv(s.oc, B);
  const int ncb = IB == 1 ? s.ic : cdiv(s.ic, B);
  Taps t;
  t.ncb = ncb;
  t.in_cb = ptrdiff_t(s.ih) * s.iw * IB;
  t.in_ky = ptrdiff_t(s.iw) * IB;
  t.in_kx = IB;
  t.in_px = ptrdiff_t(s.s) * IB;
  t.w_kx = IB * B;
  t.w_ky = ptrdiff_t(s.k) * IB * B;
  t.w_cb = ptrdiff_t(s.k) * s.k * IB * B;
  t.w_ob = ncb * t.w_cb;
  const ptrdiff_t in_img = ncb * t.in_cb;
  const int groups = cdiv(ocbs, OBN);
  // columns whose whole window lies inside [0, iw)
  int x_lo = std::min(s.ow, cdiv(s.pl, s.s));
  int x_hi = s.iw - s.k + s.pl >= 0 ? std::min(s.ow, (s.iw - s.k + s.pl) / s.s + 1) : 0;
  x_hi = std::max(x_hi, x_lo);
  const int chunk = ReductionChunk(ncb, t.in_cb, OBN * t.w_cb, s.k * s.k * IB);
  const long items = long(s.n) * groups * s.oh;
  const bool par = Parallel(s, long(s.oh) * s.ow);
  // small weights: all groups of a row before the next row (the input rows stay in cache)
  const bool rows_outer = ocbs * chunk * t.w_cb <= 24 * 1024;
  for (int c0 = 0; c0 < ncb; c0 += chunk)
#pragma omp parallel for schedule(static) if (par)
  for (long it = 0; it < items; ++it) {
    const int oy = int(rows_outer ? it / groups % s.oh : it % s.oh);
    const int g = int(rows_outer ? it % groups : it / s.oh % groups), img = int(it / s.oh / groups);
    const int ob0 = g * OBN, nob = std::min(OBN, ocbs - ob0);
    alignas(64) float bb[OBN * B];
    if (bias)
      for (int j = 0; j < nob * B; ++j) bb[j] = ob0 * B + j < s.oc ? bias[ob0 * B + j] : 0.f;
    Out o;
    o.px = B;
    o.ob = ptrdiff_t(s.oh) * s.ow * B;
    o.first = c0 == 0;
    o.last = c0 + chunk >= ncb;
    o.valid_last = ob0 + nob == ocbs ? s.oc - (ocbs - 1) * B : B;
    const int ky0 = std::max(0, s.pt - oy * s.s), ky1 = std::min(s.k, s.ih + s.pt - oy * s.s);
    Taps tr = t;
    tr.ncb = std::min(chunk, ncb - c0);
    tr.nky = std::max(0, ky1 - ky0);
    const float* irow = src + img * in_img + c0 * t.in_cb + (tr.nky ? ptrdiff_t(oy * s.s + ky0 - s.pt) * s.iw * IB : 0);
    const float* wg = w + ob0 * t.w_ob + c0 * t.w_cb + (tr.nky ? ky0 * t.w_ky : 0);
    float* orow = dst + ((ptrdiff_t(img) * ocbs + ob0) * s.oh + oy) * s.ow * B;
    WithN<OBN>(nob, [&]<int NOB>() {
      if (s.s == 1)
        ForwardRow<B, IB, NOB, IB>(s, tr, x_lo, x_hi, irow, wg, bias ? bb : nullptr, orow, o);
      else
        ForwardRow<B, IB, NOB, 0>(s, tr, x_lo, x_hi, irow, wg, bias ? bb : nullptr, orow, o);
    });
  }
}

// ---------------------------------------------------------------- backward data
// diff_src(iy, ix) = Σ_ocb Σ_ky Σ_kx Σ_j dd(oy, ox)[j] · w[ocb][icb][ky][kx][j][:], over the
// taps with iy + pt - ky = oy·s, ix + pl - kx = ox·s inside the diff_dst box (ky, kx ascending).
template <int B, bool kPlain, int NOB>
void BackwardDataRow(const OwnConvShape& s, const Taps& t, int x_lo, int x_hi, const float* ddrow, const float* wg,
                     float* orow, ptrdiff_t opx, const Out& o0) {
  constexpr int PMAX = Cfg<B>::PMAX;
  for (int rr = 0; rr < s.s; ++rr) {  // interior columns of one residue share their taps
    const int first = x_lo + rr;
    if (first >= x_hi) break;
    const int count = (x_hi - first + s.s - 1) / s.s;
    const int kxf = (first + s.pl) % s.s;
    Taps ti = t;
    ti.nkx = t.nky > 0 && kxf < s.k ? (s.k - 1 - kxf) / s.s + 1 : 0;
    Out o = o0;
    o.px = opx * s.s;
    Runs<PMAX>(count, [&]<int P>(int m) {
      const int ix = first + m * s.s, ox = (ix + s.pl - kxf) / s.s;
      Micro<B, B, P, NOB, B, kPlain>(ddrow + ptrdiff_t(ox) * B, wg + kxf * t.w_kx / s.s, ti, nullptr,
                                     orow + ix * opx, o);
    }, o.first && o.last);
  }
  auto edge = [&](int ix) {
    const int lo = std::max(0, ix + s.pl - (s.ow - 1) * s.s), hi = std::min(s.k - 1, ix + s.pl);
    const int kxf = first_congruent(lo, (ix + s.pl) % s.s, s.s);
    Taps te = t;
    te.nkx = t.nky > 0 && kxf <= hi ? (hi - kxf) / s.s + 1 : 0;
    const float* ip = te.nkx ? ddrow + ptrdiff_t((ix + s.pl - kxf) / s.s) * B : ddrow;
    Micro<B, B, 1, NOB, B, kPlain>(ip, wg + (te.nkx ? kxf * t.w_kx / s.s : 0), te, nullptr, orow + ix * opx, o0);
  };
  for (int ix = 0; ix < std::min(x_lo, s.iw); ++ix) edge(ix);
  for (int ix = std::max(x_hi, x_lo); ix < s.iw; ++ix) edge(ix);
}

template <int B, int IB>
void BackwardData(const OwnConvShape& s, const float* dd, const float* w, float* dsrc) {
  constexpr int OBN = Cfg<B>::OBN;
  constexpr bool kPlain = IB == 1;
  const int ocbs = cdiv(s.oc, B), icbs = cdiv(s.ic, B);
  Taps t;
  t.ncb = ocbs;
  t.in_cb = ptrdiff_t(s.oh) * s.ow * B;
  t.in_ky = -ptrdiff_t(s.ow) * B;
  t.in_kx = -B;
  t.in_px = B;
  t.w_ob = ptrdiff_t(s.k) * s.k * B * B;
  t.w_cb = icbs * t.w_ob;
  t.w_ky = ptrdiff_t(s.s) * s.k * B * B;
  t.w_kx = ptrdiff_t(s.s) * B * B;
  const int groups = cdiv(icbs, OBN);
  // columns that every tap of their residue reaches inside [0, ow)
  const int x_lo = std::max(0, s.k - 1 - s.pl);
  const int x_hi = std::max(x_lo, std::min(s.iw, (s.ow - 1) * s.s - s.pl + 1));
  // plain diff_src is scattered, so its sum is not split
  const int chunk = kPlain ? ocbs : ReductionChunk(ocbs, t.in_cb, OBN * t.w_ob, std::max(1, s.k * s.k * B / (s.s * s.s)));
  const long items = long(s.n) * groups * s.ih;
  const bool par = Parallel(s, long(s.oh) * s.ow);
  const bool rows_outer = false;  // a group sweeps all rows: forward's rows-outer order was slower here
  for (int c0 = 0; c0 < ocbs; c0 += chunk)
#pragma omp parallel for schedule(static) if (par)
  for (long it = 0; it < items; ++it) {
    const int iy = int(rows_outer ? it / groups % s.ih : it % s.ih);
    const int g = int(rows_outer ? it % groups : it / s.ih % groups), img = int(it / s.ih / groups);
    const int ib0 = g * OBN, nob = std::min(OBN, icbs - ib0);
    Out o;
    o.first = c0 == 0;
    o.last = c0 + chunk >= ocbs;
    o.valid_last = ib0 + nob == icbs ? s.ic - (icbs - 1) * B : B;
    float* orow;
    ptrdiff_t opx;
    if constexpr (kPlain) {
      o.ch = ptrdiff_t(s.ih) * s.iw;
      o.ob = B * o.ch;
      opx = 1;
      orow = dsrc + (ptrdiff_t(img) * s.ic + ib0 * B) * o.ch + ptrdiff_t(iy) * s.iw;
    } else {
      o.ob = ptrdiff_t(s.ih) * s.iw * B;
      opx = B;
      orow = dsrc + ((ptrdiff_t(img) * icbs + ib0) * s.ih + iy) * s.iw * B;
    }
    o.px = opx;
    const int lo = std::max(0, iy + s.pt - (s.oh - 1) * s.s), hi = std::min(s.k - 1, iy + s.pt);
    const int kyf = first_congruent(lo, (iy + s.pt) % s.s, s.s);
    Taps tr = t;
    tr.ncb = std::min(chunk, ocbs - c0);
    tr.nky = kyf <= hi ? (hi - kyf) / s.s + 1 : 0;
    const float* ddrow = dd + (ptrdiff_t(img) * ocbs + c0) * t.in_cb +
                         (tr.nky ? ptrdiff_t((iy + s.pt - kyf) / s.s) * s.ow * B : 0);
    const float* wg = w + ib0 * t.w_ob + c0 * t.w_cb + (tr.nky ? ptrdiff_t(kyf) * s.k * B * B : 0);
    WithN<OBN>(nob, [&]<int NOB>() { BackwardDataRow<B, kPlain, NOB>(s, tr, x_lo, x_hi, ddrow, wg, orow, opx, o); });
  }
}

// ---------------------------------------------------------------- entry points per target
void ForwardImpl(const OwnConvShape& s, const float* src, const float* w, const float* bias, float* dst) {
  if (s.b == 8)
    s.ib == 1 ? Forward<8, 1>(s, src, w, bias, dst) : Forward<8, 8>(s, src, w, bias, dst);
  else
    s.ib == 1 ? Forward<16, 1>(s, src, w, bias, dst) : Forward<16, 16>(s, src, w, bias, dst);
}
void BackwardDataImpl(const OwnConvShape& s, const float* dd, const float* w, float* dsrc) {
  if (s.b == 8)
    s.ib == 1 ? BackwardData<8, 1>(s, dd, w, dsrc) : BackwardData<8, 8>(s, dd, w, dsrc);
  else
    s.ib == 1 ? BackwardData<16, 1>(s, dd, w, dsrc) : BackwardData<16, 16>(s, dd, w, dsrc);
}
int64_t TargetImpl() { return HWY_TARGET; }

}  // namespace tt::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tt {
HWY_EXPORT(ForwardImpl);
HWY_EXPORT(BackwardDataImpl);
HWY_EXPORT(TargetImpl);

namespace own_detail {
namespace {
// ONEDNN_MAX_CPU_ISA (or DNNL_MAX_CPU_ISA) below AVX-512 caps the own kernels too, so that
// a capped run on an AVX-512 machine is an AVX2 machine's run throughout (kernel table,
// speed, and the exactness tests of the AVX2 kernels). Done once, before the first dispatch.
bool cap_to_onednn_isa() {
#if HWY_ARCH_X86
  const char* cap = std::getenv("ONEDNN_MAX_CPU_ISA");
  if (!cap) cap = std::getenv("DNNL_MAX_CPU_ISA");
  if (cap) {
    std::string isa(cap);
    for (char& c : isa) c = char(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
    if (!isa.empty() && isa.rfind("AVX512", 0) != 0 && isa != "ALL" && isa != "DEFAULT")
      hwy::DisableTargets(HWY_AVX3 | HWY_AVX3_DL);
  }
#endif
  return true;
}
}  // namespace

void apply_isa_cap() { static const bool done = cap_to_onednn_isa(); (void)done; }

// The one place b and ib are checked: every kernel is instantiated for b in {8, 16}, ib in {1, b}.
void check(const OwnConvShape& s) {
  if (s.b != 8 && s.b != 16) fail("own_conv: channel block b = ", s.b, " (supported: 8, 16)");
  if (s.ib != 1 && s.ib != s.b) fail("own_conv: input block ib = ", s.ib, " with b = ", s.b, " (supported: 1 or b)");
  if (s.n < 1 || s.ic < 1 || s.oc < 1 || s.k < 1 || s.s < 1 || s.ih < 1 || s.iw < 1 || s.oh < 1 || s.ow < 1 ||
      s.pt < 0 || s.pl < 0)
    fail("own_conv: bad shape n ", s.n, " ic ", s.ic, " oc ", s.oc, " k ", s.k, " s ", s.s, " in ", s.ih, "x", s.iw,
         " out ", s.oh, "x", s.ow, " pad ", s.pt, ",", s.pl);
}
}  // namespace own_detail

using own_detail::apply_isa_cap;
using own_detail::check;

dnnl::memory::format_tag own_weights_tag(int b, int ib, OwnPass pass) {
  using tag = dnnl::memory::format_tag;
  OwnConvShape s;
  s.b = b;
  s.ib = ib;
  check(s);
  if (pass == OwnPass::BackwardWeights) return tag::oihw;
  if (pass == OwnPass::BackwardData) return b == 8 ? tag::OIhw8o8i : tag::OIhw16o16i;
  if (ib == 1) return b == 8 ? tag::Abcd8a : tag::Abcd16a;  // Oihw8o / Oihw16o
  return b == 8 ? tag::OIhw8i8o : tag::OIhw16i16o;
}

long own_weights_floats(const OwnConvShape& s, OwnPass pass) {
  check(s);
  if (pass == OwnPass::BackwardWeights) return long(s.oc) * s.ic * s.k * s.k;
  const long ocp = long(own_detail::cdiv(s.oc, s.b)) * s.b;
  const long icp = pass == OwnPass::BackwardData || s.ib != 1 ? long(own_detail::cdiv(s.ic, s.b)) * s.b : s.ic;
  return ocp * icp * s.k * s.k;
}

void own_conv_forward(const OwnConvShape& s, const float* src, const float* w, const float* bias, float* dst) {
  check(s);
  apply_isa_cap();
  HWY_DYNAMIC_DISPATCH(ForwardImpl)(own_detail::flat_1x1(s), src, w, bias, dst);
}
void own_conv_backward_data(const OwnConvShape& s, const float* diff_dst, const float* w, float* diff_src) {
  check(s);
  apply_isa_cap();
  HWY_DYNAMIC_DISPATCH(BackwardDataImpl)(own_detail::flat_1x1(s), diff_dst, w, diff_src);
}

std::string own_conv_target() {
  apply_isa_cap();
  std::string n = hwy::TargetName(HWY_DYNAMIC_DISPATCH(TargetImpl)());
  for (char& c : n) c = char(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return n;
}

}  // namespace tt
#endif  // HWY_ONCE
