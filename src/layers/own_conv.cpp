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

// SVE / RVV have no compile-time lane count; the devices (Raspberry Pi 3/4/5) have none.
// On x86 every target from AVX2 up is compiled, whatever -march says, so that a build on
// an AVX-512 machine still has the AVX2 kernels: an ISA cap (ONEDNN_MAX_CPU_ISA=AVX2, see
// cap_to_onednn_isa below) then runs and tests them there. Below AVX2 nothing is fast.
#ifndef HWY_DISABLED_TARGETS
#if defined(__AVX2__)
#define HWY_COMPILE_ALL_ATTAINABLE
#define HWY_DISABLED_TARGETS \
  (HWY_SVE | HWY_SVE2 | HWY_SVE_256 | HWY_SVE2_128 | HWY_RVV | HWY_SCALAR | HWY_EMU128 | HWY_SSSE3 | HWY_SSE4)
#else
#define HWY_DISABLED_TARGETS (HWY_SVE | HWY_SVE2 | HWY_SVE_256 | HWY_SVE2_128 | HWY_RVV)
#endif
#endif
// Highway 1.0.3 (Debian 12) leaves AVX3_DL out of the dispatch targets unless asked, but
// makes it the static target when -march=native has VNNI/VBMI2 (AMD Zen 4, Intel Ice Lake
// and later), and then refuses to compile ("best baseline should be included in dynamic
// targets").
#define HWY_WANT_AVX3_DL

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "layers/own_conv.hpp"
#include "layers/pointwise.hpp"
#include "util/error.hpp"

#ifndef TT_OWN_CONV_COMMON
#define TT_OWN_CONV_COMMON
namespace tt::own_detail {
inline int cdiv(int a, int b) { return (a + b - 1) / b; }
// Smallest t >= lo (lo >= 0) with t ≡ r (mod s), 0 <= r < s.
inline int first_congruent(int lo, int r, int s) { return lo + ((r - lo % s) % s + s) % s; }
// A 1x1 stride-1 convolution without padding on a whole box is the same per-pixel
// computation on one long row: fewer, longer pixel runs.
inline tt::OwnConvShape flat_1x1(tt::OwnConvShape s) {
  if (s.k == 1 && s.s == 1 && s.pt == 0 && s.pl == 0 && s.ih == s.oh && s.iw == s.ow) {
    s.iw = s.ow = s.ih * s.iw;
    s.ih = s.oh = 1;
  }
  return s;
}
// Backward-weights sums a chunk of about this many output pixels in registers, then adds
// the sums into the plain gradient one lane at a time: fewer, larger chunks make fewer of
// those scattered adds. A chunk's zero-padded input rows are copied once, so the chunk
// also bounds that copy.
constexpr int kWeightsChunkPixels = 8192;
}  // namespace tt::own_detail
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "layers/own_conv.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace tt::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using own_detail::cdiv;
using own_detail::first_congruent;

#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL || (HWY_ARCH_ARM_A64 && HWY_TARGET == HWY_NEON)
constexpr int kRegs = 32;
#else
constexpr int kRegs = 16;
#endif

template <int B>
struct Cfg {
  using D = hn::CappedTag<float, B>;
  static constexpr int L = int(hn::MaxLanes(D()));
  static_assert(B % L == 0, "block must be whole vectors");
  static constexpr int NV = B / L;  // vectors per channel block
  // forward / backward-data: output blocks and pixels per micro-kernel call
  static constexpr int OBN = (NV == 1 || kRegs == 32) ? 2 : 1;
  static constexpr int PMAX = std::min(12, (kRegs - 1 - OBN * NV) / (OBN * NV));
  // backward-weights: weight rows (lanes i, or kx taps for plain input) x output blocks
  static constexpr int WT = (kRegs == 32 && NV == 1) ? 8 : 4;
  static constexpr int WOBN = std::clamp((kRegs - 1) / ((WT + 1) * NV), 1, 3);
};

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

// Calls f.template operator()<N>() with N = n in [1, NMAX].
template <int NMAX, class F>
HWY_INLINE void WithN(int n, F&& f) {
  if constexpr (NMAX >= 3)
    if (n == 3) return f.template operator()<3>();
  if constexpr (NMAX >= 2)
    if (n == 2) return f.template operator()<2>();
  if (n == 1) return f.template operator()<1>();
  HWY_ASSERT(false);
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

// Threads only for calls big enough to pay for waking them (many small tiles run faster
// on one thread, and a loaded machine makes idle OpenMP threads expensive).
inline bool Parallel(const OwnConvShape& s, long pixels) {
  return double(s.n) * pixels * s.ic * s.oc * s.k * s.k > 4e6;
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

// ---------------------------------------------------------------- backward weights
// GCC folds a vector reused by several FMAs into each FMA's memory operand, which turns the
// micro-kernel's T + NOB loads per pixel into T + T·NOB and makes it load-bound; an empty
// asm that claims to change the register keeps it loaded once.
template <class V>
HWY_INLINE void KeepInRegister(V& v) {
#if HWY_ARCH_X86 && (HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL)
  asm("" : "+v"(v.raw));
#else
  (void)v;
#endif
}

// For row t (an input channel, or a kx tap of a plain input) and output channel o counted
// from the call's first block: out[o · o_stride + t · t_stride] += Σ_rows Σ_px sp[row][px][t]
// · dp[o / B][row][px][o % B], into the plain gradient, for real channels o < o_valid and
// rows t < t_valid only (the blocked maps' padded lanes are not weights).
struct WOut {
  float* out;
  ptrdiff_t o_stride, t_stride;
  int o_valid, t_valid;
};

template <int B, int T, int NOB, int PX>
HWY_NOINLINE void WMicro(const float* HWY_RESTRICT sp, ptrdiff_t sp_px, ptrdiff_t sp_row, const float* HWY_RESTRICT dp,
                         ptrdiff_t d_ob, ptrdiff_t d_row, int rows, int npx, const WOut& o) {
  using C = Cfg<B>;
  using D = typename C::D;
  using V = hn::Vec<D>;
  constexpr int L = C::L, NV = C::NV;
  const D d;
  const ptrdiff_t spx = PX ? PX : sp_px;
  V acc[T][NOB][NV];
  for (int t = 0; t < T; ++t)
    for (int ob = 0; ob < NOB; ++ob)
      for (int v = 0; v < NV; ++v) acc[t][ob][v] = hn::Zero(d);
  for (int r = 0; r < rows; ++r) {
    const float* HWY_RESTRICT sr = sp + r * sp_row;
    const float* HWY_RESTRICT dr = dp + r * d_row;
    for (int x = 0; x < npx; ++x) {
      V dv[NOB][NV];
#pragma GCC unroll 4
      for (int ob = 0; ob < NOB; ++ob)
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) {
          dv[ob][v] = hn::LoadU(d, dr + x * B + ob * d_ob + v * L);
          KeepInRegister(dv[ob][v]);
        }
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const V xv = hn::Set(d, sr[x * spx + t]);
#pragma GCC unroll 4
        for (int ob = 0; ob < NOB; ++ob)
#pragma GCC unroll 4
          for (int v = 0; v < NV; ++v) acc[t][ob][v] = hn::MulAdd(xv, dv[ob][v], acc[t][ob][v]);
      }
    }
  }
  // Added lane by lane: plain weights hold an output channel's sums ic·k·k floats apart.
  // Once per call (hundreds of pixels), where a oneDNN-style blocked gradient would cost a
  // whole reorder pass over the weights afterwards.
  alignas(64) float lanes[B];
  for (int t = 0; t < std::min(T, o.t_valid); ++t)
    for (int ob = 0; ob < NOB; ++ob) {
      for (int v = 0; v < NV; ++v) hn::StoreU(acc[t][ob][v], d, lanes + v * L);
      const int n = std::min(B, o.o_valid - ob * B);
      float* HWY_RESTRICT w = o.out + ob * B * o.o_stride + t * o.t_stride;
      for (int j = 0; j < n; ++j) w[j * o.o_stride] += lanes[j];
    }
}

template <int B, int IB>
void BackwardWeights(const OwnConvShape& s, const float* src, const float* dd, float* dw, bool accumulate) {
  using C = Cfg<B>;
  constexpr int WOBN = C::WOBN;
  constexpr int WT = IB == 1 ? std::min(4, C::WT) : C::WT;  // plain: kx taps per call
  const int ocbs = cdiv(s.oc, B), icbs = cdiv(s.ic, B);
  const int ncb = IB == 1 ? s.ic : icbs;
  const ptrdiff_t kk = ptrdiff_t(s.k) * s.k;
  const ptrdiff_t o_stride = ptrdiff_t(s.ic) * kk;  // plain oihw
  const ptrdiff_t d_ob = ptrdiff_t(s.oh) * s.ow * B;
  if (!accumulate) std::fill(dw, dw + ptrdiff_t(s.oc) * o_stride, 0.f);

  const int chunk = std::max(1, own_detail::kWeightsChunkPixels / s.ow);
  const int wp = (s.ow - 1) * s.s + s.k;  // padded row: column xp holds input column xp - pl
  const int groups = cdiv(ocbs, WOBN);
  thread_local std::vector<float> pad_buf;
  for (int img = 0; img < s.n; ++img)
    for (int oy0 = 0; oy0 < s.oh; oy0 += chunk) {
      const int oy1 = std::min(s.oh, oy0 + chunk);
      const int iy_a = oy0 * s.s - s.pt, rows_in = (oy1 - oy0 - 1) * s.s + s.k;
      const ptrdiff_t row_len = ptrdiff_t(wp) * IB, cb_len = rows_in * row_len;
      if (pad_buf.size() < size_t(ncb * cb_len)) pad_buf.resize(size_t(ncb * cb_len));
      float* pad = pad_buf.data();
      // zero-padded copy of the input rows this chunk reads (rows outside [0, ih) are never read)
      const int xs0 = std::max(0, s.pl), xs1 = std::min(wp, s.iw + s.pl);  // padded columns with input
      for (int cb = 0; cb < ncb; ++cb)
        for (int r = 0; r < rows_in; ++r) {
          const int iy = iy_a + r;
          if (iy < 0 || iy >= s.ih) continue;
          float* prow = pad + cb * cb_len + r * row_len;
          const float* srow = src + ((ptrdiff_t(img) * ncb + cb) * s.ih + iy) * s.iw * IB;
          if (xs1 <= xs0) {
            std::fill(prow, prow + row_len, 0.f);
            continue;
          }
          std::fill(prow, prow + ptrdiff_t(xs0) * IB, 0.f);
          std::memcpy(prow + ptrdiff_t(xs0) * IB, srow + ptrdiff_t(xs0 - s.pl) * IB, sizeof(float) * (xs1 - xs0) * IB);
          std::fill(prow + ptrdiff_t(xs1) * IB, prow + row_len, 0.f);
        }
      const long items = long(groups) * ncb;
      const bool par = Parallel(s, long(oy1 - oy0) * s.ow) && items > 1;
#pragma omp parallel for schedule(dynamic) if (par)
      for (long it = 0; it < items; ++it) {
        const int cb = int(it % ncb), g = int(it / ncb);
        const int ob0 = g * WOBN, nob = std::min(WOBN, ocbs - ob0);
        for (int ky = 0; ky < s.k; ++ky) {
          // output rows of the chunk whose tap ky lies inside [0, ih)
          const int ya = std::max(oy0, s.pt - ky > 0 ? cdiv(s.pt - ky, s.s) : 0);
          const int yb = s.ih - 1 + s.pt - ky >= 0 ? std::min(oy1, (s.ih - 1 + s.pt - ky) / s.s + 1) : 0;
          if (ya >= yb) continue;
          const float* sp_row = pad + cb * cb_len + ptrdiff_t(ya * s.s + ky - s.pt - iy_a) * row_len;
          const float* dp = dd + ((ptrdiff_t(img) * ocbs + ob0) * s.oh + ya) * s.ow * B;
          const ptrdiff_t sp_px = ptrdiff_t(s.s) * IB, sp_rstride = ptrdiff_t(s.s) * row_len, d_row = ptrdiff_t(s.ow) * B;
          // weight (o = ob0·B, i = the call's first row's channel, ky, kx = 0)
          const int o_valid = s.oc - ob0 * B;
          float* wout = dw + ptrdiff_t(ob0) * B * o_stride + ky * s.k;
          WithN<WOBN>(nob, [&]<int NOB>() {
            auto call = [&]<int TT>(const float* sp, const WOut& o) {
              if (s.s == 1)
                WMicro<B, TT, NOB, IB>(sp, sp_px, sp_rstride, dp, d_ob, d_row, yb - ya, s.ow, o);
              else
                WMicro<B, TT, NOB, 0>(sp, sp_px, sp_rstride, dp, d_ob, d_row, yb - ya, s.ow, o);
            };
            if constexpr (IB == 1) {  // rows of the call: kx taps of input channel cb
              for (int kx0 = 0; kx0 < s.k; kx0 += WT) {
                const int tn = std::min(WT, s.k - kx0);
                const WOut o{wout + cb * kk + kx0, o_stride, 1, o_valid, tn};
                auto one = [&]<int TT>() { call.template operator()<TT>(sp_row + kx0, o); };
                if (tn == WT) one.template operator()<WT>();
                else if (tn == 3) one.template operator()<3>();
                else if (tn == 2) one.template operator()<2>();
                else one.template operator()<1>();
              }
            } else {  // rows of the call: lanes i of the input block
              // A lone output block (the last of a layer whose block count WOBN does not
              // divide) takes twice the rows, to keep as many accumulators in flight.
              constexpr int T2 = std::min(2 * WT, IB);
              constexpr int TT = NOB == 1 && (T2 + 1) * C::NV + 1 <= kRegs ? T2 : WT;
              for (int kx = 0; kx < s.k; ++kx)
                for (int i0 = 0; i0 < IB; i0 += TT) {
                  const int i = cb * IB + i0;
                  if (i >= s.ic) break;
                  const WOut o{wout + i * kk + kx, o_stride, kk, o_valid, s.ic - i};
                  call.template operator()<TT>(sp_row + kx * IB + i0, o);
                }
            }
          });
        }
      }
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
void BackwardWeightsImpl(const OwnConvShape& s, const float* src, const float* dd, float* dw, bool accumulate) {
  if (s.b == 8)
    s.ib == 1 ? BackwardWeights<8, 1>(s, src, dd, dw, accumulate) : BackwardWeights<8, 8>(s, src, dd, dw, accumulate);
  else
    s.ib == 1 ? BackwardWeights<16, 1>(s, src, dd, dw, accumulate) : BackwardWeights<16, 16>(s, src, dd, dw, accumulate);
}
int64_t TargetImpl() { return HWY_TARGET; }

}  // namespace tt::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tt {
HWY_EXPORT(ForwardImpl);
HWY_EXPORT(BackwardDataImpl);
HWY_EXPORT(BackwardWeightsImpl);
HWY_EXPORT(TargetImpl);

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
}  // namespace

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
void own_conv_backward_weights(const OwnConvShape& s, const float* src, const float* diff_dst, float* diff_w,
                               float* diff_b, bool accumulate) {
  check(s);
  apply_isa_cap();
  const bool flat = long(s.oh) * s.ow <= own_detail::kWeightsChunkPixels;  // keeps the chunks' size
  HWY_DYNAMIC_DISPATCH(BackwardWeightsImpl)(flat ? own_detail::flat_1x1(s) : s, src, diff_dst, diff_w, accumulate);
  if (diff_b) {
    std::fill(diff_b, diff_b + s.oc, 0.f);
    add_channel_sums(diff_dst, s.n, s.oc, s.b, long(s.oh) * s.ow, diff_b);
  }
}

std::string own_conv_target() {
  apply_isa_cap();
  std::string n = hwy::TargetName(HWY_DYNAMIC_DISPATCH(TargetImpl)());
  for (char& c : n) c = char(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return n;
}

}  // namespace tt
#endif  // HWY_ONCE
