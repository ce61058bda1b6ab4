// The own backward-weights kernel with Google Highway: see own_conv.hpp for the layouts.
// Each call sums a chunk of output pixels for a few weight rows (input lanes, or kx taps
// of a plain input) by output blocks in registers, then adds the sums into the plain oihw
// gradient. This file is compiled once per Highway target (foreach_target.h); forward and
// backward-data are in own_conv_maps.cpp.
// clang-format off
#include "layers/own_conv_common.hpp"  // first: Highway's target macros
// clang-format on

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <vector>

#include "layers/pointwise.hpp"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "layers/own_conv_weights.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "layers/own_conv-inl.hpp"

HWY_BEFORE_NAMESPACE();
namespace tt::HWY_NAMESPACE {

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

  const int chunk = own_detail::weights_chunk_rows(s);
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

void BackwardWeightsImpl(const OwnConvShape& s, const float* src, const float* dd, float* dw, bool accumulate) {
  if (s.b == 8)
    s.ib == 1 ? BackwardWeights<8, 1>(s, src, dd, dw, accumulate) : BackwardWeights<8, 8>(s, src, dd, dw, accumulate);
  else
    s.ib == 1 ? BackwardWeights<16, 1>(s, src, dd, dw, accumulate) : BackwardWeights<16, 16>(s, src, dd, dw, accumulate);
}

}  // namespace tt::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tt {
HWY_EXPORT(BackwardWeightsImpl);

namespace {
OwnConvShape weights_shape(const OwnConvShape& s) {
  const bool flat = long(s.oh) * s.ow <= own_detail::kWeightsChunkPixels;  // keeps the chunks' size
  return flat ? own_detail::flat_1x1(s) : s;
}
}  // namespace

bool own_conv_weights_add_once(const OwnConvShape& s) {
  const OwnConvShape w = weights_shape(s);
  return w.n == 1 && own_detail::weights_chunk_rows(w) >= w.oh;
}

void own_conv_backward_weights(const OwnConvShape& s, const float* src, const float* diff_dst, float* diff_w,
                               float* diff_b, bool accumulate) {
  own_detail::check(s);
  own_detail::apply_isa_cap();
  HWY_DYNAMIC_DISPATCH(BackwardWeightsImpl)(weights_shape(s), src, diff_dst, diff_w, accumulate);
  if (diff_b) {
    std::fill(diff_b, diff_b + s.oc, 0.f);
    add_channel_sums(diff_dst, s.n, s.oc, s.b, long(s.oh) * s.ow, diff_b);
  }
}

}  // namespace tt
#endif  // HWY_ONCE
